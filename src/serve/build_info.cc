#include "serve/build_info.h"

#include <httplib.h>

// MOSAIC_VERSION, MOSAIC_BUILD_TYPE and MOSAIC_BUILT_WITH_CUDA come from src/serve/CMakeLists.txt.
namespace mosaic::serve {

const BuildInfo& build_info() {
#if defined(__clang__)
  static constexpr const char* kCompiler = "Clang " __clang_version__;
#elif defined(__GNUC__)
  static constexpr const char* kCompiler = "GCC " __VERSION__;
#else
  static constexpr const char* kCompiler = "unknown";
#endif
  static const BuildInfo info{MOSAIC_VERSION, MOSAIC_BUILD_TYPE, kCompiler, MOSAIC_BUILT_WITH_CUDA != 0,
                              "cpp-httplib " CPPHTTPLIB_VERSION};
  return info;
}

}  // namespace mosaic::serve
