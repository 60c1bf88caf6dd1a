#include "mem/host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace mosaic {
namespace {

uint64_t physical() {
  return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
}

std::filesystem::path write_limit(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("mosaic_memory_max_" + std::to_string(getpid()));
  std::ofstream(path) << text;
  return path;
}

TEST(HostMemory, PhysicalMemoryWithoutALimit) {
  EXPECT_EQ(host_memory_bytes("/nonexistent/memory.max"), physical());
  const auto unlimited = write_limit("max\n");
  EXPECT_EQ(host_memory_bytes(unlimited), physical());
  std::filesystem::remove(unlimited);
}

TEST(HostMemory, ACgroupLimitBelowTheRamWins) {
  const auto limited = write_limit("1073741824\n");
  EXPECT_EQ(host_memory_bytes(limited), std::min<uint64_t>(physical(), 1073741824));
  std::filesystem::remove(limited);
  const auto garbage = write_limit("12abc\n");
  EXPECT_EQ(host_memory_bytes(garbage), physical());
  std::filesystem::remove(garbage);
}

}  // namespace
}  // namespace mosaic
