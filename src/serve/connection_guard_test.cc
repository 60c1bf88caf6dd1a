#include "serve/connection_guard.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mosaic::serve {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

// The client's end of a connection the guard owns the other end of.
class Client {
 public:
  explicit Client(ConnectionGuard& guard) {
    int ends[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, ends), 0);
    fd_ = ends[0];
    guard.adopt(ends[1]);
  }
  ~Client() { ::close(fd_); }
  void send(std::string_view data) const { ASSERT_EQ(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL), ssize_t(data.size())); }
  // What arrives until `want` has been read, the peer closes, or `timeout` passes.
  std::string receive(std::string_view want, std::chrono::milliseconds timeout = 2000ms) {
    const auto deadline = Clock::now() + timeout;
    while (received_.find(want) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      received_.append(buf, static_cast<size_t>(n));
    }
    return received_;
  }
  bool closed_by_peer(std::chrono::milliseconds timeout = 2000ms) {
    receive("\x01\x02never", timeout);
    return closed_;
  }

 private:
  int fd_ = -1;
  std::string received_;
  bool closed_ = false;
};

struct Recorder {
  std::mutex mutex;
  std::vector<std::string> requests;
  std::vector<Refusal> refusals;
  std::vector<bool> continue_sent;
};

ConnectionGuard make_guard(Recorder& recorder, GuardOptions options = {}) {
  return ConnectionGuard(
      options,
      [&recorder](const ReceivedRequest& request) {
        {
          std::lock_guard lock(recorder.mutex);
          recorder.requests.emplace_back(request.bytes);
          recorder.continue_sent.push_back(request.continue_sent);
        }
        ::send(request.socket, kOk.data(), kOk.size(), MSG_NOSIGNAL);
        return true;
      },
      [&recorder](const Refusal& refusal) {
        std::lock_guard lock(recorder.mutex);
        recorder.refusals.push_back(refusal);
        return RefusalAnswer{"{\"error\":1}", "req-1"};
      });
}

