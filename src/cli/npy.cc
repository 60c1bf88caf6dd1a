#include "cli/npy.h"

#include <fmt/format.h>

#include <fstream>

#include "core/error.h"

namespace mosaic::cli {

void write_npy_f32(const std::filesystem::path& path, std::span<const float> values,
                   const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t extent : shape) dims += fmt::format("{}, ", extent);
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3,) keeps its comma, (3, 4) does not
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
  // magic(6) + version(2) + length(2) + header + '\n' must be a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("{}: cannot create file", path.string());
  const uint16_t length = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  const char length_le[2] = {static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
  out.write(length_le, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size_bytes()));
  if (!out) fail("{}: write failed", path.string());
}

}  // namespace mosaic::cli
