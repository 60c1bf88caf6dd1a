// JSON text for output that never throws on strings that are not UTF-8 (a folder named with byte
// 0xff, generated text cut in the middle of a character): such bytes become U+FFFD, as the
// server's responses do. nlohmann's default dump() throws type_error 316 instead.
#pragma once

#include <string>

namespace mosaic {

template <typename Json>
std::string dump_json(const Json& json, int indent = -1) {
  return json.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace mosaic
