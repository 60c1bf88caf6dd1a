#include "serve/stop_strings.h"

#include <algorithm>

namespace mosaic::serve {

std::optional<size_t> find_stop(std::string_view text, std::span<const std::string> stops) {
  std::optional<size_t> first;
  for (const std::string& stop : stops) {
    const size_t at = text.find(stop);
    if (at != std::string_view::npos && (!first || at < *first)) first = at;
  }
  return first;
}

size_t held_back(std::string_view text, std::span<const std::string> stops) {
  size_t longest = 0;
  for (const std::string& stop : stops)
    for (size_t length = stop.empty() ? 0 : std::min(stop.size() - 1, text.size()); length > longest; --length)
      if (text.ends_with(std::string_view(stop).substr(0, length))) {
        longest = length;
        break;
      }
  return longest;
}

StopWatcher::StopWatcher(std::vector<std::string> stops, CommittedTextStream prefix)
    : stops_(std::move(stops)), prefix_(std::move(prefix)) {}

bool StopWatcher::stopped(std::span<const int32_t> output_ids) {
  if (prefix_.update(output_ids).empty()) return false;  // the committed prefix did not grow
  return find_stop(prefix_.sent(), stops_).has_value();
}

}  // namespace mosaic::serve
