// SIGTERM / SIGINT for a server: block them in every thread (call block_shutdown_signals() before
// any thread starts), then wait for them on a thread of their own. The first signal starts a
// graceful shutdown (on a thread of its own, so that a second signal is still heard); the second
// asks for an immediate one.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

namespace mosaic::serve {

// Blocks SIGTERM and SIGINT in the calling thread and, by inheritance, in threads it starts later;
// ignores SIGPIPE (a client that hangs up is a failed write, not the end of the process).
void block_shutdown_signals();

class ShutdownSignalWaiter {
 public:
  ShutdownSignalWaiter(std::function<void()> graceful, std::function<void()> immediate);
  ~ShutdownSignalWaiter();
  ShutdownSignalWaiter(const ShutdownSignalWaiter&) = delete;
  ShutdownSignalWaiter& operator=(const ShutdownSignalWaiter&) = delete;

 private:
  void wait();

  std::function<void()> graceful_, immediate_;
  std::thread waiter_, graceful_thread_;
  std::atomic<bool> stopping_{false};  // set before the destructor wakes the waiter
};

}  // namespace mosaic::serve
