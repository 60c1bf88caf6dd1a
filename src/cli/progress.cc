#include "cli/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace mosaic::cli {

Progress::Progress(bool enabled, bool terminal)
    : enabled_(enabled), terminal_(terminal), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void Progress::update(int64_t step, int64_t total, int64_t tokens) {
  const int64_t shown_total = std::max(total, step);
  const double fraction = shown_total > 0 ? double(step) / double(shown_total) : 1.0;
  draw(step, fraction, step >= shown_total, [&](double rate) {
    return fmt::format("step {}/{}  {:.1f} steps/s  {} tokens", step, shown_total, rate, tokens);
  });
}

void Progress::update_by_tokens(int64_t step, int64_t tokens, int64_t total_tokens) {
  const double fraction = total_tokens > 0 ? std::min(1.0, double(tokens) / double(total_tokens)) : 1.0;
  draw(step, fraction, tokens >= total_tokens, [&](double rate) {
    return fmt::format("{}/{} tokens  step {}  {:.1f} steps/s", tokens, total_tokens, step, rate);
  });
}

void Progress::draw(int64_t step, double fraction, bool done, const std::function<std::string(double)>& text) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0 ? step / seconds : 0.0;
  if (terminal_) {
    if (now - last_draw_ < std::chrono::milliseconds(100) && !done) return;
    last_draw_ = now;
    const int width = 30, filled = static_cast<int>(fraction * width);
    fmt::print(stderr, "\r[{}{}] {}", std::string(filled, '#'), std::string(width - filled, '.'), text(rate));
    drawn_ = true;
    return;
  }
  const int64_t decile = static_cast<int64_t>(fraction * 10);
  if (decile == last_decile_) return;
  last_decile_ = decile;
  fmt::print(stderr, "{}\n", text(rate));
}

void Progress::finish() {
  if (enabled_ && terminal_ && drawn_) fmt::print(stderr, "\n");
}

}  // namespace mosaic::cli
