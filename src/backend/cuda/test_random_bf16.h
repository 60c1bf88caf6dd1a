// Random bf16 inputs for the CUDA kernel tests: `count` values uniform in [-scale, scale) from
// std::mt19937(seed), rounded to bf16 (raw bits). Test-only (included by the *_test.cc of this
// module).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/half.h"

namespace mosaic::cuda::testing_support {

inline std::vector<uint16_t> random_bf16(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<uint16_t> values(count);
  for (uint16_t& v : values) v = f32_to_bf16(dist(rng));
  return values;
}

}  // namespace mosaic::cuda::testing_support
