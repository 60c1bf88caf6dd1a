// Prometheus' text exposition format (version 0.0.4), written by hand: a metric family is a
// "# HELP" and a "# TYPE" line followed by samples `name{label="value"} number`. Mosaic's few
// counters, gauges and histograms do not need a client library: Debian's prometheus-cpp would add
// shared libraries to a binary that is carried to GPU machines, and its registry would be a
// second home for figures the scheduler already keeps under its own lock.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mosaic::serve {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Cumulative buckets with upper bounds, their sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  const std::vector<uint64_t>& bucket_counts() const { return counts_; }  // not cumulative
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // one per bound, then +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class PrometheusText {
 public:
  // type: "counter" or "gauge". Call sample() for each labelled value after it.
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, double value, const Labels& labels = {});
  // A histogram family with one series; `labels` go on every sample (before `le`).
  void histogram(std::string_view name, std::string_view help, const Histogram& histogram, const Labels& labels = {});
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

std::string escape_label_value(std::string_view value);
std::string format_sample_value(double value);

}  // namespace mosaic::serve
