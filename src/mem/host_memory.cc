#include "mem/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>

namespace mosaic {

uint64_t host_memory_bytes(const std::filesystem::path& cgroup_limit_file) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  uint64_t bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
  std::error_code error;
  if (!std::filesystem::is_regular_file(cgroup_limit_file, error)) return bytes;
  std::ifstream file(cgroup_limit_file);
  std::string text;
  if (!(file >> text)) return bytes;  // "max": no limit
  uint64_t limit = 0;
  const auto [end, parsed] = std::from_chars(text.data(), text.data() + text.size(), limit);
  if (parsed == std::errc() && end == text.data() + text.size() && limit > 0) bytes = std::min(bytes, limit);
  return bytes;
}

}  // namespace mosaic
