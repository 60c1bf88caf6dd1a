// The portable (mma.sync, sm_80+) flash-attention arithmetic, shared by the kernel of
// attention.cu and the split-keys kernel of attention_split_keys.cu: shared-memory tiles and their
// copies, and a warp's 16 query rows taking one key tile — S = Q K^T, the online softmax, O += P V —
// in one instruction sequence, so that a row's bits depend only on its own Q row and the key tiles
// it is given, in order. Include only from .cu files.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/ptx.cuh"

namespace mosaic::cuda::portable {

using namespace ptx;

// ---- shared-memory tiles -------------------------------------------------------------------
// A tile is [rows][kHeadDim] bf16 in 16-byte chunks, kHeadDim / 8 of them a row. An ldmatrix reads
// one chunk of 8 consecutive rows, which must fall in 8 different 16-byte bank groups. Rows of a
// multiple of 8 chunks (64, 128, 256) store chunk c of row r at chunk c ^ (r & 7); other rows
// (80, 96: 10 and 12 chunks) are padded to an odd number of chunks (11, 13), so that row r's
// chunk c starts in group (r * odd + c) mod 8, different for 8 consecutive rows.
template <int kHeadDim>
struct TileLayout {
  static_assert(kHeadDim % 16 == 0, "tiles are k16 steps of the mma wide");
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr bool kSwizzled = kChunks % 8 == 0;
  static constexpr int kRowChunks = kSwizzled ? kChunks : (kChunks | 1);
  static constexpr uint32_t bytes(int rows) { return static_cast<uint32_t>(rows * kRowChunks * 16); }
  __device__ __forceinline__ static uint32_t offset(int row, int chunk) {
    if constexpr (kSwizzled) return static_cast<uint32_t>((row * kChunks + (chunk ^ (row & 7))) * 16);
    return static_cast<uint32_t>((row * kRowChunks + chunk) * 16);
  }
};
template <int kHeadDim>
__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
  return TileLayout<kHeadDim>::offset(row, chunk);
}

// Rows [0, valid) of a tile from global memory (row r at base + r * stride elements), rows
// [valid, kRows) zero-filled. kElements: element by element, columns [head_dim, kHeadDim) zeros
// too (any head_dim up to kHeadDim, any alignment); else 16 bytes at a time with cp.async.
template <int kHeadDim, int kRows, bool kElements, int kThreads>
__device__ __forceinline__ void load_tile(uint32_t tile, const __nv_bfloat16* base, int64_t stride,
                                          int valid, int head_dim) {
  if constexpr (kElements) {
    const auto* elements = reinterpret_cast<const uint16_t*>(base);
    for (int i = threadIdx.x; i < kRows * kHeadDim; i += kThreads) {
      const int row = i / kHeadDim, column = i % kHeadDim;
      const uint16_t value = row < valid && column < head_dim ? elements[row * stride + column] : 0;
      st_shared_2(tile + tile_offset<kHeadDim>(row, column / 8) + (column % 8) * 2, value);
    }
  } else {
    constexpr int kChunks = kHeadDim / 8;
    for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
      const int row = i / kChunks, chunk = i % kChunks;
      const bool inside = row < valid;
      const __nv_bfloat16* src = base + (inside ? row * stride + chunk * 8 : 0);
      cp_async_16(tile + tile_offset<kHeadDim>(row, chunk), src, inside ? 16 : 0);
    }
  }
}

// A warp's 16 query rows (row0 .. row0 + 15 of the Q tile): O, the running max and this lane's
// share of the normaliser. Tiles of kBlockN keys are taken in order with add_key_tile; the
// caller ends with O / l (quad_row_inverse of row_sum) or hands the state on.
template <int kHeadDim, int kBlockN>
struct WarpRows {
  static constexpr int kKSteps = kHeadDim / 16;  // k16 steps of Q K^T
  static constexpr int kONTiles = kHeadDim / 8;  // n8 tiles of O
  static constexpr int kSNTiles = kBlockN / 8;   // n8 tiles of S

  float o[kONTiles][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY};  // rows quad_row and quad_row + 8, raw scores
  float row_sum[2] = {0.0f, 0.0f};            // this lane's share of sum P

