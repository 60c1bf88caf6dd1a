#include "core/dtype.h"

#include <gtest/gtest.h>

namespace mosaic {
namespace {

TEST(DType, SafetensorsNamesRoundTrip) {
  for (auto name : {"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64", "U8", "U16", "U32",
                    "U64", "BOOL", "F8_E4M3", "F8_E5M2"}) {
    const auto dtype = dtype_from_safetensors(name);
    ASSERT_TRUE(dtype.has_value()) << name;
    EXPECT_EQ(dtype_name(*dtype), name);
  }
  EXPECT_FALSE(dtype_from_safetensors("bf16").has_value());  // case matters in the format
  EXPECT_FALSE(dtype_from_safetensors("F4").has_value());
}

TEST(DType, Sizes) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(dtype_size(DType::boolean), 1u);
}

TEST(DType, UserSpellings) {
  EXPECT_EQ(dtype_from_user("bfloat16"), DType::bf16);
  EXPECT_EQ(dtype_from_user("fp32"), DType::f32);
  EXPECT_EQ(dtype_from_user("float16"), DType::f16);
  EXPECT_FALSE(dtype_from_user("int4").has_value());
}

}  // namespace
}  // namespace mosaic
