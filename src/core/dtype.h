// Element types that appear in checkpoints and activations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mosaic {

enum class DType : uint8_t {
  f32, f16, bf16, f64,
  i8, i16, i32, i64,
  u8, u16, u32, u64,
  boolean, f8_e4m3, f8_e5m2,
};

// Bytes per element.
size_t dtype_size(DType dtype);
// Safetensors spelling ("F32", "BF16", ...).
std::string_view dtype_name(DType dtype);
// Parses the safetensors spelling; nullopt for anything else.
std::optional<DType> dtype_from_safetensors(std::string_view name);
// Parses a user-facing spelling: "fp32"/"float32"/"f32", "bf16"/"bfloat16", "fp16"/"float16"/"f16".
std::optional<DType> dtype_from_user(std::string_view name);
// True for the floating types a weight may be stored in (f32, f16, bf16).
bool dtype_is_weight_float(DType dtype);

}  // namespace mosaic
