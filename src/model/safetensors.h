// The safetensors file format: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {str: str}, "<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}}
// and a data section whose offsets are relative to its first byte (file offset 8 + N).
//
// The parser trusts nothing: every length, offset and shape is checked against the file, and any
// violation is a mosaic::Error naming the file and the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace mosaic {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t bytes = 0;

  int64_t elements() const;
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;  // 8 + header length
  std::vector<SafetensorsTensor> tensors;  // in data order
  std::map<std::string, std::string> metadata;
};

// Headers larger than this are refused (the reference implementation uses the same limit).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// Parses and validates the header of a whole safetensors file held in memory.
SafetensorsHeader parse_safetensors(std::span<const std::byte> file, std::string_view source);

// One tensor to be written: its bytes are produced later, in place (see SafetensorsWriter).
struct SafetensorsTensorSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};

// Builds the header bytes (length prefix, JSON padded with spaces to 8-byte alignment) and
// assigns each tensor its absolute file offset, in the order given.
struct SafetensorsLayout {
  std::string header;                 // the first data_offset bytes of the file
  std::vector<uint64_t> offsets;      // absolute offset of each tensor
  uint64_t file_bytes = 0;
};
SafetensorsLayout layout_safetensors(std::span<const SafetensorsTensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata);

}  // namespace mosaic
