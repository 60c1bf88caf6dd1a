#include "serve/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "core/error.h"
#include "core/log.h"
#include "serve/access_log.h"
#include "serve/api_key.h"
#include "serve/build_info.h"
#include "serve/completion_stream.h"
#include "serve/generation_plan.h"
#include "serve/guarded_server.h"
#include "serve/openai_json.h"
#include "serve/request_context.h"
#include "serve/stop_strings.h"
#include "serve/text_stream.h"

namespace mosaic::serve {
namespace {

constexpr auto kStreamPoll = std::chrono::milliseconds(50);  // how often a stream checks its client

std::string dump(const nlohmann::ordered_json& body) {
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Outcome rejection_of(const ApiError& error) {
  if (error.status == 429) return Outcome::rejected_queue_full;
  if (error.status == 503) return Outcome::rejected_draining;
  if (error.code == "prompt_too_large") return Outcome::rejected_too_large;
  return Outcome::rejected_invalid;
}

// The HTTP worker threads: enough that every request the scheduler can hold has one, plus a few
// for /health and /metrics and for requests answered 429.
int worker_threads(const ServeOptions& options) {
  if (options.threads > 0) return options.threads;
  const int64_t batch = options.scheduler.max_batch > 0 ? options.scheduler.max_batch : 64;
  return static_cast<int>(std::clamp<int64_t>(batch + options.scheduler.max_queue + 8, 16, 1024));
}

// The engine's memory budget (0: none), as every MemoryFit reports it.
uint64_t budget_of(const Engine& engine) {
  return engine.fit(1, GenerationOptions{.gen_length = 1, .steps = 1}).budget;
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

GuardOptions guard_options(const ServeOptions& options) {
  GuardOptions guard;
  guard.max_connections = options.max_connections;
  guard.header_timeout = milliseconds(options.header_timeout_s);
  guard.request_timeout = milliseconds(options.request_timeout_s);
  guard.idle_timeout = milliseconds(options.idle_timeout_s);
  guard.workers = worker_threads(options);
  guard.framing.max_body_bytes = options.max_body_bytes;
  // A little under cpp-httplib's own line limits (8192 bytes with the CRLF), so that every head the
  // guard passes, the library parses.
  guard.framing.max_request_line = 8000;
  guard.framing.max_header_line = 8000;
  return guard;
}

// The methods a known route answers (for 405 and OPTIONS); nullptr: no such route.
const char* allowed_methods(const std::string& path) {
  for (const char* post : {"/v1/completions", "/v1/chat/completions", "/generate", "/tokenize", "/detokenize"})
    if (path == post) return "POST, OPTIONS";
  for (const char* get : {"/v1/models", "/health", "/metrics", "/version"})
    if (path == get) return "GET, HEAD, OPTIONS";
  if (path.starts_with("/v1/models/") && path.size() > 11) return "GET, HEAD, OPTIONS";
  return nullptr;
}

std::string error_code_of_status(int status) {
  switch (status) {
    case 408: return "request_timeout";
    case 413: return "request_too_large";
    case 503: return "server_busy";
    default: return "";
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

HttpServer::HttpServer(const Engine& engine, ServeOptions options)
    : engine_(engine),
      options_(std::move(options)),
      metrics_(budget_of(engine), options_.model_name, engine.info().max_position),
      scheduler_(engine, options_.scheduler, metrics_),
      started_unix_(static_cast<int64_t>(std::time(nullptr))) {
  options_.limits.vocab = engine.info().vocab;
  const GuardOptions guard = guard_options(options_);
  http_ = std::make_unique<GuardedServer>(
      guard, milliseconds(options_.write_timeout_s), [this](const Refusal& r) { return refusal(r); },
      [this](httplib::Request& q, const ReceivedRequest&) { begin_request(q); });
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, which would let a second server
  // bind the same port and silently take half of its connections.
  http_->set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http_->set_payload_max_length(options_.max_body_bytes);
  // The guard keeps connections alive; these only set what the Keep-Alive header advertises.
  http_->set_keep_alive_timeout(static_cast<time_t>(options_.idle_timeout_s));
  http_->set_keep_alive_max_count(guard.max_requests_per_connection);
  http_->set_write_timeout(static_cast<time_t>(options_.write_timeout_s));
  install_routes();
  install_operations();
}

HttpServer::~HttpServer() {
  shutdown(true);
  http_->close_connections();  // no handler may outlive the members it uses
}

size_t HttpServer::open_connections() const { return http_->open_connections(); }

int HttpServer::bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                      : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port <= 0)
    fail("cannot listen on {}:{} (address in use, or not an address of this machine?)", options_.host, options_.port);
  http_->widen_backlog(static_cast<int>(std::clamp<size_t>(options_.max_connections, 128, 4096)));
  return port;
}

void HttpServer::serve() {
  http_->listen_after_bind();
  http_->close_connections();
  scheduler_.stop();
}

void HttpServer::shutdown(bool immediate) {
  if (!immediate && !draining_.exchange(true)) {
    log(LogLevel::warn, "serve: draining: new requests get 503; waiting for those in flight");
    scheduler_.begin_drain();
    std::unique_lock lock(in_flight_mutex_);
    in_flight_done_.wait(lock, [&] { return in_flight_ == 0; });
  } else {
    draining_ = true;
    scheduler_.stop();  // every request ends now, with 503
  }
  if (!listener_closed_.exchange(true)) http_->stop();
}

void HttpServer::request_started() {
  std::lock_guard lock(in_flight_mutex_);
  ++in_flight_;
}

void HttpServer::request_ended() {
  {
    std::lock_guard lock(in_flight_mutex_);
    --in_flight_;
  }
  in_flight_done_.notify_all();
}

ResponseIdentity HttpServer::identity(Endpoint endpoint) {
  const char* prefix = endpoint == Endpoint::chat_completions ? "chatcmpl" : endpoint == Endpoint::completions ? "cmpl" : "gen";
  return {ids_.next(prefix), static_cast<int64_t>(std::time(nullptr)), options_.model_name};
}

void HttpServer::reply_error(httplib::Response& response, const ApiError& error) {
  response.status = error.status;
  if (error.status == 429) response.set_header("Retry-After", "1");
  response.set_content(dump(error_body(error)), "application/json");
}

void HttpServer::handle_generation(Endpoint endpoint, const httplib::Request& http_request,
                                   httplib::Response& response) {
  // In flight from the start, so that a drain that begins meanwhile waits for this request.
  request_started();
  std::vector<std::shared_ptr<Ticket>> tickets;  // one per choice
  ApiRequest request;
  GenerationPlan plan;
  try {
    if (draining_) throw ApiError(503, "server_error", "the server is shutting down", "", "shutting_down");
    request = parse_api_request(endpoint, http_request.body, options_.limits);
    if (!request.model.empty() && request.model != options_.model_name)
      throw ApiError(404, "invalid_request_error",
                     fmt::format("the model '{}' does not exist; this server has '{}'", request.model,
                                 options_.model_name), "model", "model_not_found");
    plan = plan_generation(engine_, request, options_.limits, options_.allow_long_context, operating_system_seed);
    for (const GenerationOptions& choice : plan.choices) {
      StopCheck stop_when;
      if (!request.stop.empty()) {
        const ModelInfo& info = engine_.info();
        auto watcher = std::make_shared<StopWatcher>(
            request.stop, CommittedTextStream(static_cast<int32_t>(info.mask_token_id), {info.eos_token_id, choice.eot_id},
                                              [this](std::span<const int32_t> ids) { return engine_.decode(ids); }));
        stop_when = [watcher](std::span<const int32_t> ids) { return watcher->stopped(ids); };
      }
      tickets.push_back(scheduler_.submit(plan.prompt_ids, choice, request.stream, plan.suffix_ids, std::move(stop_when)));
    }
  } catch (const ApiError& error) {
    for (const auto& ticket : tickets) ticket->cancel();  // a later choice was refused (429): not wanted
    metrics_.count(rejection_of(error));
    reply_error(response, error);
    request_ended();
    return;
  } catch (...) {
    for (const auto& ticket : tickets) ticket->cancel();
    request_ended();
    throw;  // the exception handler answers 500
  }
  AnswerShape shape{request.stop, "", request.logprobs};
  if (request.echo) shape.echo = request.text ? *request.text : engine_.decode(plan.prompt_ids);
  const int64_t prompt_tokens = static_cast<int64_t>(plan.prompt_ids.size() + plan.suffix_ids.size());
  const ResponseIdentity id = identity(endpoint);
  if (request.stream) {
    auto events = std::make_shared<CompletionStream>(
        engine_, std::move(tickets), StreamSettings{endpoint, id, shape, request.include_usage, prompt_tokens});
    // request_ended() when the stream ends
    this->stream(std::move(events), response, http_request.version == "HTTP/1.0");
    return;
  }
  for (const auto& ticket : tickets) ticket->wait_done();
  const auto failed = std::find_if(tickets.begin(), tickets.end(), [](const auto& t) { return t->error().has_value(); });
  if (failed != tickets.end()) {
    reply_error(response, *(*failed)->error());
  } else {
    Answer answer;
    answer.prompt_tokens = prompt_tokens;
    answer.logprobs = request.logprobs;
    for (const auto& ticket : tickets) answer.choices.push_back(choice_answer(engine_, *ticket, shape));
    note_answer(answer);
    response.set_content(dump(answer_body(endpoint, id, answer)), "application/json");
  }
  request_ended();
}

// The prompt's token ids: chat turns, text, or ids as given. Throws ApiError naming the field.
std::vector<int32_t> HttpServer::prompt_ids_of(Endpoint endpoint, const ApiRequest& request) const {
  std::vector<int32_t> prompt_ids;
  const char* prompt_param = endpoint == Endpoint::chat_completions ? "messages" : "prompt";
  try {
    if (!request.messages.empty()) prompt_ids = engine_.encode_chat(request.messages, request.parse_special);
    else if (request.text) prompt_ids = engine_.encode(*request.text, request.chat, request.parse_special);
    else prompt_ids = request.prompt_ids;
  } catch (const Error& error) {
    bad_request(prompt_param, "{}", error.what());
  }
  if (prompt_ids.empty()) bad_request(prompt_param, "the prompt encodes to no tokens");
  return prompt_ids;
}

void HttpServer::note_answer(const Answer& answer) {
  int64_t completion_tokens = 0, steps = 0;
  for (const ChoiceAnswer& choice : answer.choices) {
    metrics_.answered(choice.finish_reason, answer.prompt_tokens, choice.completion_tokens, *choice.record);
    completion_tokens += choice.completion_tokens;
    steps += choice.result->steps;
  }
  const ChoiceAnswer& first = answer.choices.at(0);
  if (RequestContext* context = current_request())
    context->usage = GenerationUsage{answer.prompt_tokens, completion_tokens, steps, first.record->queue_s,
                                     first.finish_reason};
}

void HttpServer::stream(std::shared_ptr<CompletionStream> events, httplib::Response& response, bool close_delimited) {
  response.set_header("Cache-Control", "no-cache");
  auto provider = [this, events](size_t, httplib::DataSink& sink) {
    std::string ready;
    const bool complete = events->next(kStreamPoll, ready);
    if (!sink.is_writable()) return false;  // the client went away: the releaser cancels
    if (!ready.empty() && !sink.write(ready.data(), ready.size())) return false;
    if (!complete) return true;
    if (const std::optional<Answer> answer = events->answer()) note_answer(*answer);
    sink.done();
    return true;
  };
  auto releaser = [this, events](bool success) {
    if (!success || !events->complete()) events->cancel();
    request_ended();
  };
  if (close_delimited) response.set_content_provider("text/event-stream", std::move(provider), std::move(releaser));
  else response.set_chunked_content_provider("text/event-stream", std::move(provider), std::move(releaser));
}

void HttpServer::install_routes() {
  http_->Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) {
    handle_generation(Endpoint::completions, q, r);
  });
  http_->Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) {
    handle_generation(Endpoint::chat_completions, q, r);
  });
  http_->Post("/generate", [this](const httplib::Request& q, httplib::Response& r) {
    handle_generation(Endpoint::generate, q, r);
  });
  http_->Post("/tokenize", [this](const httplib::Request& q, httplib::Response& r) { handle_tokenize(q, r); });
  http_->Post("/detokenize", [this](const httplib::Request& q, httplib::Response& r) { handle_detokenize(q, r); });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
    r.set_content(dump({{"object", "list"}, {"data", nlohmann::ordered_json::array({model_object()})}}),
                  "application/json");
  });
  http_->Get(R"(/v1/models/(.+))", [this](const httplib::Request& q, httplib::Response& r) {
    const std::string id = q.matches[1];
    if (id != options_.model_name) {
      reply_error(r, ApiError(404, "invalid_request_error",
                              fmt::format("the model '{}' does not exist; this server has '{}'", id, options_.model_name),
                              "model", "model_not_found"));
      return;
    }
    r.set_content(dump(model_object()), "application/json");
  });
  http_->Get("/version", [this](const httplib::Request&, httplib::Response& r) {
    r.set_content(dump({{"version", build_info().version},
                        {"build", {{"type", build_info().build_type}, {"compiler", build_info().compiler},
                                   {"cuda", build_info().cuda}, {"http_library", build_info().http_library}}},
                        {"device", engine_.info().device}}),
                  "application/json");
  });
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& r) {
    const bool draining = draining_;
    r.status = draining ? 503 : 200;
    r.set_content(dump({{"status", draining ? "draining" : "ok"},
                        {"model", options_.model_name},
                        {"device", engine_.info().device},
                        {"queued", metrics_.queued()},
                        {"running", metrics_.running()}}),
                  "application/json");
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
    metrics_.set_connections(http_->open_connections());
    r.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  http_->set_exception_handler([this](const httplib::Request& q, httplib::Response& r, std::exception_ptr error) {
    std::string what = "unknown error";
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    const RequestContext* context = current_request();
    log(LogLevel::error, "serve: request_id={} {} {}: {}", context ? context->id : "-", q.method, logfmt_value(q.path),
        what);
    reply_error(r, ApiError(500, "server_error", fmt::format("internal error: {}", what)));
  });
  http_->set_error_handler([this](const httplib::Request& q, httplib::Response& r) {
    if (!r.body.empty()) return;  // an error this server already wrote
    const char* allow = r.status == 404 ? allowed_methods(q.path) : nullptr;
    if (allow) {
      r.set_header("Allow", allow);
      reply_error(r, ApiError(405, "invalid_request_error",
                              fmt::format("{} {} is not allowed; this route answers {}", q.method, q.path, allow), "",
                              "method_not_allowed"));
    } else if (r.status == 404)
      reply_error(r, ApiError(404, "invalid_request_error", fmt::format("no route {} {}", q.method, q.path), "",
                              "not_found"));
    else if (r.status == 413)
      reply_error(r, ApiError(413, "invalid_request_error",
                              fmt::format("the request body exceeds {} bytes", options_.max_body_bytes)));
    else if (r.status == 400)
      reply_error(r, ApiError(400, "invalid_request_error", "the request could not be parsed as HTTP"));
    else
      reply_error(r, ApiError(r.status, r.status >= 500 ? "server_error" : "invalid_request_error",
                              fmt::format("HTTP {}", r.status)));
  });
}

