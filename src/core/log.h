// Minimal leveled logging to stderr. The level comes from MOSAIC_LOG (error|warn|info|debug),
// default warn, or from set_log_level().
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace mosaic {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, std::string_view message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level <= log_level()) log_write(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace mosaic
