// Response bodies in the OpenAI shapes (text_completion, chat.completion and their streamed
// chunks, the usage chunk, error objects) and Mosaic's /generate shape. Every answer carries a
// "mosaic" object with what the request recorded: steps, NFE, tokens per step, queue time, time to
// the first committed token, the seed, the generated ids (with n > 1, each choice has its own).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "serve/api_error.h"
#include "serve/api_request.h"
#include "serve/choice_answer.h"

namespace mosaic::serve {

struct ResponseIdentity {
  std::string id;       // "cmpl-…" / "chatcmpl-…" / "gen-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// What a finished request produced, ready for any of the shapes.
struct Answer {
  std::vector<ChoiceAnswer> choices;
  int64_t prompt_tokens = 0;           // prompt + suffix
  std::optional<int64_t> logprobs;     // the request asked for log-probabilities with this many top ones
};

nlohmann::ordered_json error_body(const ApiError& error);
nlohmann::ordered_json answer_body(Endpoint endpoint, const ResponseIdentity& identity, const Answer& answer);
// A streamed piece of choice `index`: `delta` text, or with `finish` its last piece
// (finish_reason, usage, mosaic).
nlohmann::ordered_json stream_chunk(Endpoint endpoint, const ResponseIdentity& identity, int64_t index,
                                    const std::string& delta, const ChoiceAnswer* finish = nullptr,
                                    int64_t prompt_tokens = 0);
// The chat stream's first chunk of choice `index`: {"delta": {"role": "assistant", "content": ""}}.
nlohmann::ordered_json stream_role_chunk(const ResponseIdentity& identity, int64_t index = 0);
// stream_options.include_usage: the chunk after every choice's last, {"choices": [], "usage": ...}.
nlohmann::ordered_json stream_usage_chunk(Endpoint endpoint, const ResponseIdentity& identity, const Answer& answer);
std::string sse_event(const nlohmann::ordered_json& body);  // "data: {...}\n\n"
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace mosaic::serve
