#include "model/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/json_parse.h"

namespace mosaic {
namespace {

using nlohmann::json;

uint64_t read_le64(const std::byte* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<uint64_t>(p[i]);
  return value;
}

// Duplicate names are refused: the format gives no rule for them, and silently picking one would
// be a silent wrong answer.
json parse_header_json(std::string_view text, std::string_view source) {
  json root = parse_json(text, source, {.what = "safetensors header", .refuse_duplicate_keys = true});
  if (!root.is_object()) fail("{}: safetensors header is not a JSON object", source);
  return root;
}

// Tensors (sorted by data offsets) must tile the data section exactly: no two sharing bytes (a
// writer bug or a crafted file would otherwise alias weights), no gap, no trailing bytes. The
// reference loader refuses the last two as well, so whatever Mosaic loads, the Hub's tools load.
void check_data_coverage(const std::vector<SafetensorsTensor>& sorted, uint64_t data_offset,
                         uint64_t data_bytes, std::string_view source) {
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& tensor : sorted) {
    if (tensor.bytes == 0) continue;
    if (previous != nullptr && tensor.offset < previous->offset + previous->bytes)
      fail("{}: tensors '{}' and '{}' overlap in the data section", source, previous->name,
           tensor.name);
    previous = &tensor;
  }
  uint64_t covered = 0;  // relative to the data section
  previous = nullptr;
  for (const SafetensorsTensor& tensor : sorted) {
    const uint64_t begin = tensor.offset - data_offset;
    if (begin != covered) {
      if (previous == nullptr)
        fail("{}: the first tensor '{}' begins at byte {} of the data section, not at 0 (tensors must "
             "cover the data section without gaps)", source, tensor.name, begin);
      fail("{}: tensor '{}' begins at byte {} of the data section but '{}' ends at byte {} (tensors must "
           "cover the data section without gaps)", source, tensor.name, begin, previous->name, covered);
    }
    covered = begin + tensor.bytes;
    previous = &tensor;
  }
  if (covered != data_bytes)
    fail("{}: {} bytes after the last tensor's data: the data section is {} bytes but its tensors end at "
         "byte {} (a damaged or appended file?)", source, data_bytes - covered, data_bytes, covered);
}

std::map<std::string, std::string> parse_metadata(const json& value, std::string_view source) {
  if (!value.is_object()) fail("{}: '__metadata__' must be an object of strings", source);
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      fail("{}: '__metadata__' entry '{}' must be a string, got {}", source, key, item.dump());
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

uint64_t non_negative_integer(const json& value, std::string_view source, const std::string& name,
                              const char* field) {
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
    fail("{}: tensor '{}': '{}' must hold non-negative integers, got {}", source, name, field,
         value.dump());
  return value.get<uint64_t>();
}

SafetensorsTensor parse_entry(const std::string& name, const json& entry, uint64_t data_offset,
                              uint64_t data_bytes, std::string_view source) {
  if (!entry.is_object()) fail("{}: tensor '{}': entry must be an object", source, name);
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(field)) fail("{}: tensor '{}': missing '{}'", source, name, field);

  SafetensorsTensor tensor;
  tensor.name = name;
  const json& dtype = entry.at("dtype");
  if (!dtype.is_string()) fail("{}: tensor '{}': 'dtype' must be a string", source, name);
  const auto parsed_dtype = dtype_from_safetensors(dtype.get<std::string>());
  if (!parsed_dtype)
    fail("{}: tensor '{}': unknown dtype '{}'", source, name, dtype.get<std::string>());
  tensor.dtype = *parsed_dtype;

  const json& shape = entry.at("shape");
  if (!shape.is_array()) fail("{}: tensor '{}': 'shape' must be a list", source, name);
  if (shape.size() > 8) fail("{}: tensor '{}': {} dimensions is too many", source, name, shape.size());
  uint64_t elements = 1;
  bool overflow = false;
  for (const json& dim : shape) {
    const uint64_t extent = non_negative_integer(dim, source, name, "shape");
    if (extent > uint64_t(std::numeric_limits<int64_t>::max())) overflow = true;
    if (extent != 0 && elements > std::numeric_limits<uint64_t>::max() / extent) overflow = true;
    elements *= extent;
    tensor.shape.push_back(static_cast<int64_t>(extent));
  }
  const uint64_t element_bytes = dtype_size(tensor.dtype);
  if (overflow || elements > std::numeric_limits<uint64_t>::max() / element_bytes)
    fail("{}: tensor '{}': shape {} is too large", source, name, shape.dump());

  const json& offsets = entry.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2)
    fail("{}: tensor '{}': 'data_offsets' must be [begin, end]", source, name);
  const uint64_t begin = non_negative_integer(offsets.at(0), source, name, "data_offsets");
  const uint64_t end = non_negative_integer(offsets.at(1), source, name, "data_offsets");
  if (end < begin) fail("{}: tensor '{}': data_offsets [{}, {}] end before begin", source, name, begin, end);
  if (end > data_bytes)
    fail("{}: tensor '{}': data [{}, {}) lies outside the file's data section of {} bytes "
         "(truncated file?)",
         source, name, begin, end, data_bytes);
  if (end - begin != elements * element_bytes)
    fail("{}: tensor '{}': data_offsets span {} bytes but shape {} of {} needs {}", source, name,
         end - begin, shape.dump(), dtype_name(tensor.dtype), elements * element_bytes);
  tensor.offset = data_offset + begin;
  tensor.bytes = end - begin;
  return tensor;
}

}  // namespace

