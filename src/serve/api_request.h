// An HTTP request body, checked and turned into what the server plans from: the prompt (text,
// token ids or chat turns), an infilling suffix, the generation options and the OpenAI fields
// that shape the answer (n, stop, logprobs, echo, stream_options). OpenAI fields are mapped
// (max_tokens / max_completion_tokens -> gen_length); the dLLM parameters are extra fields of the
// same names as GenerationOptions (steps, gen_length, block_length, remasking, alg, threshold, ...).
// Unknown fields are ignored, as OpenAI-compatible servers do; known fields of the wrong type or
// out of range, and OpenAI features that would change the answer and that Mosaic does not have
// (logit_bias, response_format other than text, tools, best_of > 1, penalties), are a 400 naming
// the field (docs/design/openai-surface.md). What depends on the prompt's length (the default
// max_tokens, the context, the steps' bound) is checked once it is encoded (generation_plan.h).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mosaic/engine.h"

namespace mosaic::serve {

enum class Endpoint { completions, chat_completions, generate };

struct ApiRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;                // as given; empty when absent
  std::optional<std::string> text;  // a text prompt
  std::vector<int32_t> prompt_ids;  // a prompt of token ids (when `text` and `messages` are empty)
  std::vector<ChatTurn> messages;   // /v1/chat/completions
  std::optional<std::string> suffix;  // infilling: text after the generated span (completions, /generate)
  bool parse_special = false;       // special-token text in prompt, messages and suffix is that token
  bool chat = false;                // /generate: wrap the text prompt in the chat format
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage: a last chunk with the usage
  // Not yet checked against the model (Engine::resolve_options). gen_length and steps hold what
  // the request gave; 0 where it gave nothing (the plan derives them).
  GenerationOptions options;
  std::string gen_length_field;     // the field that set gen_length ("max_tokens", ...); empty: none
  bool seed_given = false;
  int64_t n = 1;                    // choices, each with its own seed (seed + index)
  std::vector<std::string> stop;    // the answer ends before the first of these (finish_reason "stop")
  std::optional<int64_t> logprobs;  // the committed tokens' log-probabilities, with this many top ones
  bool echo = false;                // completions: the answer starts with the prompt's text
};

// What a request gets when it leaves a field out, and the largest values the server accepts.
struct RequestLimits {
  int64_t default_gen_length = 128;      // at most the context the prompt leaves
  std::optional<int64_t> default_steps;  // unset: the request's gen_length (one token per step)
  int64_t max_gen_length = 4096;
  int64_t max_steps = 65536;
  int64_t max_n = 16;
  int64_t max_stop = 4;                  // stop strings per request (OpenAI's limit)
  int64_t vocab = 0;                     // token ids must lie in [0, vocab)
  CacheMode default_cache = CacheMode::automatic;  // a request without "cache" (serve --cache)
  std::optional<D2fOptions> default_d2f;           // a request without "d2f" (serve --d2f)
};

// A request body as JSON, nested at most kJsonMaxDepth deep (a value nested 100,000 levels deep
// overflowed the stack when dumped into an error message). Throws ApiError (400) otherwise.
nlohmann::json parse_request_body(std::string_view body);

// Throws ApiError (400) naming the field at fault.
ApiRequest parse_api_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits);

}  // namespace mosaic::serve
