// RMSNorm over the last dimension, fp32: out = x * (1 / sqrt(mean(x^2) + eps)) * weight.
#pragma once

#include <cstdint>

namespace mosaic::cpu {

// x and out are [rows, dim] with the given row strides; out may alias x. weight is fp32 [dim].
void rms_norm(int64_t rows, int64_t dim, const float* x, int64_t x_stride, const float* weight,
              float eps, float* out, int64_t out_stride);

}  // namespace mosaic::cpu
