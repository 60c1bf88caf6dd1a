#include "serve/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "core/error.h"
#include "core/log.h"
#include "serve/openai_json.h"
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

}  // namespace

struct HttpServer::StreamState {
  std::shared_ptr<Ticket> ticket;
  CommittedTextStream text;
  ResponseIdentity identity;
  Endpoint endpoint;
  int64_t version = 0;
  bool started = false, finished = false;
};

HttpServer::HttpServer(const Engine& engine, ServeOptions options)
    : engine_(engine),
      options_(std::move(options)),
      metrics_(budget_of(engine)),
      scheduler_(engine, options_.scheduler, metrics_),
      http_(std::make_unique<httplib::Server>()) {
  options_.limits.vocab = engine.info().vocab;
  const int threads = worker_threads(options_);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, which would let a second server
  // bind the same port and silently take half of its connections.
  http_->set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_timeout(2);
  http_->set_read_timeout(30);
  http_->set_write_timeout(30);
  install_routes();
}

HttpServer::~HttpServer() {
  shutdown(true);
}

int HttpServer::bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                      : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port <= 0)
    fail("cannot listen on {}:{} (address in use, or not an address of this machine?)", options_.host, options_.port);
  return port;
}

void HttpServer::serve() {
  http_->listen_after_bind();
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
  return {fmt::format("{}-{:016x}", prefix, next_id_.fetch_add(1)), static_cast<int64_t>(std::time(nullptr)),
          options_.model_name};
}

void HttpServer::reply_error(httplib::Response& response, const ApiError& error) {
  response.status = error.status;
  if (error.status == 429) response.set_header("Retry-After", "1");
  response.set_content(dump(error_body(error)), "application/json");
}

Answer HttpServer::answer_of(const Ticket& ticket) const {
  const GenerateResult& result = *ticket.result();
  Answer answer;
  answer.text = result.text;
  answer.prompt_tokens = static_cast<int64_t>(ticket.prompt_ids.size());
  answer.completion_tokens = static_cast<int64_t>(engine_.answer_ids(result.output_ids, ticket.options).size());
  const int64_t eos = engine_.info().eos_token_id, eot = ticket.options.eot_id;
  const bool ended = std::any_of(result.output_ids.begin(), result.output_ids.end(),
                                 [&](int32_t id) { return id == eos || (eot >= 0 && id == eot); });
  answer.finish_reason = ended ? "stop" : "length";
  answer.result = &result;
  answer.record = &ticket.record();
  return answer;
}

void HttpServer::handle_generation(Endpoint endpoint, const httplib::Request& http_request,
                                   httplib::Response& response) {
  // In flight from the start, so that a drain that begins meanwhile waits for this request.
  request_started();
  std::shared_ptr<Ticket> ticket;
  bool stream = false;
  try {
    if (draining_) throw ApiError(503, "server_error", "the server is shutting down", "", "shutting_down");
    ApiRequest request = parse_api_request(endpoint, http_request.body, options_.limits);
    if (!request.model.empty() && request.model != options_.model_name)
      throw ApiError(400, "invalid_request_error",
                     fmt::format("the model '{}' does not exist; this server has '{}'", request.model,
                                 options_.model_name), "model", "model_not_found");
    std::vector<int32_t> prompt_ids;
    const char* prompt_param = endpoint == Endpoint::chat_completions ? "messages" : "prompt";
    try {
      if (!request.messages.empty()) prompt_ids = engine_.encode_chat(request.messages);
      else if (request.text) prompt_ids = engine_.encode(*request.text, request.chat);
      else prompt_ids = std::move(request.prompt_ids);
    } catch (const Error& error) {
      bad_request(prompt_param, "{}", error.what());
    }
    if (prompt_ids.empty()) bad_request(prompt_param, "the prompt encodes to no tokens");
    GenerationOptions options;
    try {
      options = engine_.resolve_options(request.options);
    } catch (const Error& error) {
      bad_request("", "{}", error.what());
    }
    const int64_t prompt_tokens = static_cast<int64_t>(prompt_ids.size());
    const int64_t context = engine_.info().max_position;
    if (context > 0 && prompt_tokens + options.gen_length > context && !options_.allow_long_context)
      bad_request(endpoint == Endpoint::generate ? "gen_length" : "max_tokens",
                  "the prompt ({} tokens) + {} generated = {} tokens exceeds the model's context of {} tokens",
                  prompt_tokens, options.gen_length, prompt_tokens + options.gen_length, context);
    MemoryFit fit;
    try {
      fit = engine_.fit(prompt_tokens, options);  // also what depends on the prompt (absolute blocks)
    } catch (const Error& error) {
      bad_request("", "{}", error.what());
    }
    if (!fit.fits)
      throw ApiError(400, "invalid_request_error",
                     fmt::format("the request ({} prompt + {} generated tokens) needs {} bytes of memory at its "
                                 "largest step; the memory budget is {} bytes",
                                 prompt_tokens, options.gen_length, fit.bytes_needed, fit.budget),
                     prompt_param, "prompt_too_large");
    stream = request.stream;
    ticket = scheduler_.submit(std::move(prompt_ids), options, stream);
  } catch (const ApiError& error) {
    metrics_.count(rejection_of(error));
    reply_error(response, error);
    request_ended();
    return;
  } catch (...) {
    request_ended();
    throw;  // the exception handler answers 500
  }
  const ResponseIdentity id = identity(endpoint);
  if (stream) {
    this->stream(endpoint, std::move(ticket), id, response);  // request_ended() when the stream ends
    return;
  }
  ticket->wait_done();
  if (ticket->error()) {
    reply_error(response, *ticket->error());
  } else {
    response.set_content(dump(answer_body(endpoint, id, answer_of(*ticket))), "application/json");
  }
  request_ended();
}

