// What `GET /metrics` reports, in Prometheus text: requests by outcome, queue depth, batch size,
// step latency, committed tokens per second, the arena's mapped bytes, the planned peak and PAR
// of the latest step, and per-request queue time, time to first committed token, NFE and tokens
// per step. Updated by the scheduler and the HTTP handlers; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "mosaic/batch_session.h"
#include "serve/prometheus_text.h"
#include "serve/ticket.h"

namespace mosaic::serve {

enum class Outcome {
  completed,            // answered in full
  cancelled,            // the client went away before the end
  failed,               // a step failed (server error)
  rejected_invalid,     // 400: malformed or out-of-range request
  rejected_too_large,   // 400: the request cannot fit the memory budget
  rejected_queue_full,  // 429
  rejected_draining,    // 503: the server is shutting down
};
inline constexpr int kOutcomeCount = 7;
const char* outcome_name(Outcome outcome);

class ServeMetrics {
 public:
  explicit ServeMetrics(uint64_t budget_bytes);

  void count(Outcome outcome);
  // A request that ran: its outcome plus what it recorded.
  void finished(Outcome outcome, const RequestRecord& record, int64_t steps, int64_t forwards,
                int64_t answer_tokens);
  void step(const BatchStep& step, int64_t requests_in_step, Clock::time_point now);
  void set_load(int64_t queued, int64_t running);
  void set_batch_start(double arrival_rate, double timeout_s, int64_t fill);

  int64_t queued() const;
  int64_t running() const;
  uint64_t count_of(Outcome outcome) const;
  std::string render() const;

 private:
  mutable std::mutex mutex_;
  uint64_t budget_bytes_;
  std::array<uint64_t, kOutcomeCount> outcomes_{};
  int64_t queued_ = 0, running_ = 0;
  uint64_t steps_ = 0, committed_tokens_ = 0, request_steps_ = 0, answer_tokens_ = 0;
  uint64_t arena_bytes_ = 0, planned_peak_ = 0;
  int64_t cache_pages_used_ = 0, cache_pages_free_ = -1;
  uint64_t cache_bytes_ = 0;
  double par_ = 0;
  double arrival_rate_ = 0, batch_timeout_s_ = 0;
  int64_t batch_fill_ = 0;
  std::deque<std::pair<Clock::time_point, int64_t>> recent_tokens_;  // committed per step, last 10 s
  Histogram step_seconds_, step_requests_, queue_seconds_, first_token_seconds_, request_seconds_, request_nfe_;
};

}  // namespace mosaic::serve
