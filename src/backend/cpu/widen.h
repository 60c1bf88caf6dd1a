// Exact widening of f32 / bf16 / f16 arrays to fp32, shared by the GEMM packer and the
// element-wise kernels. Internal to backend/cpu (the public entry point is convert_to_f32).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/half.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace mosaic::cpu {

// out[i] = float(src[i]) for i < count.
template <DType kDtype>
inline void widen_to_f32(const void* src, int64_t count, float* out) {
  if constexpr (kDtype == DType::f32) {
    if (count > 0) std::memcpy(out, src, count * sizeof(float));  // src may be null when empty
  } else if constexpr (kDtype == DType::bf16) {
    const uint16_t* bits = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_f32(bits[i]);
  } else {
    static_assert(kDtype == DType::f16, "widen_to_f32: f32, bf16 or f16");
    const uint16_t* bits = static_cast<const uint16_t*>(src);
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= count; i += 8) {
      const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i));
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
    }
#endif
    for (; i < count; ++i) out[i] = f16_to_f32(bits[i]);
  }
}

}  // namespace mosaic::cpu
