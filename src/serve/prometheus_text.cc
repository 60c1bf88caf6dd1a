#include "serve/prometheus_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace mosaic::serve {

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{}", static_cast<int64_t>(value));
  return fmt::format("{}", value);
}

void PrometheusText::family(std::string_view name, std::string_view type, std::string_view help) {
  text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PrometheusText::sample(std::string_view name, double value, const Labels& labels) {
  text_ += name;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i)
      text_ += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, escape_label_value(labels[i].second));
    text_ += '}';
  }
  text_ += ' ';
  text_ += format_sample_value(value);
  text_ += '\n';
}

void PrometheusText::histogram(std::string_view name, std::string_view help, const Histogram& histogram,
                               const Labels& labels) {
  family(name, "histogram", help);
  uint64_t cumulative = 0;
  const std::string bucket = fmt::format("{}_bucket", name);
  auto with_le = [&](std::string le) {
    Labels all = labels;
    all.emplace_back("le", std::move(le));
    return all;
  };
  for (size_t i = 0; i < histogram.upper_bounds().size(); ++i) {
    cumulative += histogram.bucket_counts()[i];
    sample(bucket, static_cast<double>(cumulative), with_le(format_sample_value(histogram.upper_bounds()[i])));
  }
  sample(bucket, static_cast<double>(histogram.count()), with_le("+Inf"));
  sample(fmt::format("{}_sum", name), histogram.sum(), labels);
  sample(fmt::format("{}_count", name), static_cast<double>(histogram.count()), labels);
}

}  // namespace mosaic::serve
