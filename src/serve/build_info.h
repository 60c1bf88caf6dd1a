// What `GET /version` reports about this binary: Mosaic's version and how it was built.
#pragma once

namespace mosaic::serve {

struct BuildInfo {
  const char* version;       // the CMake project version
  const char* build_type;    // CMAKE_BUILD_TYPE
  const char* compiler;      // e.g. "GCC 12.2.0"
  bool cuda;                 // built with the CUDA backend
  const char* http_library;  // "cpp-httplib 0.11.4"
};

const BuildInfo& build_info();

}  // namespace mosaic::serve
