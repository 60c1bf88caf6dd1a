#include "serve/generation_plan.h"

#include <algorithm>
#include <limits>
#include <random>

#include "serve/api_error.h"

namespace mosaic::serve {
namespace {

// The request's name for a GenerationOptions field: its own max_tokens spelling for gen_length;
// the option itself otherwise ("" for the ids the server fills in).
std::string param_of(const std::string& option, const ApiRequest& request) {
  if (option == "gen_length")
    return !request.gen_length_field.empty() ? request.gen_length_field
           : request.endpoint == Endpoint::generate ? "gen_length" : "max_tokens";
  if (option == "eos_id" || option == "eot_id") return "";
  return option;
}

template <typename F>
auto naming_options(const ApiRequest& request, F&& run) {
  try {
    return run();
  } catch (const OptionError& error) {
    throw ApiError(400, "invalid_request_error", error.what(), param_of(error.option(), request));
  } catch (const Error& error) {
    throw ApiError(400, "invalid_request_error", error.what());
  }
}

std::vector<int32_t> encode_prompt(const Engine& engine, const ApiRequest& request, const std::string& param) {
  try {
    if (!request.messages.empty()) return engine.encode_chat(request.messages, request.parse_special);
    if (request.text) return engine.encode(*request.text, request.chat, request.parse_special);
  } catch (const Error& error) {
    bad_request(param, "{}", error.what());
  }
  return request.prompt_ids;
}

}  // namespace

uint64_t operating_system_seed() {
  std::random_device entropy;
  const uint64_t seed = (uint64_t{entropy()} << 32) ^ entropy();
  return seed & uint64_t{std::numeric_limits<int64_t>::max()};
}

GenerationPlan plan_generation(const Engine& engine, const ApiRequest& request, const RequestLimits& limits,
                               bool allow_long_context, uint64_t (*random_seed)()) {
  GenerationPlan plan;
  plan.prompt_param = request.endpoint == Endpoint::chat_completions ? "messages" : "prompt";
  const std::string& prompt_param = plan.prompt_param;
  plan.prompt_ids = encode_prompt(engine, request, prompt_param);
  if (plan.prompt_ids.empty()) bad_request(prompt_param, "the prompt encodes to no tokens");
  if (request.suffix) {
    try {
      plan.suffix_ids = engine.encode(*request.suffix, false, request.parse_special);
    } catch (const Error& error) {
      bad_request("suffix", "{}", error.what());
    }
  }

  // The context: the prompt (and suffix) first, then what is generated between them.
  GenerationOptions options = request.options;
  const int64_t given = static_cast<int64_t>(plan.prompt_ids.size() + plan.suffix_ids.size());
  const int64_t context = engine.info().max_position;
  const bool bounded = context > 0 && !allow_long_context;
  const std::string what = plan.suffix_ids.empty()
                               ? fmt::format("the prompt ({} tokens)", plan.prompt_ids.size())
                               : fmt::format("the prompt ({} tokens) and suffix ({} tokens)", plan.prompt_ids.size(),
                                             plan.suffix_ids.size());
  if (bounded && given >= context)
    bad_request(request.suffix && plan.prompt_ids.size() < static_cast<size_t>(context) ? "suffix" : prompt_param,
                "{} take {} of the model's {} context tokens, leaving none to generate", what, given, context);
  if (options.gen_length == 0) {
    // Left out: the server's default, at most what the context leaves; a whole number of the
    // blocks asked for when there is room for one.
    options.gen_length = bounded ? std::min(limits.default_gen_length, context - given) : limits.default_gen_length;
    const int64_t block = options.block_length > 0 ? options.block_length : options.d2f ? kD2fDefaultBlockLength : 0;
    if (block > 0 && options.gen_length >= block) options.gen_length -= options.gen_length % block;
  } else if (bounded && given + options.gen_length > context) {
    bad_request(param_of("gen_length", request), "{} + {} generated = {} tokens exceeds the model's context of {} tokens",
                what, options.gen_length, given + options.gen_length, context);
  }
  // Steps: each unmasks at least one position, so more than gen_length only repeat forwards.
  if (options.d2f) {
    // D2F has no step schedule: a given steps is its cap (api_request.cc), the rest is its own.
  } else if (options.steps == 0) {
    options.steps = std::min(limits.default_steps.value_or(options.gen_length), options.gen_length);
    if (options.block_length > 0 && options.gen_length % options.block_length == 0) {
      const int64_t blocks = options.gen_length / options.block_length;
      options.steps = std::max(blocks, options.steps - options.steps % blocks);
    }
  } else if (options.steps > options.gen_length) {
    bad_request("steps", "'steps' {} exceeds the {} this request can use: each step unmasks at least one of its {} "
                "generated positions", options.steps, options.gen_length, options.gen_length);
  }
  if (options.temperature > 0 && !request.seed_given) options.seed = random_seed();

  const GenerationOptions resolved = naming_options(request, [&] { return engine.resolve_options(options); });
  naming_options(request, [&] {
    engine.check_suffix(resolved, static_cast<int64_t>(plan.suffix_ids.size()));
    return 0;
  });
  for (int64_t i = 0; i < request.n; ++i) {
    GenerationOptions choice = resolved;
    choice.seed = (resolved.seed + static_cast<uint64_t>(i)) & uint64_t{std::numeric_limits<int64_t>::max()};
    plan.choices.push_back(choice);
  }
  // Memory: each choice is admitted on its own, so each must fit the budget alone.
  const MemoryFit fit = naming_options(request, [&] { return engine.fit(given, resolved); });
  if (!fit.fits)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the request ({} prompt + {} generated tokens) needs {} bytes of memory at its "
                               "largest step; the memory budget is {} bytes",
                               given, resolved.gen_length, fit.bytes_needed, fit.budget),
                   prompt_param, "prompt_too_large");
  return plan;
}

}  // namespace mosaic::serve
