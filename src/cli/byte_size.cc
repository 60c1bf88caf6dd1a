#include "cli/byte_size.h"

#include <array>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.h"

namespace mosaic::cli {

uint64_t parse_byte_size(std::string_view text, std::string_view flag) {
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
  const std::string number(text.substr(0, end));
  std::string unit(text.substr(end));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static constexpr std::array<std::pair<std::string_view, double>, 13> kUnits = {{
      {"", 1.0}, {"B", 1.0},
      {"K", 0x1p10}, {"KIB", 0x1p10}, {"M", 0x1p20}, {"MIB", 0x1p20},
      {"G", 0x1p30}, {"GIB", 0x1p30}, {"T", 0x1p40}, {"TIB", 0x1p40},
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
  }};
  double scale = unit == "TB" ? 1e12 : 0.0;
  for (const auto& [name, value] : kUnits)
    if (unit == name) scale = value;
  char* parsed_end = nullptr;
  const double value = number.empty() ? 0.0 : std::strtod(number.c_str(), &parsed_end);
  if (number.empty() || parsed_end != number.c_str() + number.size() || scale == 0.0)
    fail("{}: '{}' is not a size (e.g. 24GiB, 512MiB, 80GB, or bytes)", flag, text);
  const double bytes = std::round(value * scale);
  if (!(bytes >= 1) || bytes > 0x1p63) fail("{}: '{}' is out of range", flag, text);
  return static_cast<uint64_t>(bytes);
}

}  // namespace mosaic::cli
