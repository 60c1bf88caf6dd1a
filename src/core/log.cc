#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace mosaic {
namespace {

LogLevel level_from_env() {
  const char* value = std::getenv("MOSAIC_LOG");
  if (value == nullptr) return LogLevel::warn;
  const std::string_view text(value);
  if (text == "error") return LogLevel::error;
  if (text == "info") return LogLevel::info;
  if (text == "debug") return LogLevel::debug;
  return LogLevel::warn;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_storage().load(std::memory_order_relaxed)); }

void set_log_level(LogLevel level) { level_storage().store(static_cast<int>(level)); }

void log_write(LogLevel level, std::string_view message) {
  static constexpr const char* kNames[] = {"error", "warn", "info", "debug"};
  const std::string line = fmt::format("mosaic [{}] {}\n", kNames[static_cast<int>(level)], message);
  std::fputs(line.c_str(), stderr);
}

}  // namespace mosaic
