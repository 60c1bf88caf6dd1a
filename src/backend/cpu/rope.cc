// Rotary position embedding, half-split layout (rope.h gives the formulas).
#include "backend/cpu/rope.h"

#include <cmath>

#include "core/error.h"

namespace mosaic::cpu {

std::vector<float> rope_inv_freq(int64_t head_dim, double theta) {
  MOSAIC_ASSERT(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim={} must be even", head_dim);
  // PyTorch: 1.0 / (theta ** (torch.arange(0, d, 2).float() / d)), every step in fp32.
  std::vector<float> inv_freq(head_dim / 2);
  for (int64_t j = 0; j < head_dim / 2; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(head_dim);
    inv_freq[j] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
  return inv_freq;
}

void rope_apply(int64_t tokens, int64_t heads, int64_t head_dim, float* x, int64_t x_stride,
                const int32_t* positions, const float* inv_freq, int64_t head_stride) {
  MOSAIC_ASSERT(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim={} must be even", head_dim);
  if (head_stride == 0) head_stride = head_dim;
  MOSAIC_ASSERT(head_stride >= head_dim, "rope: heads {} apart cannot hold {} rotary values", head_stride, head_dim);
  const int64_t half = head_dim / 2;
#pragma omp parallel if (tokens * heads * head_dim >= (1 << 15))
  {
    std::vector<float> cos_angle(half), sin_angle(half);  // per thread, shared by a token's heads
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      const float position = static_cast<float>(positions[t]);
      for (int64_t j = 0; j < half; ++j) {
        const float angle = position * inv_freq[j];
        cos_angle[j] = std::cos(angle);
        sin_angle[j] = std::sin(angle);
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* lo = x + t * x_stride + h * head_stride;
        float* hi = lo + half;
        for (int64_t j = 0; j < half; ++j) {
          const float x_lo = lo[j], x_hi = hi[j];
          lo[j] = x_lo * cos_angle[j] - x_hi * sin_angle[j];
          hi[j] = x_hi * cos_angle[j] + x_lo * sin_angle[j];
        }
      }
    }
  }
}

}  // namespace mosaic::cpu
