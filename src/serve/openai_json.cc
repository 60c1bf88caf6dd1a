#include "serve/openai_json.h"

#include <cmath>

namespace mosaic::serve {
namespace {

using nlohmann::ordered_json;

ordered_json null_or(const std::string& value) { return value.empty() ? ordered_json() : ordered_json(value); }

ordered_json usage(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

int64_t completion_tokens(const Answer& answer) {
  int64_t total = 0;
  for (const ChoiceAnswer& choice : answer.choices) total += choice.completion_tokens;
  return total;
}

ordered_json mosaic_fields(const ChoiceAnswer& choice) {
  const GenerateResult& r = *choice.result;
  const RequestRecord& record = *choice.record;
  return {{"steps", r.steps},
          {"nfe", r.forwards},
          {"cache", r.cache},
          {"tokens_per_step", r.tokens_per_step},
          {"stopped_at_eos", r.stopped_at_eos},
          {"seed", choice.seed},
          {"queue_seconds", record.queue_s},
          {"first_token_seconds", record.first_token_s ? ordered_json(*record.first_token_s) : ordered_json()},
          {"total_seconds", record.total_s},
          {"largest_batch", record.largest_batch},
          {"output_ids", r.output_ids}};
}

// JSON has no infinity: a token outside the statistics' set reads -9999, as vLLM writes it.
double finite(double logprob) { return std::isfinite(logprob) ? logprob : -9999.0; }

ordered_json utf8_bytes(const std::string& text) {
  ordered_json bytes = ordered_json::array();
  for (const char c : text) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

// /v1/completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
ordered_json completion_logprobs(const ChoiceAnswer& choice, int64_t top) {
  ordered_json tokens = ordered_json::array(), logprobs = ordered_json::array(), tops = ordered_json::array(),
               offsets = ordered_json::array();
  for (const AnswerToken& token : choice.tokens) {
    tokens.push_back(token.text);
    logprobs.push_back(finite(token.logprob));
    ordered_json best = ordered_json::object();
    for (const auto& [text, logprob] : token.top)
      if (!best.contains(text)) best[text] = finite(logprob);
    tops.push_back(top > 0 ? best : ordered_json());
    offsets.push_back(token.offset);
  }
  return {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// /v1/chat/completions: {"content": [{"token", "logprob", "bytes", "top_logprobs"}], "refusal": null}.
ordered_json chat_logprobs(const ChoiceAnswer& choice) {
  ordered_json content = ordered_json::array();
  for (const AnswerToken& token : choice.tokens) {
    ordered_json tops = ordered_json::array();
    for (const auto& [text, logprob] : token.top)
      tops.push_back({{"token", text}, {"logprob", finite(logprob)}, {"bytes", utf8_bytes(text)}});
    content.push_back({{"token", token.text}, {"logprob", finite(token.logprob)}, {"bytes", utf8_bytes(token.text)},
                       {"top_logprobs", tops}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

const char* object_name(Endpoint endpoint, bool chunk) {
  if (endpoint == Endpoint::chat_completions) return chunk ? "chat.completion.chunk" : "chat.completion";
  if (endpoint == Endpoint::completions) return "text_completion";
  return "generation";
}

ordered_json head(Endpoint endpoint, const ResponseIdentity& identity, bool chunk) {
  return {{"id", identity.id}, {"object", object_name(endpoint, chunk)}, {"created", identity.created},
          {"model", identity.model}};
}

}  // namespace

ordered_json error_body(const ApiError& error) {
  return {{"error",
           {{"message", error.what()}, {"type", error.type}, {"param", null_or(error.param)}, {"code", null_or(error.code)}}}};
}

ordered_json answer_body(Endpoint endpoint, const ResponseIdentity& identity, const Answer& answer) {
  if (endpoint == Endpoint::generate) {
    const ChoiceAnswer& choice = answer.choices.at(0);
    ordered_json body = {{"id", identity.id}, {"model", identity.model}, {"text", choice.text},
                         {"finish_reason", choice.finish_reason},
                         {"usage", usage(answer.prompt_tokens, choice.completion_tokens)}};
    const ordered_json fields = mosaic_fields(choice);
    for (const auto& [key, value] : fields.items()) body[key] = value;
    return body;
  }
  ordered_json body = head(endpoint, identity, false);
  ordered_json choices = ordered_json::array();
  for (size_t i = 0; i < answer.choices.size(); ++i) {
    const ChoiceAnswer& c = answer.choices[i];
    ordered_json choice = {{"index", i}};
    if (endpoint == Endpoint::chat_completions) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      choice["logprobs"] = answer.logprobs ? chat_logprobs(c) : ordered_json();
    } else {
      choice["text"] = c.text;
      choice["logprobs"] = answer.logprobs ? completion_logprobs(c, *answer.logprobs) : ordered_json();
    }
    choice["finish_reason"] = c.finish_reason;
    if (answer.choices.size() > 1) choice["mosaic"] = mosaic_fields(c);
    choices.push_back(choice);
  }
  body["choices"] = choices;
  body["usage"] = usage(answer.prompt_tokens, completion_tokens(answer));
  body["mosaic"] = mosaic_fields(answer.choices.at(0));
  return body;
}

ordered_json stream_chunk(Endpoint endpoint, const ResponseIdentity& identity, int64_t index, const std::string& delta,
                          const ChoiceAnswer* finish, int64_t prompt_tokens) {
  if (endpoint == Endpoint::generate) {
    if (!finish) return {{"id", identity.id}, {"text", delta}};
    Answer answer;
    answer.choices = {*finish};
    answer.prompt_tokens = prompt_tokens;
    ordered_json body = answer_body(endpoint, identity, answer);
    body["text"] = delta;  // the last piece; the whole answer is the concatenation
    body["done"] = true;
    return body;
  }
  ordered_json body = head(endpoint, identity, true);
  ordered_json choice = {{"index", index}};
  if (endpoint == Endpoint::chat_completions) {
    choice["delta"] = delta.empty() && finish ? ordered_json::object() : ordered_json{{"content", delta}};
  } else {
    choice["text"] = delta;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish ? ordered_json(finish->finish_reason) : ordered_json();
  body["choices"] = ordered_json::array({choice});
  if (finish) {
    body["usage"] = usage(prompt_tokens, finish->completion_tokens);
    body["mosaic"] = mosaic_fields(*finish);
  }
  return body;
}

ordered_json stream_role_chunk(const ResponseIdentity& identity, int64_t index) {
  ordered_json body = head(Endpoint::chat_completions, identity, true);
  body["choices"] = ordered_json::array(
      {{{"index", index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
        {"finish_reason", nullptr}}});
  return body;
}

ordered_json stream_usage_chunk(Endpoint endpoint, const ResponseIdentity& identity, const Answer& answer) {
  ordered_json body = head(endpoint, identity, true);
  body["choices"] = ordered_json::array();
  body["usage"] = usage(answer.prompt_tokens, completion_tokens(answer));
  return body;
}

std::string sse_event(const nlohmann::ordered_json& body) {
  // Invalid UTF-8 (a model may emit any bytes) is replaced rather than thrown on.
  return "data: " + body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n\n";
}

}  // namespace mosaic::serve
