// Parses comma-separated integer lists given on the command line ("1,2,3", "0-4,9").
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace mosaic::cli {

// Throws mosaic::Error naming `flag` and the bad item. Ranges "a-b" are inclusive.
std::vector<int32_t> parse_int_list(std::string_view text, std::string_view flag);

}  // namespace mosaic::cli