int64_t SafetensorsTensor::elements() const {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

SafetensorsHeader parse_safetensors(std::span<const std::byte> file, std::string_view source) {
  if (file.size() < 8)
    fail("{}: file is {} bytes, too short for the 8-byte safetensors header length", source,
         file.size());
  const uint64_t header_bytes = read_le64(file.data());
  if (header_bytes > file.size() - 8)
    fail("{}: header length {} extends beyond the end of the file ({} bytes)", source,
         header_bytes, file.size());
  if (header_bytes > kSafetensorsMaxHeaderBytes)
    fail("{}: header length {} exceeds the {}-byte limit", source, header_bytes,
         kSafetensorsMaxHeaderBytes);

  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), header_bytes);
  const json root = parse_header_json(text, source);

  SafetensorsHeader header;
  header.data_offset = 8 + header_bytes;
  const uint64_t data_bytes = file.size() - header.data_offset;
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      header.metadata = parse_metadata(entry, source);
      continue;
    }
    header.tensors.push_back(parse_entry(name, entry, header.data_offset, data_bytes, source));
  }

  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return a.offset != b.offset ? a.offset < b.offset : a.bytes < b.bytes;
            });
  check_data_coverage(header.tensors, header.data_offset, data_bytes, source);
  return header;
}

SafetensorsLayout layout_safetensors(std::span<const SafetensorsTensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json root;
  if (!metadata.empty()) root["__metadata__"] = metadata;
  std::vector<uint64_t> relative;
  uint64_t cursor = 0;
  for (const SafetensorsTensorSpec& tensor : tensors) {
    uint64_t bytes = dtype_size(tensor.dtype);
    for (int64_t extent : tensor.shape) bytes *= static_cast<uint64_t>(extent);
    root[tensor.name] = {{"dtype", dtype_name(tensor.dtype)},
                         {"shape", tensor.shape},
                         {"data_offsets", {cursor, cursor + bytes}}};
    relative.push_back(cursor);
    cursor += bytes;
  }
  std::string text = root.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // 8-byte length + padded JSON: data is 8-byte aligned

  SafetensorsLayout layout;
  layout.header.resize(8);
  const uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) layout.header[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  layout.header += text;
  for (uint64_t offset : relative) layout.offsets.push_back(layout.header.size() + offset);
  layout.file_bytes = layout.header.size() + cursor;
  return layout;
}

}  // namespace mosaic
