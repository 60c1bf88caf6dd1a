#include "core/dtype.h"

#include <array>
#include <utility>

namespace mosaic {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 15> kInfo = {{
    {DType::f32, "F32", 4},       {DType::f16, "F16", 2},     {DType::bf16, "BF16", 2},
    {DType::f64, "F64", 8},       {DType::i8, "I8", 1},       {DType::i16, "I16", 2},
    {DType::i32, "I32", 4},       {DType::i64, "I64", 8},     {DType::u8, "U8", 1},
    {DType::u16, "U16", 2},       {DType::u32, "U32", 4},     {DType::u64, "U64", 8},
    {DType::boolean, "BOOL", 1},  {DType::f8_e4m3, "F8_E4M3", 1}, {DType::f8_e5m2, "F8_E5M2", 1},
}};

const DTypeInfo& info(DType dtype) { return kInfo[static_cast<size_t>(dtype)]; }

}  // namespace

size_t dtype_size(DType dtype) { return info(dtype).size; }

std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const DTypeInfo& entry : kInfo)
    if (entry.name == name) return entry.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_user(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, DType>, 9> kSpellings = {{
      {"fp32", DType::f32}, {"float32", DType::f32}, {"f32", DType::f32},
      {"bf16", DType::bf16}, {"bfloat16", DType::bf16}, {"fp16", DType::f16},
      {"float16", DType::f16}, {"f16", DType::f16}, {"half", DType::f16},
  }};
  for (const auto& [spelling, dtype] : kSpellings)
    if (spelling == name) return dtype;
  return std::nullopt;
}

bool dtype_is_weight_float(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
}

}  // namespace mosaic
