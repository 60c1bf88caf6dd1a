// An HTTP request body, checked and turned into what the scheduler runs: the prompt (text, token
// ids or chat turns), the generation options and whether to stream. OpenAI fields are mapped
// (max_tokens -> gen_length); the dLLM parameters are extra fields of the same names as
// GenerationOptions (steps, gen_length, block_length, remasking, alg, threshold, ...). Unknown
// fields are ignored, as OpenAI-compatible servers do; known fields of the wrong type or out of
// range, and OpenAI features Mosaic does not have (n > 1, stop sequences, logprobs, echo), are a
// 400 naming the field.
#pragma once

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
  bool chat = false;                // /generate: wrap the text prompt in the chat format
  bool stream = false;
  GenerationOptions options;        // not yet checked against the model (Engine::resolve_options)
};

// What a request gets when it leaves a field out, and the largest values the server accepts.
struct RequestLimits {
  int64_t default_gen_length = 128;
  std::optional<int64_t> default_steps;  // unset: the request's gen_length (one token per step)
  int64_t max_gen_length = 4096;
  int64_t max_steps = 65536;
  int64_t vocab = 0;                     // token ids must lie in [0, vocab)
  CacheMode default_cache = CacheMode::automatic;  // a request without "cache" (serve --cache)
};

// Throws ApiError (400) naming the field at fault.
ApiRequest parse_api_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits);

}  // namespace mosaic::serve
