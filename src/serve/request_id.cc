#include "serve/request_id.h"

#include <fmt/format.h>

#include <random>

namespace mosaic::serve {
namespace {

bool is_id_char(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("-_.:/+=@").find(c) != std::string_view::npos;
}

uint64_t random_tag() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

}  // namespace

std::string sanitize_request_id(std::string_view client_id) {
  std::string id;
  for (const char c : client_id) {
    if (id.size() == kMaxRequestIdLength) break;
    if (is_id_char(c)) id += c;
  }
  return id;
}

IdMaker::IdMaker() : tag_(random_tag()) {}

IdMaker::IdMaker(uint64_t tag) : tag_(tag) {}

std::string IdMaker::next(std::string_view prefix) {
  return fmt::format("{}-{:016x}{:08x}", prefix, tag_, counter_.fetch_add(1) + 1);
}

}  // namespace mosaic::serve
