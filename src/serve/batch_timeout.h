// Fixed-fill batching's start rule (`--batching fixed --batch-timeout auto`), derived in
// docs/design/batch-timeout.md. With Poisson arrivals at rate λ and S0 the part of a batch's
// service time that its requests share (the time one request alone would cost, minus what each
// extra request adds), a batch starts once it holds k* = min(N, max(1, ⌈λ·S0⌉)) requests — the
// number that arrive while one batch is served, i.e. as full as the load can make it — or once
// it has waited T = (k* − 1) / λ, the expected time for them to arrive; with N it starts at once.
// Light load (λ·S0 ≤ 1) or no gain from batching (S0 ≈ 0, a compute-bound CPU) gives T = 0:
// nothing waits for company that will not come or would not help. Heavy load gives
// T = (N − 1)/λ < S0: never longer than one batch takes. Until λ and S0 are measured, T = 0.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

namespace mosaic::serve {

struct BatchStartRule {
  int64_t fill = 1;         // k*: start as soon as this many wait
  double timeout_s = 0;     // T: or once the oldest has waited this long

  bool should_start(int64_t waiting, double waited_s) const { return waiting >= fill || waited_s >= timeout_s; }
};

// k* and T from the arrival rate (requests/s), the shared service time S0 (s) and the batch cap
// N. Unknown (<= 0) rate or service time: start at once.
BatchStartRule auto_batch_start(double arrival_rate, double shared_service_s, int64_t max_batch);

// A fixed timeout (`--batch-timeout MS`): wait for a full batch, at most `timeout_s`.
BatchStartRule fixed_batch_start(double timeout_s, int64_t max_batch);

// The measured inputs: the arrival rate over the last `window` arrivals (it decays while none
// come); an exponentially weighted mean S of batch service times; and the shared part of it,
// S0 = S · t0 / mean step time, from a least-squares line step time = t0 + t1 · batch size over
// the last 256 steps (S0 = S while the batch size has not varied: nothing to tell them apart).
class LoadEstimator {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LoadEstimator(size_t window = 32, double smoothing = 0.3);

  void arrival(Clock::time_point when);
  void batch_served(double seconds);
  void step(int64_t batch_size, double seconds);
  // Requests per second; 0 until two arrivals are seen.
  double arrival_rate(Clock::time_point now) const;
  double service_seconds() const { return service_s_.value_or(0.0); }
  double shared_service_seconds() const;

 private:
  size_t window_;
  double smoothing_;
  std::deque<Clock::time_point> arrivals_;
  std::optional<double> service_s_;
  std::deque<std::pair<double, double>> steps_;  // (batch size, seconds)
};

}  // namespace mosaic::serve
