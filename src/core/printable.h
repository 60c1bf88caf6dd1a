// Bytes from outside (a folder name, a quoted piece of a broken file) made safe to put in a
// one-line message: well-formed UTF-8 stays as it is; each byte of an ill-formed sequence and
// each control character is written as \xHH. Messages then stay one valid UTF-8 line, which
// fmt, JSON output and Python's str all need (a folder named with byte 0xff made `mosaic info`
// fail inside nlohmann's dump()).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace mosaic {

std::string printable(std::string_view bytes);

// A path as printable text (its native bytes, escaped as above).
std::string printable_path(const std::filesystem::path& path);

}  // namespace mosaic
