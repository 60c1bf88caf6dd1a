// A one-line progress display on stderr for long runs: steps done, steps per second, tokens
// committed. Redrawn in place on a terminal; a line every ten percent otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace mosaic::cli {

class Progress {
 public:
  Progress(bool enabled, bool terminal);
  void update(int64_t step, int64_t total, int64_t tokens);
  // For decoders whose step count is not known ahead (D2F): progress is tokens of total_tokens.
  void update_by_tokens(int64_t step, int64_t tokens, int64_t total_tokens);
  void finish();

 private:
  // Redraws the bar at `fraction` (a terminal: at most every 100 ms, and when `done`), or prints a
  // line per tenth; `text(steps per second)` is the words after the bar.
  void draw(int64_t step, double fraction, bool done, const std::function<std::string(double)>& text);
  bool enabled_, terminal_, drawn_ = false;
  int64_t last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace mosaic::cli
