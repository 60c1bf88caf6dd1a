#include "cli/list_parse.h"

#include <charconv>

#include "core/error.h"

namespace mosaic::cli {
namespace {

int32_t parse_int(std::string_view item, std::string_view flag) {
  int32_t value = 0;
  const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
  if (error != std::errc() || end != item.data() + item.size())
    fail("{}: '{}' is not an integer", flag, item);
  return value;
}

}  // namespace

std::vector<int32_t> parse_int_list(std::string_view text, std::string_view flag) {
  if (text.find_first_not_of(' ') == std::string_view::npos) fail("{}: the list is empty", flag);
  std::vector<int32_t> values;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) fail("{}: empty item in the list", flag);
    const size_t dash = item.find('-', 1);  // a leading '-' is a sign
    if (dash == std::string_view::npos) {
      values.push_back(parse_int(item, flag));
      continue;
    }
    const int32_t first = parse_int(item.substr(0, dash), flag);
    const int32_t last = parse_int(item.substr(dash + 1), flag);
    if (last < first) fail("{}: range '{}' runs backwards", flag, item);
    if (int64_t(last) - first >= (int64_t{1} << 24)) fail("{}: range '{}' is too long", flag, item);
    for (int64_t v = first; v <= last; ++v) values.push_back(static_cast<int32_t>(v));
  }
  return values;
}

uint64_t parse_uint64(std::string_view text, std::string_view flag) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    fail("{}: '{}' is not an integer in [0, 2^64)", flag, text);
  return value;
}

}  // namespace mosaic::cli
