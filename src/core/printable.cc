#include "core/printable.h"

#include <fmt/format.h>

#include "core/utf8.h"

namespace mosaic {

std::string printable(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const int step = utf8_scan(p + pos, bytes.size() - pos);
    const bool control = p[pos] < 0x20 || p[pos] == 0x7f;
    if (step > 0 && !control) {
      out.append(bytes.substr(pos, static_cast<size_t>(step)));
      pos += static_cast<size_t>(step);
      continue;
    }
    const size_t bad = step > 0 ? 1 : static_cast<size_t>(-step);
    for (size_t i = 0; i < bad; ++i) fmt::format_to(std::back_inserter(out), "\\x{:02X}", p[pos + i]);
    pos += bad;
  }
  return out;
}

std::string printable_path(const std::filesystem::path& path) { return printable(std::string_view(path.native())); }

}  // namespace mosaic
