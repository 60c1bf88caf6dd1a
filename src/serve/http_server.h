// `mosaic serve`'s HTTP side (cpp-httplib behind a ConnectionGuard): the OpenAI-compatible routes,
// /generate, the model list, tokenizing, health, version and Prometheus metrics, over one Scheduler.
//
//   POST /v1/completions        {"prompt": "...", "max_tokens": 64, "stream": true, "steps": 64, ...}
//   POST /v1/chat/completions   {"messages": [{"role": "user", "content": "..."}], ...}
//   POST /generate              {"prompt": "...", "gen_length": 64, "steps": 64, "block_length": 32, ...}
//   POST /tokenize              {"prompt": "..."} or {"messages": [...]} -> {"count", "max_model_len", "tokens"}
//   POST /detokenize            {"tokens": [...]} -> {"prompt": "..."}
//   GET  /v1/models, /v1/models/{id}, /health, /metrics, /version
//
// Every failure is an OpenAI error object with a 4xx/5xx status, never a dropped connection; a
// known route asked with another method is 405 with Allow. A streaming client that disconnects is
// cancelled at the next step boundary. shutdown() drains: new requests get 503, queued and running
// ones finish, then the listener closes. Operations (docs/design/http-hardening.md): requests are
// received in full by the guard before a thread answers them; --api-key, CORS, X-Request-Id and
// one access-log line per request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "mosaic/engine.h"
#include "serve/api_request.h"
#include "serve/completion_stream.h"
#include "serve/connection_guard.h"
#include "serve/cors_policy.h"
#include "serve/openai_json.h"
#include "serve/request_id.h"
#include "serve/scheduler.h"
#include "serve/serve_metrics.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace mosaic::serve {

class GuardedServer;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: any free port (bind() returns it)
  std::string model_name;           // what /v1/models lists and requests may name
  SchedulerOptions scheduler;
  RequestLimits limits;
  bool allow_long_context = false;  // prompt + gen_length beyond the model's trained context
  int threads = 0;                  // HTTP worker threads; 0: enough for every queued and running request
  size_t max_body_bytes = size_t{8} << 20;
  // Connections (connection_guard.h): open at once, and how long a request may take to arrive.
  size_t max_connections = 512;
  double header_timeout_s = 10, request_timeout_s = 30, idle_timeout_s = 5, write_timeout_s = 30;
  std::string api_key;              // empty: none; else every route but /health needs `Authorization: Bearer KEY`
  CorsPolicy cors;                  // off unless --allowed-origins
  bool access_log = true;           // one line per request on stderr
};

class HttpServer {
 public:
  HttpServer(const Engine& engine, ServeOptions options);
  ~HttpServer();

  // Binds the listening socket; returns the port. Throws mosaic::Error when it cannot.
  int bind();
  size_t open_connections() const;
  // Serves until shutdown() has drained (or stopped) everything.
  void serve();
  // First call: drain (503 for new requests; queued and running ones finish), then close.
  // `immediate`: end every request now (503) and close.
  void shutdown(bool immediate);

 private:
  void install_routes();
  void install_operations();
  void handle_generation(Endpoint endpoint, const httplib::Request& request, httplib::Response& response);
  void handle_tokenize(const httplib::Request& request, httplib::Response& response);
  void handle_detokenize(const httplib::Request& request, httplib::Response& response);
  std::vector<int32_t> prompt_ids_of(Endpoint endpoint, const ApiRequest& request) const;
  nlohmann::ordered_json model_object() const;
  void reply_error(httplib::Response& response, const ApiError& error);
  // `close_delimited`: an HTTP/1.0 client, which knows no chunked encoding: the body ends when
  // the connection closes.
  void stream(std::shared_ptr<CompletionStream> events, httplib::Response& response, bool close_delimited);
  // An answer is handed out: the vLLM metrics and the access log's figures.
  void note_answer(const Answer& answer);
  ResponseIdentity identity(Endpoint endpoint);
  // Guard hooks: a request is about to be routed; the guard answered one itself.
  void begin_request(httplib::Request& request);
  RefusalAnswer refusal(const Refusal& refusal);
  // Before routing: CORS preflights and OPTIONS, the API key. True: answered here.
  bool screen(const httplib::Request& request, httplib::Response& response);
  void finish_response(const httplib::Request& request, httplib::Response& response);
  void log_access(const httplib::Request& request, const httplib::Response& response);
  void request_started();
  void request_ended();

  const Engine& engine_;
  ServeOptions options_;
  ServeMetrics metrics_;
  Scheduler scheduler_;
  IdMaker ids_;
  const int64_t started_unix_;      // the models' `created`
  std::unique_ptr<GuardedServer> http_;
  std::mutex in_flight_mutex_;
  std::condition_variable in_flight_done_;
  int64_t in_flight_ = 0;           // accepted generation requests whose response is not yet sent
  std::atomic<bool> draining_{false};
  std::atomic<bool> listener_closed_{false};
};

}  // namespace mosaic::serve
