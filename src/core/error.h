// Two tiers of failure (see docs/design/errors.md):
//  - mosaic::Error: something a user gave us is wrong (a file, a field, a flag). It carries one
//    line that names the culprit and what was expected; entry points print it and exit non-zero.
//  - MOSAIC_ASSERT: an invariant of our own code broke. It prints file:line and aborts.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "mosaic/error.h"

namespace mosaic {

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

[[noreturn]] inline void assert_failed(const char* file, int line, const char* condition,
                                       const std::string& message) {
  std::fprintf(stderr, "mosaic: internal error at %s:%d: %s %s\n", file, line, condition,
               message.c_str());
  std::abort();
}

}  // namespace mosaic

// Invariant check, kept in release builds: the cost is a branch, the benefit is a clear abort
// instead of silently wrong memory.
#define MOSAIC_ASSERT(cond, ...)                                                          \
  do {                                                                                    \
    if (!(cond)) ::mosaic::assert_failed(__FILE__, __LINE__, #cond, fmt::format("" __VA_ARGS__)); \
  } while (0)
