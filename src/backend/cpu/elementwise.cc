// Element-wise kernels: each output element depends on its own inputs only, so any split over
// threads gives the same bits.
#include "backend/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/widen.h"
#include "core/error.h"

namespace mosaic::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kMinParallelElements = 1 << 15;

void widen_row(const void* src, DType dtype, int64_t count, float* out) {
  switch (dtype) {
    case DType::f32: return widen_to_f32<DType::f32>(src, count, out);
    case DType::bf16: return widen_to_f32<DType::bf16>(src, count, out);
    case DType::f16: return widen_to_f32<DType::f16>(src, count, out);
    default: MOSAIC_ASSERT(false, "expected f32, bf16 or f16, got {}", dtype_name(dtype));
  }
}

}  // namespace

void embedding_gather(int64_t tokens, int64_t dim, const int32_t* ids, const void* table,
                      DType table_dtype, float* out, int64_t out_stride) {
  embedding_gather_share(tokens, dim, ids, table, table_dtype, 0, std::numeric_limits<int64_t>::max(), out,
                         out_stride);
}

void embedding_gather_share(int64_t tokens, int64_t dim, const int32_t* ids, const void* table, DType table_dtype,
                            int64_t first_id, int64_t rows, float* out, int64_t out_stride) {
  const int64_t row_bytes = dim * static_cast<int64_t>(dtype_size(table_dtype));
#pragma omp parallel for schedule(static) if (tokens * dim >= kMinParallelElements)
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t row = ids[t] - first_id;
    float* to = out + t * out_stride;
    if (row < 0 || row >= rows) {
      std::fill(to, to + dim, 0.0f);
      continue;
    }
    widen_row(static_cast<const char*>(table) + row * row_bytes, table_dtype, dim, to);
  }
}

void swiglu(int64_t rows, int64_t dim, float* gate, int64_t gate_stride, const float* up,
            int64_t up_stride) {
#pragma omp parallel for schedule(static) if (rows * dim >= kMinParallelElements)
  for (int64_t t = 0; t < rows; ++t) {
    float* g = gate + t * gate_stride;
    const float* u = up + t * up_stride;
    for (int64_t f = 0; f < dim; ++f) {
      const float silu = g[f] / (1.0f + std::exp(-g[f]));  // -> -0 for large negative g
      g[f] = silu * u[f];
    }
  }
}

void add_inplace(int64_t rows, int64_t dim, float* x, int64_t x_stride, const float* y,
                 int64_t y_stride) {
#pragma omp parallel for schedule(static) if (rows * dim >= kMinParallelElements)
  for (int64_t t = 0; t < rows; ++t) {
    float* xr = x + t * x_stride;
    const float* yr = y + t * y_stride;
    for (int64_t i = 0; i < dim; ++i) xr[i] += yr[i];
  }
}

void convert_to_f32(int64_t count, const void* src, DType dtype, float* out) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t elem_size = static_cast<int64_t>(dtype_size(dtype));
  const int64_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk;
    widen_row(static_cast<const char*>(src) + begin * elem_size, dtype,
              std::min(kChunk, count - begin), out + begin);
  }
}

}  // namespace mosaic::cpu
