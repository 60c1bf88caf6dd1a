#include "serve/cors_policy.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace mosaic::serve {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// scheme "://" host [":" port], as a browser writes an Origin header.
bool is_origin(std::string_view text) {
  const size_t separator = text.find("://");
  if (separator == std::string_view::npos || separator == 0) return false;
  const std::string_view scheme = text.substr(0, separator), authority = text.substr(separator + 3);
  if (!std::all_of(scheme.begin(), scheme.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.'; }))
    return false;
  if (authority.empty()) return false;
  return std::all_of(authority.begin(), authority.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == ':' || c == '[' || c == ']';
  });
}

bool is_header_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

}  // namespace

CorsPolicy CorsPolicy::parse(std::string_view allowed_origins) {
  CorsPolicy policy;
  if (trim(allowed_origins).empty()) return policy;
  for (size_t start = 0; start <= allowed_origins.size();) {
    size_t comma = allowed_origins.find(',', start);
    if (comma == std::string_view::npos) comma = allowed_origins.size();
    const std::string_view entry = trim(allowed_origins.substr(start, comma - start));
    start = comma + 1;
    if (entry == "*") {
      policy.any_ = true;
    } else if (is_origin(entry)) {
      policy.origins_.push_back(lowercase(entry));
    } else {
      fail("--allowed-origins: '{}' is not an origin such as https://example.com or http://localhost:3000 "
           "(scheme://host[:port], no path), nor *", entry);
    }
  }
  return policy;
}

std::optional<std::string> CorsPolicy::allow_origin(std::string_view origin) const {
  if (origin.empty() || !enabled()) return std::nullopt;
  if (any_) return std::string("*");
  const std::string wanted = lowercase(origin);
  if (std::find(origins_.begin(), origins_.end(), wanted) == origins_.end()) return std::nullopt;
  return std::string(origin);
}

std::string CorsPolicy::allow_headers(std::string_view requested) {
  constexpr const char* kDefault = "Authorization, Content-Type, X-Request-Id";
  requested = trim(requested);
  if (requested.empty() || requested.size() > 2048) return kDefault;
  for (size_t start = 0; start <= requested.size();) {
    size_t comma = requested.find(',', start);
    if (comma == std::string_view::npos) comma = requested.size();
    if (!is_header_name(trim(requested.substr(start, comma - start)))) return kDefault;
    start = comma + 1;
  }
  return std::string(requested);
}

}  // namespace mosaic::serve
