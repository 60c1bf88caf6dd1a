// What the server knows about the request a thread is answering: its id, when its first byte
// arrived, and what a generation handler recorded (tokens, steps, queue time) for the access log.
// cpp-httplib answers a request start to end on one thread (routing, handler, streamed body,
// logger), so the record is the thread's own: a RequestScope installs it for that span.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace mosaic::serve {

struct GenerationUsage {
  int64_t prompt_tokens = 0, completion_tokens = 0, steps = 0;
  double queue_s = 0;
  std::string finish_reason;
};

struct RequestContext {
  std::string id;
  std::chrono::steady_clock::time_point started;
  std::optional<GenerationUsage> usage;
};

// The request this thread is answering; nullptr outside a RequestScope.
RequestContext* current_request();

class RequestScope {
 public:
  explicit RequestScope(RequestContext& context);
  ~RequestScope();
  RequestScope(const RequestScope&) = delete;
  RequestScope& operator=(const RequestScope&) = delete;

 private:
  RequestContext* previous_;
};

}  // namespace mosaic::serve
