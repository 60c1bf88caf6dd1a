#include "serve/api_request.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/json_parse.h"
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

// messages: [{"role": "user", "content": "..." | [{"type": "text", "text": "..."}]}, ...]. An
// assistant turn may have content null (a client replaying a turn that called a tool, or an
// empty one): it is empty. "developer" is OpenAI's newer name for "system".
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
    if (*role == "tool" || *role == "function")
      bad_request(where + ".role", "'{}.role' is \"{}\": tool and function calls are not supported", where, *role);
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "developer")
      bad_request(where + ".role", "'{}.role' must be system, developer, user or assistant, got \"{}\"", where, *role);
    if (fields.find("tool_calls") || fields.find("function_call"))
      bad_request(where + ".tool_calls", "'{}' holds tool calls: tool and function calls are not supported", where);
    ChatTurn turn{*role == "developer" ? "system" : *role, {}};
    const json* content = fields.find("content");
    if (!content && *role != "assistant") bad_request(where + ".content", "'{}.content' is required", where);
    if (!content) {
      // an assistant turn without text
    } else if (content->is_string()) {
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

bool is_empty_value(const json& value) {
  return value.is_null() || (value.is_array() && value.empty()) || (value.is_object() && value.empty()) ||
         (value.is_string() && value.get<std::string>().empty()) || (value.is_boolean() && !value.get<bool>());
}

// OpenAI features that would change the answer and that Mosaic does not implement: a 400 naming
// the field, never silently ignored. Empty values ({} / [] / null) ask for nothing and pass.
void refuse_unsupported(const Fields& fields) {
  for (const char* name : {"logit_bias", "tools", "functions", "audio", "prediction", "web_search_options"})
    if (const json* value = fields.find(name); value && !is_empty_value(*value))
      bad_request(name, "'{}' is not supported by this server", name);
  for (const char* name : {"tool_choice", "function_call"})
    if (const json* value = fields.find(name); value && !(value->is_string() && *value == "none"))
      bad_request(name, "'{}' is not supported by this server (tool and function calls)", name);
  if (const json* format = fields.find("response_format")) {
    if (!format->is_object()) bad_request("response_format", "'response_format' must be an object, got {}", type_name(*format));
    const auto type = format->find("type");
    if (type == format->end() || *type != "text")
      bad_request("response_format", "'response_format' {} is not supported: only {{\"type\": \"text\"}} "
                  "(no JSON mode or schemas)", format->dump());
  }
  if (const json* modalities = fields.find("modalities"))
    if (!(modalities->is_array() && (modalities->empty() || (modalities->size() == 1 && (*modalities)[0] == "text"))))
      bad_request("modalities", "'modalities' must be [\"text\"]");
  if (fields.string("reasoning_effort"))
    bad_request("reasoning_effort", "'reasoning_effort' is not supported (the model does not reason in a hidden channel)");
  for (const char* penalty : {"presence_penalty", "frequency_penalty"})
    if (const auto value = fields.number(penalty, -2, 2); value && *value != 0)
      bad_request(penalty, "'{}' is not supported (only 0): a diffusion step commits tokens in parallel, with no "
                  "running count to penalise", penalty);
}

// stop: "text" | ["text", ...] (at most limits.max_stop, none empty).
std::vector<std::string> read_stop(const Fields& fields, const RequestLimits& limits) {
  const json* stop = fields.find("stop");
  if (!stop) return {};
  std::vector<std::string> out;
  if (stop->is_string()) {
    out.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    for (const json& entry : *stop) {
      if (!entry.is_string()) bad_request("stop", "'stop' must be a string or an array of strings; found {}", type_name(entry));
      out.push_back(entry.get<std::string>());
    }
  } else {
    bad_request("stop", "'stop' must be a string or an array of strings, got {}", type_name(*stop));
  }
  if (static_cast<int64_t>(out.size()) > limits.max_stop)
    bad_request("stop", "'stop' holds {} sequences; at most {}", out.size(), limits.max_stop);
  for (const std::string& entry : out)
    if (entry.empty()) bad_request("stop", "'stop' sequences must not be empty");
  return out;
}

// completions: logprobs = N (0..kMaxTopLogprobs); chat: logprobs = true, top_logprobs = N.
void read_logprobs(const Fields& fields, Endpoint endpoint, ApiRequest& request) {
  const std::string limit = fmt::format("at most {}: the fused LM head keeps the top {} of each row", kMaxTopLogprobs,
                                        kMaxTopLogprobs);
  if (endpoint == Endpoint::chat_completions) {
    const bool wanted = fields.boolean("logprobs").value_or(false);
    const std::optional<int64_t> top = fields.integer("top_logprobs", 0, std::numeric_limits<int64_t>::max());
    if (top && *top > kMaxTopLogprobs) bad_request("top_logprobs", "'top_logprobs' is {}; {}", *top, limit);
    if (top && !wanted) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (wanted) request.logprobs = top.value_or(0);
    return;
  }
  const json* value = fields.find("logprobs");
  if (!value || (value->is_boolean() && !value->get<bool>())) return;
  if (endpoint == Endpoint::generate) bad_request("logprobs", "'logprobs' is not offered on /generate; use /v1/completions");
  const std::optional<int64_t> top = fields.integer("logprobs", 0, std::numeric_limits<int64_t>::max());
  if (*top > kMaxTopLogprobs) bad_request("logprobs", "'logprobs' is {}; {}", *top, limit);
  request.logprobs = *top;
}

void read_answer_fields(const Fields& fields, Endpoint endpoint, const RequestLimits& limits, ApiRequest& request) {
  const std::optional<int64_t> n = fields.integer("n", 1, limits.max_n);
  if (n && *n != 1 && endpoint == Endpoint::generate) bad_request("n", "'n' is not offered on /generate; use /v1/completions");
  request.n = n.value_or(1);
  if (const auto best_of = fields.integer("best_of", 1, limits.max_n); best_of && *best_of != request.n)
    bad_request("best_of", "'best_of' {} is not supported: every choice is returned, so best_of must equal n ({})",
                *best_of, request.n);
  request.stop = read_stop(fields, limits);
  read_logprobs(fields, endpoint, request);
  if (endpoint != Endpoint::chat_completions) {
    request.suffix = fields.string("suffix");
    if (request.suffix && request.suffix->empty()) request.suffix.reset();
  }
  if (endpoint == Endpoint::completions) request.echo = fields.boolean("echo").value_or(false);
  else if (endpoint == Endpoint::generate && fields.boolean("echo").value_or(false))
    bad_request("echo", "'echo' is not offered on /generate; use /v1/completions");
  if (const json* options = fields.find("stream_options")) {
    if (!options->is_object())
      bad_request("stream_options", "'stream_options' must be an object, got {}", type_name(*options));
    if (!request.stream) bad_request("stream_options", "'stream_options' is only allowed with \"stream\": true");
    const Fields stream_fields(*options);
    if (const json* usage = stream_fields.find("include_usage"); usage && !usage->is_boolean())
      bad_request("stream_options.include_usage", "'stream_options.include_usage' must be true or false, got {}",
                  type_name(*usage));
    request.include_usage = stream_fields.boolean("include_usage").value_or(false);
  }
  if (request.logprobs && request.stream)
    bad_request("logprobs", "'logprobs' with \"stream\": true is not supported; ask without streaming");
  if (request.logprobs && request.echo)
    bad_request("echo", "'echo' with 'logprobs' is not supported: the prompt's log-probabilities are never computed");
  request.parse_special = fields.boolean("parse_special").value_or(false);
}

void read_options(const Fields& fields, Endpoint endpoint, const RequestLimits& limits, ApiRequest& request) {
  GenerationOptions& o = request.options;
  // The generated length: gen_length, or OpenAI's max_tokens / max_completion_tokens; given
  // twice, the values must agree.
  std::optional<int64_t> gen_length;
  std::vector<const char*> names = {"gen_length"};
  if (endpoint != Endpoint::generate) names = {"max_tokens", "max_completion_tokens", "gen_length"};
  for (const char* name : names) {
    const std::optional<int64_t> value = fields.integer(name, 1, limits.max_gen_length);
    if (!value) continue;
    if (gen_length && *gen_length != *value)
      bad_request(name, "'{}' ({}) and '{}' ({}) disagree; give one", name, *value, request.gen_length_field, *gen_length);
    if (!gen_length) gen_length = value, request.gen_length_field = name;
  }
  o.gen_length = gen_length.value_or(0);
  o.steps = fields.integer("steps", 1, limits.max_steps).value_or(0);
  o.block_length = fields.integer("block_length", 1, limits.max_gen_length).value_or(0);
  o.temperature = fields.number("temperature", 0, 1e6).value_or(0.0);
  const std::optional<int64_t> seed = fields.integer("seed", 0, std::numeric_limits<int64_t>::max());
  request.seed_given = seed.has_value();
  o.seed = static_cast<uint64_t>(seed.value_or(0));
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
  // D2F (docs/design/d2f-decoding.md): asked for, or the server's default; its steps cap its loop.
  if (fields.boolean("d2f").value_or(limits.default_d2f.has_value())) o.d2f = limits.default_d2f.value_or(D2fOptions{});
  const std::pair<const char*, double D2fOptions::*> thresholds[] = {
      {"block_add_threshold", &D2fOptions::block_add_threshold},
      {"decoded_token_threshold", &D2fOptions::decoded_token_threshold},
      {"skip_threshold", &D2fOptions::skip_threshold}};
  for (const auto& [name, member] : thresholds) {
    const std::optional<double> value = fields.number(name, 0, 1);
    if (!value) continue;
    if (!o.d2f) bad_request(name, "'{}' is an option of D2F decoding: add \"d2f\": true", name);
    (*o.d2f).*member = *value;
  }
  if (o.d2f && o.steps > 0) o.d2f->max_steps = o.steps;
  // LLaDA 2.1's token editing: on when any of its fields is given.
  const std::optional<double> editing_threshold = fields.number("editing_threshold", 0, 1);
  const std::optional<int64_t> max_post_steps = fields.integer("max_post_steps", 0, 1 << 20);
  const std::optional<int64_t> num_to_transfer = fields.integer("num_to_transfer", 1, 1 << 20);
  if (editing_threshold || max_post_steps || num_to_transfer) {
    o.editing = TokenEditing{};
    if (editing_threshold) o.editing->editing_threshold = *editing_threshold;
    if (max_post_steps) o.editing->max_post_steps = *max_post_steps;
    if (num_to_transfer) o.editing->num_to_transfer = *num_to_transfer;
  }
  o.logprobs = request.logprobs.has_value();
}

}  // namespace

json parse_request_body(std::string_view body) {
  try {
    return parse_json(body, "the request body");
  } catch (const Error& error) {
    bad_request("", "{}", error.what());
  }
}

ApiRequest parse_api_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits) {
  const json parsed = parse_request_body(body);
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
  read_answer_fields(fields, endpoint, limits, request);
  read_options(fields, endpoint, limits, request);
  return request;
}

}  // namespace mosaic::serve
