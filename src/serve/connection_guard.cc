#include "serve/connection_guard.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "core/log.h"

namespace mosaic::serve {
namespace {

constexpr size_t kReadChunk = 64 << 10;

// Writes what the socket takes now, never waiting: the poll thread must not block on a client
// that does not read. What does not fit is dropped (the connection closes after it anyway).
void send_now(int socket, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(socket, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

int milliseconds_until(std::chrono::steady_clock::time_point when, std::chrono::steady_clock::time_point now) {
  if (when <= now) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(when - now).count();
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

}  // namespace

const char* http_reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

ConnectionGuard::ConnectionGuard(GuardOptions options, Answer answer, Refuse refuse)
    : options_(std::move(options)), answer_(std::move(answer)), refuse_(std::move(refuse)) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  poll_thread_ = std::thread([this] { poll_loop(); });
  const int workers = std::max(1, options_.workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ConnectionGuard::~ConnectionGuard() {
  stop();
  ::close(wake_fd_);
}

void ConnectionGuard::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void ConnectionGuard::adopt(int socket) {
  {
    std::lock_guard lock(inbox_mutex_);
    if (!stopping_) {
      adopted_.push_back(socket);
      ++open_;
      socket = -1;
    }
  }
  if (socket >= 0) {
    ::shutdown(socket, SHUT_RDWR);
    ::close(socket);
    return;
  }
  wake();
}

size_t ConnectionGuard::open_connections() const {
  std::lock_guard lock(inbox_mutex_);
  return open_;
}

void ConnectionGuard::stop() {
  {
    std::lock_guard lock(inbox_mutex_);
    if (stopped_) return;
    stopped_ = stopping_ = true;
  }
  wake();
  poll_thread_.join();  // it closed every connection it held
  {
    std::lock_guard lock(work_mutex_);
    workers_stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();  // each answers what it was given
  for (auto& [key, connection] : connections_)
    if (connection->socket >= 0) close(*connection);
  connections_.clear();
  std::lock_guard lock(inbox_mutex_);
  for (const int socket : adopted_) ::close(socket);
  adopted_.clear();
  open_ = 0;
}

void ConnectionGuard::close(Connection& connection) {
  ::shutdown(connection.socket, SHUT_RDWR);
  ::close(connection.socket);
  connection.socket = -1;
  std::lock_guard lock(inbox_mutex_);
  --open_;
}

// --- the poll thread

void ConnectionGuard::poll_loop() {
  std::vector<pollfd> fds;
  std::vector<Connection*> polled;
  for (;;) {
    take_inbox();
    {
      std::lock_guard lock(inbox_mutex_);
      if (stopping_) break;
    }
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    polled.assign(1, nullptr);
    Clock::time_point now = Clock::now(), next = now + std::chrono::seconds(60);
    for (auto& [key, connection] : connections_) {
      if (connection->state == State::dispatched) continue;
      fds.push_back(pollfd{connection->socket, POLLIN, 0});
      polled.push_back(connection.get());
      next = std::min(next, connection->deadline);
    }
    const int ready = ::poll(fds.data(), fds.size(), milliseconds_until(next, now));
    if (ready < 0 && errno != EINTR) {
      log(LogLevel::error, "serve: poll failed: errno {}", errno);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (fds[0].revents & POLLIN) {
      uint64_t count = 0;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof(count));
    }
    for (size_t i = 1; i < fds.size(); ++i)
      if (ready > 0 && fds[i].revents != 0) on_readable(*polled[i]);
    now = Clock::now();
    for (size_t i = 1; i < polled.size(); ++i) {
      Connection& connection = *polled[i];
      if (connection.socket < 0 || connection.state == State::dispatched || now < connection.deadline) continue;
      if (connection.state == State::reading)
        refuse(connection, 408,
               fmt::format("the request was not received within {} s",
                           std::chrono::duration<double>(connection.head_deadline ? options_.header_timeout
                                                                                  : options_.request_timeout).count()));
      else
        close(connection);  // idle past the keep-alive timeout, or done lingering
    }
    for (auto it = connections_.begin(); it != connections_.end();)
      it = it->second->socket < 0 ? connections_.erase(it) : std::next(it);
  }
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->second->state == State::dispatched) {
      ++it;
      continue;
    }
    close(*it->second);
    it = connections_.erase(it);
  }
}

void ConnectionGuard::take_inbox() {
  std::vector<int> adopted;
  std::vector<Connection*> back;
  {
    std::lock_guard lock(inbox_mutex_);
    adopted.swap(adopted_);
    back.swap(returned_);
  }
  for (Connection* connection : back) returned(*connection);
  for (const int socket : adopted) admit(socket);
}

void ConnectionGuard::admit(int socket) {
  size_t held = 0;
  for (const auto& [key, connection] : connections_) held += connection->socket >= 0;
  if (held >= options_.max_connections && !evict_one()) {
    // Every connection is being answered: this one cannot wait.
    Connection refused;
    refused.socket = socket;
    refused.opened = refused.started = Clock::now();
    const RefusalAnswer answer =
        refuse_(Refusal{503, fmt::format("the server has {} connections open, all busy", options_.max_connections), {},
                        {}, {}, refused.started});
    send_now(socket, fmt::format("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                 "Content-Length: {}\r\nConnection: close\r\nRetry-After: 1\r\nX-Request-Id: {}\r\n\r\n{}",
                                 answer.body.size(), answer.request_id, answer.body));
    close(refused);
    return;
  }
  auto connection = std::make_unique<Connection>();
  connection->socket = socket;
  connection->framer = RequestFramer(options_.framing);
  connection->opened = Clock::now();
  connection->deadline = connection->opened + options_.header_timeout;  // a first byte is due as soon as a head
  connection->state = State::idle;
  Connection* key = connection.get();
  connections_.emplace(key, std::move(connection));
}

// Frees a place for a new connection: one lingering after a refusal, else the longest idle, else
// the oldest still being received (a slow sender, most likely an attacker). False: all busy.
bool ConnectionGuard::evict_one() {
  Connection* victim = nullptr;
  for (const State state : {State::closing, State::idle, State::reading}) {
    for (const auto& [key, connection] : connections_) {
      if (connection->socket < 0 || connection->state != state) continue;
      const auto since = state == State::reading ? connection->started : connection->opened;
      if (!victim || since < (state == State::reading ? victim->started : victim->opened)) victim = connection.get();
    }
    if (victim) break;
  }
  if (!victim) return false;
  if (victim->state == State::reading) {
    const RefusalAnswer answer = refuse_(Refusal{503, "closed to make room for a new connection",
                                                 victim->framer.head().method, victim->framer.head().target,
                                                 victim->framer.head().request_id, victim->started});
    send_now(victim->socket, fmt::format("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                         "Content-Length: {}\r\nConnection: close\r\nX-Request-Id: {}\r\n\r\n{}",
                                         answer.body.size(), answer.request_id, answer.body));
  }
  close(*victim);
  return true;
}

void ConnectionGuard::on_readable(Connection& connection) {
  if (connection.socket < 0) return;
  char chunk[kReadChunk];
  const ssize_t n = ::recv(connection.socket, chunk, sizeof(chunk), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {  // the client closed (or reset) the connection: nobody to answer
    close(connection);
    return;
  }
  if (connection.state == State::closing) return;  // lingering: dropped
  if (connection.state == State::idle) {
    connection.state = State::reading;
    connection.started = Clock::now();
    connection.deadline = connection.started + options_.header_timeout;
    connection.head_deadline = true;
  }
  connection.buffer.append(chunk, static_cast<size_t>(n));
  examine(connection);
}

// Asks the framer about the buffered bytes: dispatch, refuse, or wait for more.
void ConnectionGuard::examine(Connection& connection) {
  const FramingVerdict verdict = connection.framer.advance(connection.buffer);
  if (verdict.state == FramingState::invalid) {
    refuse(connection, verdict.status, verdict.message);
    return;
  }
  if (verdict.state == FramingState::complete) {
    connection.skip = verdict.skip, connection.length = verdict.length;
    dispatch(connection);
    return;
  }
  if (connection.framer.head_complete() && connection.head_deadline) {
    connection.head_deadline = false;
    connection.deadline = connection.started + options_.request_timeout;
  }
  if (connection.framer.body_pending() && connection.framer.head().expect_continue && !connection.continue_sent) {
    connection.continue_sent = true;
    send_now(connection.socket, "HTTP/1.1 100 Continue\r\n\r\n");
  }
}

void ConnectionGuard::refuse(Connection& connection, int status, std::string message) {
  const RequestHead& head = connection.framer.head();
  const RefusalAnswer answer = refuse_(Refusal{status, std::move(message), head.method, head.target, head.request_id,
                                               connection.started});
  send_now(connection.socket,
           fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n"
                       "X-Request-Id: {}\r\n\r\n{}",
                       status, http_reason_phrase(status), answer.body.size(), answer.request_id, answer.body));
  // Lingering close: stop sending, but read (and drop) what the client still sends for a while, so
  // that closing with unread bytes does not reset the connection before the client reads the answer.
  ::shutdown(connection.socket, SHUT_WR);
  connection.state = State::closing;
  connection.buffer.clear();
  connection.deadline = Clock::now() + options_.linger;
}

void ConnectionGuard::dispatch(Connection& connection) {
  connection.state = State::dispatched;
  {
    std::lock_guard lock(work_mutex_);
    work_.push_back(&connection);
  }
  work_ready_.notify_one();
}

// A worker has answered: the connection waits for its next request (perhaps already buffered).
void ConnectionGuard::returned(Connection& connection) {
  if (!connection.keep) {
    close(connection);
    return;
  }
  connection.framer = RequestFramer(options_.framing);
  connection.continue_sent = false;
  connection.opened = Clock::now();
  if (connection.buffer.empty()) {
    connection.state = State::idle;
    connection.deadline = connection.opened + options_.idle_timeout;
    return;
  }
  connection.state = State::reading;  // pipelined: the next request's first bytes are here
  connection.started = connection.opened;
  connection.deadline = connection.started + options_.header_timeout;
  connection.head_deadline = true;
  examine(connection);
}

// --- the workers

void ConnectionGuard::worker_loop() {
  for (;;) {
    Connection* connection = nullptr;
    {
      std::unique_lock lock(work_mutex_);
      work_ready_.wait(lock, [&] { return workers_stopping_ || !work_.empty(); });
      if (work_.empty()) return;
      connection = work_.front();
      work_.pop_front();
    }
    ++connection->served;
    ReceivedRequest request;
    request.socket = connection->socket;
    request.bytes = std::string_view(connection->buffer).substr(connection->skip, connection->length - connection->skip);
    request.head = &connection->framer.head();
    request.started = connection->started;
    request.close_after = connection->framer.head().close || connection->served >= options_.max_requests_per_connection;
    request.continue_sent = connection->continue_sent;
    bool keep = false;
    try {
      keep = answer_(request);
    } catch (const std::exception& error) {
      log(LogLevel::error, "serve: answering a request failed: {}", error.what());
    } catch (...) {
      log(LogLevel::error, "serve: answering a request failed");
    }
    connection->keep = keep && !request.close_after;
    connection->buffer.erase(0, connection->length);
    {
      std::lock_guard lock(inbox_mutex_);
      returned_.push_back(connection);
    }
    wake();
  }
}

}  // namespace mosaic::serve
