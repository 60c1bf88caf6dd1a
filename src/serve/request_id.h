// Ids the server hands out: X-Request-Id (the client's, sanitised, or one made here) and the
// response ids "cmpl-…", "chatcmpl-…", "gen-…". Every id made here is a random 64-bit tag drawn
// once per process start followed by a counter, so ids stay unique across restarts (a counter
// alone restarted at 1 on every start) and are still cheap and ordered within one process.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace mosaic::serve {

inline constexpr size_t kMaxRequestIdLength = 128;

// A client's X-Request-Id made safe to echo in a header and a log line: only [A-Za-z0-9] and
// -_.:/+=@ are kept, at most kMaxRequestIdLength of them. Empty when nothing is left.
std::string sanitize_request_id(std::string_view client_id);

class IdMaker {
 public:
  IdMaker();                       // the tag from std::random_device
  explicit IdMaker(uint64_t tag);  // a fixed tag (tests)

  // "<prefix>-<16 hex digits of tag><counter, at least 8 hex digits>"
  std::string next(std::string_view prefix);

 private:
  uint64_t tag_;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace mosaic::serve
