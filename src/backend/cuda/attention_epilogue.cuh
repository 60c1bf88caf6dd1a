// The end of a flash-attention row block, shared by both attention kernels: the normaliser 1 / l
// of a row held by a quad, and the copy of a warp's 16 finished rows, staged in shared memory,
// out to global memory. Include only from .cu files.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/ptx.cuh"

namespace mosaic::cuda {

// 1 / l, or 0 for a row without keys, so that its output is zeros, not NaN.
__device__ __forceinline__ float row_inverse(float total) { return total > 0.0f ? __frcp_rn(total) : 0.0f; }

// l for the row whose four shares of l the lanes of a quad hold, added in a fixed butterfly
// (every lane of the quad gets the same bits).
__device__ __forceinline__ float quad_total(float share) {
  share = __fadd_rn(share, __shfl_xor_sync(0xffffffffu, share, 1));
  return __fadd_rn(share, __shfl_xor_sync(0xffffffffu, share, 2));
}

// 1 / l for that row.
__device__ __forceinline__ float quad_row_inverse(float share) { return row_inverse(quad_total(share)); }

// A warp's rows row0 .. row0 + 15 of a bf16 tile staged in shared memory (16-byte chunk `chunk`
// of row r at tile + offset(r, chunk)) to out (row r at out + r * out_stride), 16 bytes per lane;
// rows at or past q_valid are left out.
template <int kHeadDim, typename Offset>
__device__ __forceinline__ void store_staged_rows(uint32_t tile, Offset offset, int row0, int q_valid,
                                                  __nv_bfloat16* out, int64_t out_stride) {
  constexpr int kChunks = kHeadDim / 8;
  for (int i = threadIdx.x % 32; i < 16 * kChunks; i += 32) {
    const int row = row0 + i / kChunks, chunk = i % kChunks;
    if (row >= q_valid) break;  // i grows with row
    const uint4 value = ptx::ld_shared_16(tile + offset(row, chunk));
    *reinterpret_cast<uint4*>(out + row * out_stride + chunk * 8) = value;
  }
}

}  // namespace mosaic::cuda
