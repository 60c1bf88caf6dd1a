#include "serve/batch_timeout.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mosaic::serve {

BatchStartRule auto_batch_start(double arrival_rate, double shared_service_s, int64_t max_batch) {
  BatchStartRule rule;
  const int64_t cap = std::max<int64_t>(max_batch, 1);
  if (!(arrival_rate > 0) || !(shared_service_s > 0) || !std::isfinite(arrival_rate * shared_service_s)) return rule;
  const double expected = std::ceil(arrival_rate * shared_service_s);
  rule.fill = expected >= static_cast<double>(cap) ? cap : std::max<int64_t>(1, static_cast<int64_t>(expected));
  rule.timeout_s = static_cast<double>(rule.fill - 1) / arrival_rate;
  return rule;
}

BatchStartRule fixed_batch_start(double timeout_s, int64_t max_batch) {
  return {std::max<int64_t>(max_batch, 1), std::max(timeout_s, 0.0)};
}

LoadEstimator::LoadEstimator(size_t window, double smoothing)
    : window_(std::max<size_t>(window, 2)), smoothing_(smoothing) {}

void LoadEstimator::arrival(Clock::time_point when) {
  arrivals_.push_back(when);
  while (arrivals_.size() > window_) arrivals_.pop_front();
}

void LoadEstimator::batch_served(double seconds) {
  if (!(seconds > 0)) return;
  service_s_ = service_s_ ? (1 - smoothing_) * *service_s_ + smoothing_ * seconds : seconds;
}

void LoadEstimator::step(int64_t batch_size, double seconds) {
  if (!(seconds > 0) || batch_size < 1) return;
  steps_.emplace_back(static_cast<double>(batch_size), seconds);
  while (steps_.size() > 256) steps_.pop_front();
}

double LoadEstimator::shared_service_seconds() const {
  const double service = service_seconds();
  if (steps_.size() < 8) return service;
  double mean_b = 0, mean_s = 0;
  for (const auto& [b, s] : steps_) mean_b += b, mean_s += s;
  mean_b /= static_cast<double>(steps_.size()), mean_s /= static_cast<double>(steps_.size());
  double covariance = 0, variance = 0;
  for (const auto& [b, s] : steps_) covariance += (b - mean_b) * (s - mean_s), variance += (b - mean_b) * (b - mean_b);
  if (variance <= 1e-9 || mean_s <= 0) return service;
  const double per_request = covariance / variance;
  const double shared = std::clamp(mean_s - per_request * mean_b, 0.0, mean_s);
  return service * shared / mean_s;
}

double LoadEstimator::arrival_rate(Clock::time_point now) const {
  if (arrivals_.size() < 2) return 0;
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const double n = static_cast<double>(arrivals_.size());
  const double window = seconds(arrivals_.back() - arrivals_.front());
  const double since_first = seconds(std::max(now, arrivals_.back()) - arrivals_.front());
  if (window <= 0) return std::numeric_limits<double>::infinity();
  // (n - 1) intervals over the window; once the silence since the last arrival is longer than
  // an interval, n over the time since the first, so the estimate falls while nothing arrives.
  return std::min((n - 1) / window, n / since_first);
}

}  // namespace mosaic::serve