nlohmann::ordered_json HttpServer::model_object() const {
  const ModelInfo& info = engine_.info();
  return {{"id", options_.model_name},
          {"object", "model"},
          {"created", started_unix_},
          {"owned_by", "mosaic"},
          {"root", options_.model_name},
          {"parent", nullptr},
          {"max_model_len", info.max_position > 0 ? nlohmann::ordered_json(info.max_position) : nlohmann::ordered_json()},
          {"mosaic", {{"family", info.family}, {"architecture", info.architecture}, {"device", info.device},
                      {"vocab", info.vocab}, {"max_position", info.max_position}, {"weight_bytes", info.weight_bytes},
                      {"streamed_layers", info.streamed_layers}, {"tokenizer", engine_.has_tokenizer()}}}};
}

// vLLM's /tokenize: {"prompt": "..."} or {"messages": [...]} (as the generation routes read them,
// so the ids are exactly what a completion would run) -> {"count", "max_model_len", "tokens"}.
void HttpServer::handle_tokenize(const httplib::Request& q, httplib::Response& r) {
  try {
    const nlohmann::json body = parse_request_body(q.body);
    const Endpoint endpoint = body.is_object() && body.contains("messages") ? Endpoint::chat_completions
                                                                              : Endpoint::completions;
    const ApiRequest request = parse_api_request(endpoint, q.body, options_.limits);
    if (!request.model.empty() && request.model != options_.model_name)
      throw ApiError(404, "invalid_request_error",
                     fmt::format("the model '{}' does not exist; this server has '{}'", request.model,
                                 options_.model_name), "model", "model_not_found");
    const std::vector<int32_t> ids = prompt_ids_of(endpoint, request);
    const int64_t context = engine_.info().max_position;
    r.set_content(dump({{"count", ids.size()},
                        {"max_model_len", context > 0 ? nlohmann::ordered_json(context) : nlohmann::ordered_json()},
                        {"tokens", ids}}),
                  "application/json");
  } catch (const ApiError& error) {
    reply_error(r, error);
  }
}

