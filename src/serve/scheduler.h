// The serving scheduler: one thread owns a BatchSession and batches at the granularity of a
// denoising step. Between steps it drops requests whose clients went away, retires finished ones
// at once, and admits waiting requests in arrival order:
//  - continuous: whenever the plan says the enlarged batch's largest step still fits the memory
//    budget (and --max-batch, if set, allows);
//  - fixed: only into an empty batch, all together, once the batch start rule says so
//    (serve/batch_timeout.h); the batch then runs until its last request finishes.
// Requests never influence each other's results, so batch composition never changes an answer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "mosaic/batch_session.h"
#include "mosaic/engine.h"
#include "serve/batch_timeout.h"
#include "serve/serve_metrics.h"
#include "serve/ticket.h"

namespace mosaic::serve {

enum class BatchingMode { continuous, fixed };

struct SchedulerOptions {
  BatchingMode mode = BatchingMode::continuous;
  int64_t max_batch = 0;                  // 0: continuous: the plan alone decides; fixed: 16
  int64_t max_queue = 64;                 // waiting requests; one more is answered 429
  std::optional<double> batch_timeout_s;  // fixed batching; unset: auto
};

class Scheduler {
 public:
  Scheduler(const Engine& engine, SchedulerOptions options, ServeMetrics& metrics);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request whose options passed Engine::resolve_options and whose prompt fits the
  // budget alone. Throws ApiError: 429 when the queue is full, 503 while draining. A request
  // with `stop_when` ends (completed) after the first step at which it says so.
  std::shared_ptr<Ticket> submit(std::vector<int32_t> prompt_ids, GenerationOptions options, bool stream,
                                 std::vector<int32_t> suffix_ids = {}, StopCheck stop_when = {});

  // Refuses new requests (503) from now on; those queued and running finish.
  void begin_drain();
  bool draining() const;
  // Blocks until nothing is queued or running.
  void wait_idle();
  // Ends every request (503) and stops the scheduler thread.
  void stop();

  int64_t max_batch() const { return max_batch_; }

 private:
  struct Running {
    std::shared_ptr<Ticket> ticket;
    Clock::time_point admitted;
    std::optional<Clock::time_point> first_token;
    int64_t largest_batch = 0;
  };

  void run();
  bool ready_to_admit(Clock::time_point now, Clock::time_point idle_since, Clock::time_point& wake_at);
  void admit(BatchSession& session, std::map<int64_t, Running>& running);
  void drop_cancelled_waiting();
  void cancel_gone_clients(BatchSession& session, std::map<int64_t, Running>& running);
  BatchStep run_step(BatchSession& session, std::map<int64_t, Running>& running);
  void end(BatchSession& session, std::map<int64_t, Running>& running, int64_t id, Outcome outcome,
           const ApiError* error);
  RequestRecord record_of(const Running& r, Clock::time_point now) const;

  const Engine& engine_;
  const SchedulerOptions options_;
  const int64_t max_batch_;  // 0: none
  ServeMetrics& metrics_;

  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::shared_ptr<Ticket>> waiting_;
  int64_t running_count_ = 0;
  bool draining_ = false, stopping_ = false;
  LoadEstimator load_;
  std::thread thread_;
};

}  // namespace mosaic::serve
