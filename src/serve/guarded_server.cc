#include "serve/guarded_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "serve/request_context.h"

namespace mosaic::serve {
namespace {

// Runs each task at once on the calling thread: cpp-httplib's accept loop then hands every
// accepted socket straight to process_and_close_socket(), which gives it to the guard.
class RunAtOnceQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> task) override { task(); }
  void shutdown() override {}
};

int poll_one(int socket, short events, std::chrono::milliseconds timeout) {
  pollfd fd{socket, events, 0};
  for (;;) {
    const int ready = ::poll(&fd, 1, static_cast<int>(timeout.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return ready;
    return fd.revents;
  }
}

void address_of(int socket, bool peer, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  const int rc = peer ? ::getpeername(socket, reinterpret_cast<sockaddr*>(&address), &length)
                      : ::getsockname(socket, reinterpret_cast<sockaddr*>(&address), &length);
  if (rc != 0) return;
  char host[NI_MAXHOST], service[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof(host), service, sizeof(service),
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(service);
  }
}

}  // namespace

RequestStream::RequestStream(int socket, std::string_view request, std::chrono::milliseconds write_timeout)
    : socket_(socket), request_(request), write_timeout_(write_timeout) {}

bool RequestStream::is_writable() const {
  const int writable = poll_one(socket_, POLLOUT, write_timeout_);
  if (writable <= 0 || (writable & (POLLERR | POLLHUP))) return false;
  // Has the client closed its end? A peek at zero bytes means it has; pending bytes (a pipelined
  // request) or none at all mean it is still there.
  if (poll_one(socket_, POLLIN, std::chrono::milliseconds(0)) <= 0) return true;
  char byte;
  const ssize_t n = ::recv(socket_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

ssize_t RequestStream::read(char* ptr, size_t size) {
  const size_t n = std::min(size, request_.size() - offset_);
  std::memcpy(ptr, request_.data() + offset_, n);
  offset_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t RequestStream::write(const char* ptr, size_t size) {
  for (;;) {
    const int writable = poll_one(socket_, POLLOUT, write_timeout_);
    if (writable <= 0 || (writable & (POLLERR | POLLHUP))) return -1;
    const ssize_t n = ::send(socket_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
  }
}

void RequestStream::get_remote_ip_and_port(std::string& ip, int& port) const { address_of(socket_, true, ip, port); }

void RequestStream::get_local_ip_and_port(std::string& ip, int& port) const { address_of(socket_, false, ip, port); }

GuardedServer::GuardedServer(GuardOptions options, std::chrono::milliseconds write_timeout,
                             ConnectionGuard::Refuse refuse, Setup setup)
    : write_timeout_(write_timeout),
      setup_(std::move(setup)),
      guard_(std::move(options), [this](const ReceivedRequest& request) { return answer(request); }, std::move(refuse)) {
  new_task_queue = [] { return new RunAtOnceQueue; };
}

GuardedServer::~GuardedServer() { guard_.stop(); }

void GuardedServer::widen_backlog(int backlog) {
  // listen() on a listening socket only changes its backlog (Linux).
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, backlog);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  guard_.adopt(sock);
  return true;
}

bool GuardedServer::answer(const ReceivedRequest& request) {
  RequestStream stream(request.socket, request.bytes, write_timeout_);
  RequestContext context;
  context.started = request.started;
  RequestScope scope(context);
  bool connection_closed = false;
  const bool written = process_request(stream, request.close_after, connection_closed, [&](httplib::Request& parsed) {
    if (request.continue_sent) parsed.headers.erase("Expect");  // answered already; not a second time
    if (setup_) setup_(parsed, request);
  });
  return written && !connection_closed;
}

}  // namespace mosaic::serve
