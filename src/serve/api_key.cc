#include "serve/api_key.h"

#include <cstddef>

namespace mosaic::serve {

bool constant_time_equals(std::string_view given, std::string_view expected) {
  // volatile: the compiler may not turn the loop into an early-exit comparison.
  volatile unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference = difference | (g ^ static_cast<unsigned char>(expected[i]));
  }
  return difference == 0;
}

KeyCheck check_bearer_key(std::string_view authorization, std::string_view key) {
  while (!authorization.empty() && (authorization.front() == ' ' || authorization.front() == '\t'))
    authorization.remove_prefix(1);
  if (authorization.empty()) return KeyCheck::missing;
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size()) return KeyCheck::wrong;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != kScheme[i]) return KeyCheck::wrong;
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return constant_time_equals(token, key) ? KeyCheck::accepted : KeyCheck::wrong;
}

}  // namespace mosaic::serve
