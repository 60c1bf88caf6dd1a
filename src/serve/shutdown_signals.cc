#include "serve/shutdown_signals.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>

#include "core/log.h"

namespace mosaic::serve {
namespace {

sigset_t shutdown_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void block_shutdown_signals() {
  const sigset_t set = shutdown_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

ShutdownSignalWaiter::ShutdownSignalWaiter(std::function<void()> graceful, std::function<void()> immediate)
    : graceful_(std::move(graceful)), immediate_(std::move(immediate)) {
  waiter_ = std::thread([this] { wait(); });
}

ShutdownSignalWaiter::~ShutdownSignalWaiter() {
  stopping_ = true;
  pthread_kill(waiter_.native_handle(), SIGTERM);  // wakes sigwait; stopping_ says it is not a request
  waiter_.join();
  if (graceful_thread_.joinable()) graceful_thread_.join();
}

void ShutdownSignalWaiter::wait() {
  const sigset_t set = shutdown_set();
  int received = 0;
  for (int count = 0;;) {
    if (sigwait(&set, &received) != 0) continue;
    if (stopping_) return;
    ++count;
    if (count == 1) {
      log(LogLevel::warn, "serve: {} received: finishing the requests in flight (send it again to stop at once)",
          received == SIGINT ? "SIGINT" : "SIGTERM");
      graceful_thread_ = std::thread(graceful_);
    } else {
      log(LogLevel::warn, "serve: second signal: ending every request now");
      immediate_();
    }
  }
}

}  // namespace mosaic::serve