void HttpServer::stream(Endpoint endpoint, std::shared_ptr<Ticket> ticket, const ResponseIdentity& identity,
                        httplib::Response& response) {
  const ModelInfo& info = engine_.info();
  auto state = std::make_shared<StreamState>(StreamState{
      ticket,
      CommittedTextStream(static_cast<int32_t>(info.mask_token_id), {info.eos_token_id, ticket->options.eot_id},
                          [this](std::span<const int32_t> ids) { return engine_.decode(ids); }),
      identity, endpoint});
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream",
      [this, state](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& event) { return sink.write(event.data(), event.size()); };
        if (!state->started) {
          state->started = true;
          if (state->endpoint == Endpoint::chat_completions && !send(sse_event(stream_role_chunk(state->identity))))
            return false;
        }
        const Ticket::Progress progress = state->ticket->wait(state->version, kStreamPoll);
        if (!sink.is_writable()) return false;  // the client went away: the releaser cancels
        if (!progress.done) {
          if (progress.version > state->version) {
            state->version = progress.version;
            const std::string delta = state->text.update(progress.output_ids);
            if (!delta.empty() && !send(sse_event(stream_chunk(state->endpoint, state->identity, delta)))) return false;
          }
          return true;
        }
        state->finished = true;
        if (state->ticket->error()) {
          if (!send(sse_event(error_body(*state->ticket->error())))) return false;
        } else {
          const Answer answer = answer_of(*state->ticket);
          std::string delta = state->text.update(state->ticket->result()->output_ids);
          delta += state->text.finish(answer.text);
          if (state->endpoint != Endpoint::generate && !delta.empty() &&
              !send(sse_event(stream_chunk(state->endpoint, state->identity, delta))))
            return false;
          const std::string last = state->endpoint == Endpoint::generate ? delta : std::string();
          if (!send(sse_event(stream_chunk(state->endpoint, state->identity, last, &answer)))) return false;
        }
        if (!send(kSseDone)) return false;
        sink.done();
        return true;
      },
      [this, state](bool success) {
        if (!success || !state->finished) state->ticket->cancel();
        request_ended();
      });
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
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
    const ModelInfo& info = engine_.info();
    const nlohmann::ordered_json model = {
        {"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "mosaic"},
        {"mosaic", {{"family", info.family}, {"architecture", info.architecture}, {"device", info.device},
                    {"vocab", info.vocab}, {"max_position", info.max_position}, {"weight_bytes", info.weight_bytes},
                    {"tokenizer", engine_.has_tokenizer()}}}};
    r.set_content(dump({{"object", "list"}, {"data", nlohmann::ordered_json::array({model})}}), "application/json");
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
    log(LogLevel::error, "serve: {} {}: {}", q.method, q.path, what);
    reply_error(r, ApiError(500, "server_error", fmt::format("internal error: {}", what)));
  });
  http_->set_error_handler([this](const httplib::Request& q, httplib::Response& r) {
    if (!r.body.empty()) return;  // an error this server already wrote
    if (r.status == 404)
      reply_error(r, ApiError(404, "invalid_request_error", fmt::format("no route {} {}", q.method, q.path), "",
                              "not_found"));
    else if (r.status == 413)
      reply_error(r, ApiError(413, "invalid_request_error",
                              fmt::format("the request body exceeds {} bytes", options_.max_body_bytes)));
    else
      reply_error(r, ApiError(r.status, r.status >= 500 ? "server_error" : "invalid_request_error",
                              fmt::format("HTTP {}", r.status)));
  });
}

}  // namespace mosaic::serve
