// Parses integers given on the command line: comma-separated lists ("1,2,3", "0-4,9") and
// 64-bit unsigned values (seeds), refusing what a plain strtoull would wrap ("-1", 2**64).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace mosaic::cli {

// Throws mosaic::Error naming `flag` and the bad item. Ranges "a-b" are inclusive.
// An empty list is an error too.
std::vector<int32_t> parse_int_list(std::string_view text, std::string_view flag);

// A decimal integer in [0, 2**64); throws mosaic::Error naming `flag` otherwise.
uint64_t parse_uint64(std::string_view text, std::string_view flag);

}  // namespace mosaic::cli
