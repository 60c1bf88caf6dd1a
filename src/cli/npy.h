// Writes NumPy .npy files (format version 1.0), so tools and tests can read Mosaic's arrays.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace mosaic::cli {

// A C-order little-endian float32 array of the given shape.
void write_npy_f32(const std::filesystem::path& path, std::span<const float> values,
                   const std::vector<int64_t>& shape);

}  // namespace mosaic::cli