  // One key tile (K and V staged at k_tile, v_tile; keys at or past key_valid score -inf):
  //   1. S [16, kBlockN] = Q_w K_t^T        mma.sync m16n8k16, fp32 accumulators
  //   2. m' = max(m, rowmax S), alpha = 2^((m - m') scale log2 e),
  //      P = 2^(S scale log2 e - m' scale log2 e) rounded to bf16, l = l alpha + rowsum P
  //   3. O = O alpha + P V_t   (P re-used from the S registers as the A operand)
  __device__ __forceinline__ void add_key_tile(uint32_t q_tile, int row0, uint32_t k_tile, uint32_t v_tile,
                                               int key_valid, float scale_log2) {
    const int lane = threadIdx.x % 32;
    const int quad_col = lane % 4;
    // 1. S = Q K^T
    float s[kSNTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      uint32_t a[4];
      ldmatrix_x4(a, q_tile + tile_offset<kHeadDim>(row0 + (lane & 15), 2 * kk + (lane >> 4)));
#pragma unroll
      for (int j = 0; j < kSNTiles; j += 2) {
        uint32_t b[4];  // b0, b1 of n-tile j, then of j + 1
        const int matrix = lane >> 3;
        ldmatrix_x4(b, k_tile + tile_offset<kHeadDim>((j + (matrix >> 1)) * 8 + (lane & 7),
                                                      2 * kk + (matrix & 1)));
        mma_bf16_16816(s[j], a, b[0], b[1]);
        mma_bf16_16816(s[j + 1], a, b[2], b[3]);
      }
    }

    // Keys beyond the segment (last tile only) score -inf.
    if (key_valid < kBlockN) {
#pragma unroll
      for (int j = 0; j < kSNTiles; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (j * 8 + 2 * quad_col + (e & 1) >= key_valid) s[j][e] = -INFINITY;
        }
      }
    }

    // 2. online softmax; each row lives in the 4 lanes of a quad.
    float alpha[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kSNTiles; ++j) {
        tile_max = fmaxf(tile_max, fmaxf(s[j][2 * half], s[j][2 * half + 1]));
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(row_max[half], tile_max);  // finite: every tile has a key
      alpha[half] = exp2_approx(__fmul_rn(__fsub_rn(row_max[half], new_max), scale_log2));
      row_max[half] = new_max;
    }
    const float shifted_max[2] = {__fmul_rn(row_max[0], scale_log2),
                                  __fmul_rn(row_max[1], scale_log2)};
    uint32_t p[kSNTiles][2];  // bf16 pairs: [j][0] row quad_row, [j][1] row quad_row + 8
    float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < kSNTiles; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float p0 = exp2_approx(__fmaf_rn(s[j][2 * half], scale_log2, -shifted_max[half]));
        const float p1 =
            exp2_approx(__fmaf_rn(s[j][2 * half + 1], scale_log2, -shifted_max[half]));
        p[j][half] = pack_bf16x2(p0, p1);
        // The normaliser sums the weights before they are rounded for P V (as the Hopper kernel,
        // FlashAttention and cuDNN do).
        tile_sum[half] = __fadd_rn(tile_sum[half], __fadd_rn(p0, p1));
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      row_sum[half] = __fmaf_rn(row_sum[half], alpha[half], tile_sum[half]);
    }
#pragma unroll
    for (int n = 0; n < kONTiles; ++n) {
      o[n][0] = __fmul_rn(o[n][0], alpha[0]);
      o[n][1] = __fmul_rn(o[n][1], alpha[0]);
      o[n][2] = __fmul_rn(o[n][2], alpha[1]);
      o[n][3] = __fmul_rn(o[n][3], alpha[1]);
    }

    // 3. O += P V; the S accumulator layout of n-tiles 2kk, 2kk+1 is the A layout of k16 step kk.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t a[4] = {p[2 * kk][0], p[2 * kk][1], p[2 * kk + 1][0], p[2 * kk + 1][1]};
#pragma unroll
      for (int n = 0; n < kONTiles; n += 2) {
        uint32_t b[4];  // b0, b1 of dims n*8.., then of (n+1)*8..
        const int matrix = lane >> 3;
        ldmatrix_x4_trans(b, v_tile + tile_offset<kHeadDim>(16 * kk + (matrix & 1) * 8 + (lane & 7),
                                                            n + (matrix >> 1)));
        mma_bf16_16816(o[n], a, b[0], b[1]);
        mma_bf16_16816(o[n + 1], a, b[2], b[3]);
      }
    }
  }
};

}  // namespace mosaic::cuda::portable
