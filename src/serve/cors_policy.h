// `mosaic serve --allowed-origins`: which web pages (origins) may call the server from a browser.
// Off by default: no CORS headers, so a browser keeps other sites' scripts from reading answers.
// With a list ("https://a.example,http://localhost:3000") or "*", a request whose Origin is
// allowed gets Access-Control-Allow-Origin (and X-Request-Id exposed to the script), and a
// preflight (OPTIONS with Access-Control-Request-Method) is answered 204 with the methods and
// headers it may use; a preflight from another origin is a 403.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mosaic::serve {

class CorsPolicy {
 public:
  CorsPolicy() = default;  // off
  // "" (off), "*", or a comma-separated list of origins scheme://host[:port]. Throws mosaic::Error
  // naming a malformed entry.
  static CorsPolicy parse(std::string_view allowed_origins);

  bool enabled() const { return any_ || !origins_.empty(); }
  // The Access-Control-Allow-Origin value for a request from `origin`; nullopt: not allowed.
  std::optional<std::string> allow_origin(std::string_view origin) const;
  // The Access-Control-Allow-Headers of a preflight: the requested headers when they are a list
  // of header names, else the ones OpenAI clients send.
  static std::string allow_headers(std::string_view requested);

 private:
  bool any_ = false;
  std::vector<std::string> origins_;
};

inline constexpr const char* kCorsAllowMethods = "GET, POST, OPTIONS";
inline constexpr const char* kCorsMaxAgeSeconds = "600";

}  // namespace mosaic::serve
