#include "serve/openai_json.h"

namespace mosaic::serve {
namespace {

using nlohmann::ordered_json;

ordered_json null_or(const std::string& value) { return value.empty() ? ordered_json() : ordered_json(value); }

ordered_json usage(const Answer& answer) {
  return {{"prompt_tokens", answer.prompt_tokens},
          {"completion_tokens", answer.completion_tokens},
          {"total_tokens", answer.prompt_tokens + answer.completion_tokens}};
}

ordered_json mosaic_fields(const Answer& answer) {
  const GenerateResult& r = *answer.result;
  const RequestRecord& record = *answer.record;
  return {{"steps", r.steps},
          {"nfe", r.forwards},
          {"cache", r.cache},
          {"tokens_per_step", r.tokens_per_step},
          {"stopped_at_eos", r.stopped_at_eos},
          {"queue_seconds", record.queue_s},
          {"first_token_seconds", record.first_token_s ? ordered_json(*record.first_token_s) : ordered_json()},
          {"total_seconds", record.total_s},
          {"largest_batch", record.largest_batch},
          {"output_ids", r.output_ids}};
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
    ordered_json body = {{"id", identity.id}, {"model", identity.model}, {"text", answer.text},
                         {"finish_reason", answer.finish_reason}, {"usage", usage(answer)}};
    const ordered_json fields = mosaic_fields(answer);
    for (const auto& [key, value] : fields.items()) body[key] = value;
    return body;
  }
  ordered_json body = head(endpoint, identity, false);
  ordered_json choice = {{"index", 0}};
  if (endpoint == Endpoint::chat_completions) {
    choice["message"] = {{"role", "assistant"}, {"content", answer.text}};
  } else {
    choice["text"] = answer.text;
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = answer.finish_reason;
  body["choices"] = ordered_json::array({choice});
  body["usage"] = usage(answer);
  body["mosaic"] = mosaic_fields(answer);
  return body;
}

ordered_json stream_chunk(Endpoint endpoint, const ResponseIdentity& identity, const std::string& delta,
                          const Answer* finish) {
  if (endpoint == Endpoint::generate) {
    if (!finish) return {{"id", identity.id}, {"text", delta}};
    ordered_json body = answer_body(endpoint, identity, *finish);
    body["text"] = delta;  // the last piece; the whole answer is the concatenation
    body["done"] = true;
    return body;
  }
  ordered_json body = head(endpoint, identity, true);
  ordered_json choice = {{"index", 0}};
  if (endpoint == Endpoint::chat_completions) {
    choice["delta"] = delta.empty() && finish ? ordered_json::object() : ordered_json{{"content", delta}};
  } else {
    choice["text"] = delta;
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = finish ? ordered_json(finish->finish_reason) : ordered_json();
  body["choices"] = ordered_json::array({choice});
  if (finish) {
    body["usage"] = usage(*finish);
    body["mosaic"] = mosaic_fields(*finish);
  }
  return body;
}

ordered_json stream_role_chunk(const ResponseIdentity& identity) {
  ordered_json body = head(Endpoint::chat_completions, identity, true);
  body["choices"] = ordered_json::array(
      {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}}});
  return body;
}

std::string sse_event(const nlohmann::ordered_json& body) {
  // Invalid UTF-8 (a model may emit any bytes) is replaced rather than thrown on.
  return "data: " + body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n\n";
}

}  // namespace mosaic::serve
