// Every client connection of `mosaic serve` while it is not being answered: one poll() thread
// reads each request completely, under deadlines and a cap on open connections, and only then
// hands it to a worker thread. So a client that sends slowly (slowloris), half a request, or
// nothing at all holds no worker; malformed framing is answered at once (http_framing.h); and an
// idle keep-alive connection waits in poll(), not in a thread. Design: docs/design/http-hardening.md.
//
//   ConnectionGuard guard(options, answer, refusal);  // answer(request) runs on a worker
//   guard.adopt(accept(listener, ...));               // from the accepting thread
//   ...
//   guard.stop();                                     // closes idle connections, waits for workers
//
// Deadlines, each from the request's first byte: the head within header_timeout, the whole
// request within request_timeout; past either the client gets 408 and the connection closes. A
// keep-alive connection may sit idle for idle_timeout between requests. At max_connections a new
// connection evicts, in this order, one that is closing, the longest idle, or the oldest still
// being received; if every connection is being answered, the new one gets 503.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "serve/http_framing.h"

namespace mosaic::serve {

struct GuardOptions {
  size_t max_connections = 512;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds request_timeout{30'000};
  std::chrono::milliseconds idle_timeout{5'000};
  std::chrono::milliseconds linger{2'000};  // after a refusal: read and drop what the client still sends
  size_t max_requests_per_connection = 100;
  int workers = 16;
  FramingLimits framing;
};

// A request received in full, as a worker answers it.
struct ReceivedRequest {
  int socket = -1;
  std::string_view bytes;  // exactly this request: head and framed body
  const RequestHead* head = nullptr;
  std::chrono::steady_clock::time_point started;  // its first byte
  bool close_after = false;    // the last request of this connection (Connection: close, HTTP/1.0, the cap)
  bool continue_sent = false;  // the guard has answered its Expect: 100-continue
};

// A request the guard answered itself.
struct Refusal {
  int status = 0;
  std::string message;
  std::string method, target;  // empty when its request line was never read
  std::string request_id;      // its X-Request-Id header as sent (empty: none or not read)
  std::chrono::steady_clock::time_point started;
};

// What to send for a refusal: a JSON body and the request id to return.
struct RefusalAnswer {
  std::string body;
  std::string request_id;
};

class ConnectionGuard {
 public:
  // Answers a request on its socket (on a worker); true: the connection may carry another.
  using Answer = std::function<bool(const ReceivedRequest&)>;
  using Refuse = std::function<RefusalAnswer(const Refusal&)>;

  ConnectionGuard(GuardOptions options, Answer answer, Refuse refuse);
  ~ConnectionGuard();
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // Takes ownership of an accepted socket. Any thread.
  void adopt(int socket);
  // Closes every connection not being answered; waits for the workers to finish theirs.
  void stop();

  size_t open_connections() const;

 private:
  enum class State { idle, reading, dispatched, closing };
  struct Connection {
    int socket = -1;
    State state = State::idle;
    std::string buffer;  // received, not yet answered
    RequestFramer framer;
    std::chrono::steady_clock::time_point opened, started, deadline;
    bool head_deadline = true;  // `deadline` is the head's (else the whole request's)
    bool continue_sent = false;
    size_t skip = 0, length = 0;  // dispatched: the request is buffer[skip, length)
    size_t served = 0;
    bool keep = false;          // set by the worker: may carry another request
  };
  using Clock = std::chrono::steady_clock;

  void poll_loop();
  void take_inbox();
  void admit(int socket);
  bool evict_one();
  void on_readable(Connection& connection);
  void examine(Connection& connection);
  void refuse(Connection& connection, int status, std::string message);
  void dispatch(Connection& connection);
  void returned(Connection& connection);
  void close(Connection& connection);
  void worker_loop();
  void wake();

  const GuardOptions options_;
  const Answer answer_;
  const Refuse refuse_;
  int wake_fd_ = -1;

  mutable std::mutex inbox_mutex_;
  std::vector<int> adopted_;
  std::vector<Connection*> returned_;
  bool stopping_ = false;
  size_t open_ = 0;  // for open_connections(), under inbox_mutex_

  // Owned by the poll thread (and by stop() once the threads have ended).
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections_;

  std::mutex work_mutex_;
  std::condition_variable work_ready_;
  std::deque<Connection*> work_;
  bool workers_stopping_ = false;

  std::thread poll_thread_;
  std::vector<std::thread> workers_;
  bool stopped_ = false;
};

// "Bad Request" for 400, ...: the reason phrases of the statuses the guard and the server send.
const char* http_reason_phrase(int status);

}  // namespace mosaic::serve
