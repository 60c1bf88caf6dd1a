// bf16_row_major_map: what TMA cannot address is refused on the host with a message that names
// it; a valid map is encoded by the driver (needs a device). The kernel that uses the maps is
// covered by attention_test.cc (CudaAttention.*/hopper).
#include "backend/cuda/tensor_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/cuda/device.h"
#include "backend/cuda/test_device_buffer.h"

namespace mosaic::cuda {
namespace {

using testing_support::DeviceBuffer;

std::string refusal(const void* base, uint64_t row_stride) {
  try {
    (void)bf16_row_major_map(base, 128, 1024, row_stride, 64, 128);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "";
}

TEST(TensorMap, RefusesAMisalignedBase) {
  alignas(16) static char buffer[64];
  EXPECT_NE(refusal(buffer + 2, 4096).find("16-byte aligned"), std::string::npos);
}

TEST(TensorMap, RefusesAStrideThatIsNotAMultipleOfEight) {
  alignas(16) static char buffer[64];
  EXPECT_NE(refusal(buffer, 4100).find("row stride (4100 elements)"), std::string::npos);
  EXPECT_NE(refusal(buffer, uint64_t{1} << 40).find("below 2^39"), std::string::npos);
}

TEST(TensorMap, EncodesAValidMapAndCachesIt) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  DeviceBuffer buffer(1 << 20);
  const CUtensorMap first = bf16_row_major_map(buffer.data, 4096, uint64_t{1} << 31, 12288, 64, 128);
  const CUtensorMap again = bf16_row_major_map(buffer.data, 4096, uint64_t{1} << 31, 12288, 64, 128);
  const CUtensorMap other = bf16_row_major_map(buffer.data, 4096, uint64_t{1} << 31, 4096, 64, 128);
  EXPECT_EQ(std::memcmp(&first, &again, sizeof first), 0);
  EXPECT_NE(std::memcmp(&first, &other, sizeof first), 0);  // the stride is in the map
}

}  // namespace
}  // namespace mosaic::cuda
