// RMSNorm, fp32 in and out. The sum of squares is accumulated in double: a float squared is exact
// in double (24 + 24 significant bits < 53), so each term is rounded once, in its add. Four
// interleaved partial sums combined by a fixed tree keep the loop off the add-latency chain and
// the order fixed, so a row's result never depends on how rows are split over threads.
#include "backend/cpu/norm.h"

#include <cmath>

#include "core/error.h"

namespace mosaic::cpu {
namespace {

double sum_of_squares(const float* x, int64_t dim) {
  double partial[4] = {};
  int64_t i = 0;
  for (; i + 4 <= dim; i += 4) {
    for (int l = 0; l < 4; ++l) partial[l] += double(x[i + l]) * double(x[i + l]);
  }
  double total = (partial[0] + partial[2]) + (partial[1] + partial[3]);
  for (; i < dim; ++i) total += double(x[i]) * double(x[i]);
  return total;
}

}  // namespace

void rms_norm(int64_t rows, int64_t dim, const float* x, int64_t x_stride, const float* weight,
              float eps, float* out, int64_t out_stride) {
  MOSAIC_ASSERT(dim > 0, "rms_norm: dim={}", dim);
#pragma omp parallel for schedule(static) if (rows * dim >= (1 << 15))
  for (int64_t t = 0; t < rows; ++t) {
    const float* xr = x + t * x_stride;
    float* outr = out + t * out_stride;
    const double mean_square = sum_of_squares(xr, dim) / double(dim);
    // One rounding to float, then the same two float products as the reference:
    // (x * rsqrt(mean + eps)) * weight.
    const float inv_rms = static_cast<float>(1.0 / std::sqrt(mean_square + double(eps)));
    for (int64_t i = 0; i < dim; ++i) outr[i] = (xr[i] * inv_rms) * weight[i];
  }
}

}  // namespace mosaic::cpu
