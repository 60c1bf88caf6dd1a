// cpp-httplib's Server behind a ConnectionGuard (connection_guard.h): the library keeps its
// accept loop, routing, handlers, error pages and response writing; the guard owns each
// connection until a request has arrived in full, and the library then parses it from memory.
//
// Two hooks make that possible in cpp-httplib 0.11.4 without patching it: `new_task_queue`
// returns a queue that runs each accepted socket's task at once on the accepting thread, and the
// virtual process_and_close_socket(), which that task calls, hands the socket to the guard instead
// of reading it. A guard worker then calls the protected process_request() with a RequestStream:
// reads come from the buffered request (and end with it), writes go to the socket.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

#include "serve/connection_guard.h"

namespace mosaic::serve {

// One received request as an httplib::Stream: reads return its bytes, then 0 (end of input), so
// the library can never wait on the socket for more; writes go to the socket within a deadline.
class RequestStream final : public httplib::Stream {
 public:
  RequestStream(int socket, std::string_view request, std::chrono::milliseconds write_timeout);

  bool is_readable() const override { return offset_ < request_.size(); }
  // The client can take more bytes within the write timeout and has not closed its end.
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return socket_; }

 private:
  int socket_;
  std::string_view request_;
  size_t offset_ = 0;
  std::chrono::milliseconds write_timeout_;
};

class GuardedServer : public httplib::Server {
 public:
  // Called with each parsed request before it is routed (request ids, headers to drop).
  using Setup = std::function<void(httplib::Request&, const ReceivedRequest&)>;

  GuardedServer(GuardOptions options, std::chrono::milliseconds write_timeout, ConnectionGuard::Refuse refuse,
                Setup setup);
  ~GuardedServer() override;

  // After bind: lets the kernel hold `backlog` connections not yet accepted. cpp-httplib listens
  // with a backlog of 5, so a burst of connections beyond it waits in SYN retransmissions (seconds).
  void widen_backlog(int backlog);
  // After listen_after_bind() has returned: closes idle connections, waits for the answers in progress.
  void close_connections() { guard_.stop(); }
  size_t open_connections() const { return guard_.open_connections(); }

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool answer(const ReceivedRequest& request);

  std::chrono::milliseconds write_timeout_;
  Setup setup_;
  ConnectionGuard guard_;
};

}  // namespace mosaic::serve