TEST(ConnectionGuard, ARequestInPiecesIsAnsweredOnceWithExactlyItsBytes) {
  Recorder recorder;
  ConnectionGuard guard(make_guard(recorder));
  Client client(guard);
  const std::string first = "POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
  const std::string second = "GET /b HTTP/1.1\r\n\r\n";
  client.send(first.substr(0, 10));
  std::this_thread::sleep_for(20ms);
  client.send(first.substr(10) + second);  // the second request is pipelined behind the first
  const std::string answers = client.receive("okHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(answers, std::string(kOk) + std::string(kOk));
  std::lock_guard lock(recorder.mutex);
  EXPECT_EQ(recorder.requests, (std::vector<std::string>{first, second}));
}

TEST(ConnectionGuard, MalformedFramingIsAnsweredAtOnce) {
  Recorder recorder;
  ConnectionGuard guard(make_guard(recorder));
  Client client(guard);
  const auto start = Clock::now();
  client.send("POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n");
  const std::string answer = client.receive("{\"error\":1}");
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 400 Bad Request\r\n")) << answer;
  EXPECT_NE(answer.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(answer.find("X-Request-Id: req-1\r\n"), std::string::npos);
  EXPECT_TRUE(client.closed_by_peer());
  std::lock_guard lock(recorder.mutex);
  ASSERT_EQ(recorder.refusals.size(), 1u);
  EXPECT_EQ(recorder.refusals[0].status, 400);
  EXPECT_EQ(recorder.refusals[0].method, "POST");
  EXPECT_TRUE(recorder.requests.empty());
}

TEST(ConnectionGuard, AHeadThatTricklesInPastItsDeadlineIs408) {
  Recorder recorder;
  GuardOptions options;
  options.header_timeout = 300ms;
  ConnectionGuard guard(make_guard(recorder, options));
  Client client(guard);
  const auto start = Clock::now();
  client.send("GET / HTTP/1.1\r\n");
  // A header line every 50 ms: activity does not move the deadline (slowloris).
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(50ms);
    client.send("X-Slow: 1\r\n");
  }
  const std::string answer = client.receive("{\"error\":1}");
  const auto elapsed = Clock::now() - start;
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 408 Request Timeout\r\n")) << answer;
  EXPECT_GE(elapsed, 250ms);
  EXPECT_LT(elapsed, 1500ms);
}

TEST(ConnectionGuard, HalfRequestsHoldNoWorker) {
  Recorder recorder;
  GuardOptions options;
  options.workers = 1;
  ConnectionGuard guard(make_guard(recorder, options));
  std::vector<std::unique_ptr<Client>> halves;
  for (int i = 0; i < 50; ++i) {
    halves.push_back(std::make_unique<Client>(guard));
    halves.back()->send("POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro");
  }
  Client client(guard);
  const auto start = Clock::now();
  client.send("GET /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(client.receive(kOk), kOk);
  EXPECT_LT(Clock::now() - start, 500ms);
  EXPECT_EQ(guard.open_connections(), 51u);
}

TEST(ConnectionGuard, AtTheCapANewConnectionEvictsTheOldestIdleOne) {
  Recorder recorder;
  GuardOptions options;
  options.max_connections = 4;
  ConnectionGuard guard(make_guard(recorder, options));
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<Client>(guard));
    std::this_thread::sleep_for(10ms);  // an order of age
  }
  Client late(guard);
  late.send("GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(late.receive(kOk), kOk);
  EXPECT_TRUE(idle[0]->closed_by_peer());
  EXPECT_FALSE(idle[1]->closed_by_peer(100ms));
  EXPECT_EQ(guard.open_connections(), 4u);
}

TEST(ConnectionGuard, WhenEveryConnectionIsBeingAnsweredANewOneGets503) {
  std::mutex mutex;
  std::condition_variable released;
  bool release = false;
  std::atomic<int> answering{0};
  GuardOptions options;
  options.max_connections = 1;
  ConnectionGuard guard(
      options,
      [&](const ReceivedRequest& request) {
        ++answering;
        std::unique_lock lock(mutex);
        released.wait(lock, [&] { return release; });
        ::send(request.socket, kOk.data(), kOk.size(), MSG_NOSIGNAL);
        return true;
      },
      [](const Refusal&) { return RefusalAnswer{"{}", "req-2"}; });
  Client busy(guard);
  busy.send("GET / HTTP/1.1\r\n\r\n");
  while (answering == 0) std::this_thread::sleep_for(1ms);
  Client refused(guard);
  EXPECT_TRUE(refused.receive("{}").starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  released.notify_all();
  EXPECT_EQ(busy.receive(kOk), kOk);
}

TEST(ConnectionGuard, ExpectContinueIsAnsweredBeforeTheBody) {
  Recorder recorder;
  ConnectionGuard guard(make_guard(recorder));
  Client client(guard);
  client.send("POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  EXPECT_EQ(client.receive("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  client.send("abc");
  EXPECT_NE(client.receive(kOk).find(kOk), std::string::npos);
  std::lock_guard lock(recorder.mutex);
  ASSERT_EQ(recorder.continue_sent.size(), 1u);
  EXPECT_TRUE(recorder.continue_sent[0]);
}

TEST(ConnectionGuard, KeepAliveEndsAfterTheIdleTimeoutAndConnectionClose) {
  Recorder recorder;
  GuardOptions options;
  options.idle_timeout = 100ms;
  ConnectionGuard guard(make_guard(recorder, options));
  Client idle(guard);
  idle.send("GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(idle.receive(kOk), kOk);
  const auto start = Clock::now();
  EXPECT_TRUE(idle.closed_by_peer());
  EXPECT_LT(Clock::now() - start, 1s);

  Client closing(guard);
  closing.send("GET / HTTP/1.1\r\nConnection: close\r\n\r\nGET /ignored HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(closing.closed_by_peer());
  std::lock_guard lock(recorder.mutex);
  EXPECT_EQ(recorder.requests.size(), 2u);  // the request after Connection: close is not answered
}

TEST(ConnectionGuard, StopClosesIdleConnections) {
  Recorder recorder;
  ConnectionGuard guard(make_guard(recorder));
  Client client(guard);
  client.send("GET / HTTP/1.1\r\n");
  std::this_thread::sleep_for(20ms);
  guard.stop();
  EXPECT_TRUE(client.closed_by_peer());
  EXPECT_EQ(guard.open_connections(), 0u);
}

}  // namespace
}  // namespace mosaic::serve
