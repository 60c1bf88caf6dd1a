// Parses byte sizes given on the command line: "24GiB", "24G", "512MiB", "80GB", "1073741824".
// Binary units: K, M, G, T, KiB, MiB, GiB, TiB; decimal units: KB, MB, GB, TB; B or none = bytes.
#pragma once

#include <cstdint>
#include <string_view>

namespace mosaic::cli {

// Throws mosaic::Error naming `flag` for anything else (or zero, or overflow).
uint64_t parse_byte_size(std::string_view text, std::string_view flag);

}  // namespace mosaic::cli
