// Response bodies in the OpenAI shapes (text_completion, chat.completion and their streamed
// chunks, error objects) and Mosaic's /generate shape. Every answer carries a "mosaic" object
// with what the request recorded: steps, NFE, tokens per step, queue time, time to the first
// committed token, the generated ids.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "serve/api_error.h"
#include "serve/api_request.h"
#include "serve/ticket.h"

namespace mosaic::serve {

struct ResponseIdentity {
  std::string id;       // "cmpl-…" / "chatcmpl-…" / "gen-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// What a finished request produced, ready for any of the shapes.
struct Answer {
  std::string text;
  std::string finish_reason;  // "stop": the answer ended (EOS / end of turn); "length": it did not
  int64_t prompt_tokens = 0, completion_tokens = 0;
  const GenerateResult* result = nullptr;
  const RequestRecord* record = nullptr;
};

nlohmann::ordered_json error_body(const ApiError& error);
nlohmann::ordered_json answer_body(Endpoint endpoint, const ResponseIdentity& identity, const Answer& answer);
// A streamed piece: `delta` text, or with `finish` the last piece (finish_reason, usage, mosaic).
nlohmann::ordered_json stream_chunk(Endpoint endpoint, const ResponseIdentity& identity, const std::string& delta,
                                    const Answer* finish = nullptr);
// The chat stream's first chunk: {"delta": {"role": "assistant", "content": ""}}.
nlohmann::ordered_json stream_role_chunk(const ResponseIdentity& identity);
std::string sse_event(const nlohmann::ordered_json& body);  // "data: {...}\n\n"
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace mosaic::serve
