// Byte counts for people: "14.930 GiB", "5.70 MiB", "812 B".
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace mosaic {

inline std::string format_bytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.3f} GiB", bytes / 1073741824.0);
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.2f} MiB", bytes / 1048576.0);
  if (bytes >= (uint64_t{1} << 10)) return fmt::format("{:.2f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace mosaic
