// `mosaic serve`'s HTTP side (cpp-httplib): the OpenAI-compatible routes, /generate, the model
// list, health and Prometheus metrics, over one Scheduler.
//
//   POST /v1/completions        {"prompt": "...", "max_tokens": 64, "stream": true, "steps": 64, ...}
//   POST /v1/chat/completions   {"messages": [{"role": "user", "content": "..."}], ...}
//   POST /generate              {"prompt": "...", "gen_length": 64, "steps": 64, "block_length": 32, ...}
//   GET  /v1/models, /health, /metrics
//
// Every failure is an OpenAI error object with a 4xx/5xx status, never a dropped connection. A
// streaming client that disconnects is cancelled at the next step boundary. shutdown() drains:
// new requests get 503, queued and running ones finish, then the listener closes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "mosaic/engine.h"
#include "serve/api_request.h"
#include "serve/openai_json.h"
#include "serve/scheduler.h"
#include "serve/serve_metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace mosaic::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: any free port (bind() returns it)
  std::string model_name;           // what /v1/models lists and requests may name
  SchedulerOptions scheduler;
  RequestLimits limits;
  bool allow_long_context = false;  // prompt + gen_length beyond the model's trained context
  int threads = 0;                  // HTTP worker threads; 0: enough for every queued and running request
  size_t max_body_bytes = size_t{8} << 20;
};

class HttpServer {
 public:
  HttpServer(const Engine& engine, ServeOptions options);
  ~HttpServer();

  // Binds the listening socket; returns the port. Throws mosaic::Error when it cannot.
  int bind();
  // Serves until shutdown() has drained (or stopped) everything.
  void serve();
  // First call: drain (503 for new requests; queued and running ones finish), then close.
  // `immediate`: end every request now (503) and close.
  void shutdown(bool immediate);

 private:
  struct StreamState;
  void install_routes();
  void handle_generation(Endpoint endpoint, const httplib::Request& request, httplib::Response& response);
  void reply_error(httplib::Response& response, const ApiError& error);
  void stream(Endpoint endpoint, std::shared_ptr<Ticket> ticket, const ResponseIdentity& identity,
              httplib::Response& response);
  Answer answer_of(const Ticket& ticket) const;
  ResponseIdentity identity(Endpoint endpoint);
  void request_started();
  void request_ended();

  const Engine& engine_;
  ServeOptions options_;
  ServeMetrics metrics_;
  Scheduler scheduler_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<uint64_t> next_id_{1};
  std::mutex in_flight_mutex_;
  std::condition_variable in_flight_done_;
  int64_t in_flight_ = 0;           // accepted generation requests whose response is not yet sent
  std::atomic<bool> draining_{false};
  std::atomic<bool> listener_closed_{false};
};

}  // namespace mosaic::serve
