#include "serve/api_request.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "serve/api_error.h"

namespace mosaic::serve {
namespace {

using nlohmann::json;

std::string_view type_name(const json& value) {
  if (value.is_number_integer() || value.is_number_unsigned()) return "an integer";
  if (value.is_number_float()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

// Reads typed fields of one JSON object; absent and null fields read as unset.
class Fields {
 public:
  explicit Fields(const json& body) : body_(body) {}

  const json* find(const char* name) const {
    const auto it = body_.find(name);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<int64_t> integer(const char* name, int64_t min, int64_t max) const {
    const json* value = find(name);
    if (!value) return std::nullopt;
    int64_t number = 0;
    if (value->is_number_unsigned()) {
      const uint64_t u = value->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        bad_request(name, "'{}' must be between {} and {}, got {}", name, min, max, u);
      number = static_cast<int64_t>(u);
    } else if (value->is_number_integer()) {
      number = value->get<int64_t>();
    } else {
      bad_request(name, "'{}' must be an integer, got {}", name, type_name(*value));
    }
    if (number < min || number > max)
      bad_request(name, "'{}' must be between {} and {}, got {}", name, min, max, number);
    return number;
  }

  std::optional<double> number(const char* name, double min, double max) const {
    const json* value = find(name);
    if (!value) return std::nullopt;
    if (!value->is_number()) bad_request(name, "'{}' must be a number, got {}", name, type_name(*value));
    const double number = value->get<double>();
    if (!std::isfinite(number) || number < min || number > max)
      bad_request(name, "'{}' must be between {} and {}, got {}", name, min, max, number);
    return number;
  }

  std::optional<bool> boolean(const char* name) const {
    const json* value = find(name);
    if (!value) return std::nullopt;
    if (!value->is_boolean()) bad_request(name, "'{}' must be true or false, got {}", name, type_name(*value));
    return value->get<bool>();
  }

  std::optional<std::string> string(const char* name) const {
    const json* value = find(name);
    if (!value) return std::nullopt;
    if (!value->is_string()) bad_request(name, "'{}' must be a string, got {}", name, type_name(*value));
    return value->get<std::string>();
  }

 private:
  const json& body_;
};

std::vector<int32_t> token_ids(const json& array, const char* param, int64_t vocab) {
  std::vector<int32_t> ids;
  for (const json& id : array) {
    if (!id.is_number_integer() && !id.is_number_unsigned())
      bad_request(param, "'{}' must be a string or an array of token ids; found {} in the array", param,
                  type_name(id));
    const int64_t value = id.is_number_unsigned() && id.get<uint64_t>() > uint64_t(INT64_MAX)
                              ? INT64_MAX : id.get<int64_t>();
    if (value < 0 || value >= vocab)
      bad_request(param, "token id {} in '{}' is outside the vocabulary [0, {})", value, param, vocab);
    ids.push_back(static_cast<int32_t>(value));
  }
  return ids;
}

// prompt: "text" | ["text"] | [1, 2, 3] | [[1, 2, 3]] (one prompt per request).
void read_prompt(const json* prompt, ApiRequest& request, int64_t vocab) {
  if (!prompt) bad_request("prompt", "'prompt' is required");
  const json* single = prompt;
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    single = &(*prompt)[0];
  else if (prompt->is_array() && !prompt->empty() && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    bad_request("prompt", "'prompt' holds {} prompts; send one prompt per request", prompt->size());
  if (single->is_string()) {
    request.text = single->get<std::string>();
    if (request.text->empty()) bad_request("prompt", "'prompt' is empty");
  } else if (single->is_array()) {
    request.prompt_ids = token_ids(*single, "prompt", vocab);
    if (request.prompt_ids.empty()) bad_request("prompt", "'prompt' is empty");
  } else {
    bad_request("prompt", "'prompt' must be a string or an array of token ids, got {}", type_name(*single));
  }
}

// messages: [{"role": "user", "content": "..." | [{"type": "text", "text": "..."}]}, ...]
void read_messages(const json* messages, ApiRequest& request) {
  if (!messages) bad_request("messages", "'messages' is required");
  if (!messages->is_array()) bad_request("messages", "'messages' must be an array, got {}", type_name(*messages));
  if (messages->empty()) bad_request("messages", "'messages' is empty");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!message.is_object()) bad_request(where, "'{}' must be an object, got {}", where, type_name(message));
    const Fields fields(message);
    const std::optional<std::string> role = fields.string("role");
    if (!role || role->empty()) bad_request(where + ".role", "'{}.role' is required", where);
    ChatTurn turn{*role, {}};
    const json* content = fields.find("content");
    if (!content) bad_request(where + ".content", "'{}.content' is required", where);
    if (content->is_string()) {
      turn.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json& part : *content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string())
          bad_request(where + ".content", "'{}.content' parts must be {{\"type\": \"text\", \"text\": ...}}", where);
        turn.content += part["text"].get<std::string>();
      }
    } else {
      bad_request(where + ".content", "'{}.content' must be a string or an array of text parts, got {}", where,
                  type_name(*content));
    }
    request.messages.push_back(std::move(turn));
  }
}

// OpenAI features that would change the answer and that Mosaic does not implement.
void refuse_unsupported(const Fields& fields) {
  for (const char* count : {"n", "best_of"})
    if (const auto value = fields.integer(count, 0, std::numeric_limits<int64_t>::max()); value && *value != 1)
      bad_request(count, "'{}' must be 1 (one answer per request), got {}", count, *value);
  if (const json* stop = fields.find("stop"))
    if (!(stop->is_array() && stop->empty()) && !(stop->is_string() && stop->get<std::string>().empty()))
      bad_request("stop", "stop sequences are not supported (the answer ends at EOS / end of turn)");
  if (const json* logprobs = fields.find("logprobs"))
    if (!(logprobs->is_boolean() && !logprobs->get<bool>()) && !(logprobs->is_number_integer() && *logprobs == 0))
      bad_request("logprobs", "logprobs are not supported");
  if (fields.boolean("echo").value_or(false)) bad_request("echo", "echo is not supported");
  for (const char* penalty : {"presence_penalty", "frequency_penalty"})
    if (const auto value = fields.number(penalty, -2, 2); value && *value != 0)
      bad_request(penalty, "'{}' is not supported (only 0)", penalty);
}

void read_options(const Fields& fields, Endpoint endpoint, const RequestLimits& limits, GenerationOptions& o) {
  std::optional<int64_t> gen_length = fields.integer("gen_length", 1, limits.max_gen_length);
  if (endpoint != Endpoint::generate) {
    const std::optional<int64_t> max_tokens = fields.integer("max_tokens", 1, limits.max_gen_length);
    if (max_tokens && gen_length && *max_tokens != *gen_length)
      bad_request("max_tokens", "'max_tokens' ({}) and 'gen_length' ({}) disagree; give one", *max_tokens, *gen_length);
    if (max_tokens) gen_length = max_tokens;
  }
  o.gen_length = gen_length.value_or(limits.default_gen_length);
  o.steps = fields.integer("steps", 1, limits.max_steps).value_or(limits.default_steps.value_or(o.gen_length));
  o.block_length = fields.integer("block_length", 1, limits.max_gen_length).value_or(0);
  o.temperature = fields.number("temperature", 0, 1e6).value_or(0.0);
  o.seed = static_cast<uint64_t>(fields.integer("seed", 0, std::numeric_limits<int64_t>::max()).value_or(0));
  o.cfg_scale = fields.number("cfg_scale", 0, 1e6).value_or(0.0);
  if (const auto remasking = fields.string("remasking")) {
    if (*remasking == "low_confidence") o.remasking = Remasking::low_confidence;
    else if (*remasking == "random") o.remasking = Remasking::random;
    else bad_request("remasking", "'remasking' must be low_confidence or random, got \"{}\"", *remasking);
  }
  o.logits_eos_inf = fields.boolean("logits_eos_inf").value_or(false);
  o.confidence_eos_eot_inf = fields.boolean("confidence_eos_eot_inf").value_or(false);
  if (const auto alg = fields.string("alg")) {
    if (*alg == "origin") o.alg = DreamAlg::origin;
    else if (*alg == "maskgit_plus") o.alg = DreamAlg::maskgit_plus;
    else if (*alg == "topk_margin") o.alg = DreamAlg::topk_margin;
    else if (*alg == "entropy") o.alg = DreamAlg::entropy;
    else bad_request("alg", "'alg' must be origin, maskgit_plus, topk_margin or entropy, got \"{}\"", *alg);
  }
  o.alg_temp = fields.number("alg_temp", 0, 1e6);
  // top_p = 1 filters nothing (the reference applies the filter only below 1): leave it unset, so
  // OpenAI clients that always send it work with LLaDA too.
  o.top_p = fields.number("top_p", 0, 1);
  if (o.top_p && *o.top_p <= 0) bad_request("top_p", "'top_p' must be in (0, 1], got {}", *o.top_p);
  if (o.top_p && *o.top_p == 1) o.top_p.reset();
  o.top_k = fields.integer("top_k", 1, std::numeric_limits<int32_t>::max());
  o.eps = fields.number("eps", 0, 1).value_or(1e-3);
  o.threshold = fields.number("threshold", 0, 1);
  o.factor = fields.number("factor", 0, 1e6);
  o.stop_at_eos = fields.boolean("stop_at_eos").value_or(false);
  o.cache = limits.default_cache;
  if (const auto cache = fields.string("cache")) {
    if (*cache == "auto") o.cache = CacheMode::automatic;
    else if (*cache == "none") o.cache = CacheMode::none;
    else if (*cache == "prefix") o.cache = CacheMode::prefix;
    else if (*cache == "dual") o.cache = CacheMode::dual;
    else bad_request("cache", "'cache' must be auto, none, prefix or dual, got \"{}\"", *cache);
  }
}

}  // namespace

ApiRequest parse_api_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) bad_request("", "the request body is not valid JSON");
  if (!parsed.is_object()) bad_request("", "the request body must be a JSON object, got {}", type_name(parsed));
  const Fields fields(parsed);
  ApiRequest request;
  request.endpoint = endpoint;
  request.model = fields.string("model").value_or("");
  request.stream = fields.boolean("stream").value_or(false);
  if (endpoint == Endpoint::chat_completions) {
    read_messages(fields.find("messages"), request);
  } else {
    read_prompt(fields.find("prompt"), request, limits.vocab);
  }
  if (endpoint == Endpoint::generate) request.chat = fields.boolean("chat").value_or(false);
  if (endpoint != Endpoint::generate) refuse_unsupported(fields);
  read_options(fields, endpoint, limits, request.options);
  return request;
}

}  // namespace mosaic::serve