// vLLM's /detokenize: {"tokens": [ids]} -> {"prompt": "..."} (special tokens skipped).
void HttpServer::handle_detokenize(const httplib::Request& q, httplib::Response& r) {
  try {
    const nlohmann::json body = parse_request_body(q.body);
    if (!body.is_object())
      bad_request("", "the request body must be a JSON object such as {{\"tokens\": [1, 2, 3]}}");
    if (body.contains("model") && !(body["model"].is_string() && body["model"] == options_.model_name) &&
        !body["model"].is_null())
      throw ApiError(404, "invalid_request_error", fmt::format("the model {} does not exist; this server has '{}'",
                                                               body["model"].dump(), options_.model_name),
                     "model", "model_not_found");
    if (!body.contains("tokens") || !body["tokens"].is_array())
      bad_request("tokens", "tokens must be an array of token ids");
    std::vector<int32_t> ids;
    const int64_t vocab = engine_.info().vocab;
    for (const nlohmann::json& id : body["tokens"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
        bad_request("tokens", "tokens must be integers in [0, {}); got {}", vocab, id.dump());
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    if (!engine_.has_tokenizer()) bad_request("tokens", "the model has no tokenizer.json to decode with");
    r.set_content(dump({{"prompt", engine_.decode(ids)}}), "application/json");
  } catch (const ApiError& error) {
    reply_error(r, error);
  }
}


// --- operations: request ids, the API key, CORS, the access log

void HttpServer::install_operations() {
  http_->set_pre_routing_handler([this](const httplib::Request& q, httplib::Response& r) {
    return screen(q, r) ? httplib::Server::HandlerResponse::Handled : httplib::Server::HandlerResponse::Unhandled;
  });
  http_->set_post_routing_handler([this](const httplib::Request& q, httplib::Response& r) { finish_response(q, r); });
  if (options_.access_log)
    http_->set_logger([this](const httplib::Request& q, const httplib::Response& r) { log_access(q, r); });
}

void HttpServer::begin_request(httplib::Request& request) {
  RequestContext* context = current_request();
  if (!context) return;
  context->id = sanitize_request_id(request.get_header_value("X-Request-Id"));
  if (context->id.empty()) context->id = ids_.next("req");
}

bool HttpServer::screen(const httplib::Request& q, httplib::Response& r) {
  if (q.method == "OPTIONS") {
    const char* allow = allowed_methods(q.path);
    if (!allow) return false;  // 404 by the router
    const std::string origin = q.get_header_value("Origin");
    if (origin.empty() || !q.has_header("Access-Control-Request-Method")) {
      r.status = 204;
      r.set_header("Allow", allow);
      return true;
    }
    const std::optional<std::string> allowed = options_.cors.allow_origin(origin);
    if (!allowed) {
      reply_error(r, ApiError(403, "invalid_request_error",
                              options_.cors.enabled()
                                  ? fmt::format("the origin '{}' is not in --allowed-origins", origin)
                                  : std::string("cross-origin requests are off (start the server with --allowed-origins)"),
                              "", "origin_not_allowed"));
      return true;
    }
    r.status = 204;
    r.set_header("Access-Control-Allow-Methods", kCorsAllowMethods);
    r.set_header("Access-Control-Allow-Headers",
                 CorsPolicy::allow_headers(q.get_header_value("Access-Control-Request-Headers")));
    r.set_header("Access-Control-Max-Age", kCorsMaxAgeSeconds);
    return true;  // Access-Control-Allow-Origin: finish_response adds it
  }
  if (!options_.api_key.empty() && q.path != "/health") {
    const KeyCheck check = check_bearer_key(q.get_header_value("Authorization"), options_.api_key);
    if (check != KeyCheck::accepted) {
      r.set_header("WWW-Authenticate", "Bearer");
      reply_error(r, ApiError(401, "invalid_request_error",
                              check == KeyCheck::missing
                                  ? "no API key: send the header 'Authorization: Bearer <key>' (mosaic serve --api-key)"
                                  : "the API key is not this server's",
                              "", "invalid_api_key"));
      return true;
    }
  }
  return false;
}

void HttpServer::finish_response(const httplib::Request& q, httplib::Response& r) {
  if (const RequestContext* context = current_request(); context && !context->id.empty())
    r.set_header("X-Request-Id", context->id);
  const std::string origin = q.get_header_value("Origin");
  if (const std::optional<std::string> allowed = options_.cors.allow_origin(origin)) {
    r.set_header("Access-Control-Allow-Origin", *allowed);
    if (*allowed != "*") r.set_header("Vary", "Origin");
    r.set_header("Access-Control-Expose-Headers", "X-Request-Id");
  }
}

void HttpServer::log_access(const httplib::Request& q, const httplib::Response& r) {
  const RequestContext* context = current_request();
  AccessRecord record;
  record.request_id = context ? std::string_view(context->id) : std::string_view("-");
  record.method = q.method;
  record.path = q.path;
  record.remote = q.remote_addr;
  record.status = r.status;
  record.usage = context && context->usage ? &*context->usage : nullptr;
  record.total_s = context ? seconds_since(context->started) : 0;
  log_write(LogLevel::info, access_log_line(record));
}

RefusalAnswer HttpServer::refusal(const Refusal& refusal) {
  RefusalAnswer answer;
  answer.request_id = sanitize_request_id(refusal.request_id);
  if (answer.request_id.empty()) answer.request_id = ids_.next("req");
  const ApiError error(refusal.status, refusal.status >= 500 ? "server_error" : "invalid_request_error", refusal.message,
                       "", error_code_of_status(refusal.status));
  answer.body = dump(error_body(error));
  metrics_.refused(refusal.status);
  if (options_.access_log) {
    AccessRecord record;
    record.request_id = answer.request_id;
    record.method = refusal.method.empty() ? std::string_view("-") : std::string_view(refusal.method);
    const std::string_view target = refusal.target;
    record.path = target.empty() ? std::string_view("-") : target.substr(0, target.find('?'));
    record.status = refusal.status;
    record.total_s = seconds_since(refusal.started);
    log_write(LogLevel::info, access_log_line(record) + " refused_by=guard");
  }
  return answer;
}

}  // namespace mosaic::serve
