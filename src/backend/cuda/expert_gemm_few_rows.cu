// The grouped expert product for few rows per expert: 32 x 64 output tiles of one expert's
// permuted rows, 4 warps of mma.sync m16n8k16 (each 32 rows x 16 columns), K in 64-wide tiles
// through a 3-stage cp.async ring, so that each CTA keeps two tiles of weights in flight. The grid
// is columns x experts x row tiles of the largest expert's bound: a CTA reads its expert's two
// offsets and leaves at once when the expert has no rows there (walking all the offsets to find
// the expert, as the 128 x 128 kernel does, cost a CTA tens of microseconds of dependent loads
// over 256 experts, and most CTAs of a decoding step have nothing to do).
//
// Bits: an output's fp32 accumulator starts at zero and takes the K dimension in 16-wide mma steps
// in ascending order, as in moe.cu's 128 x 128 kernel, and an mma's result for an element depends
// only on its row, its column and the accumulator: the two kernels write the same bits.
#include "backend/cuda/expert_gemm_few_rows.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ptx.cuh"

namespace mosaic::cuda {
namespace {

using namespace ptx;
using bf16 = __nv_bfloat16;

constexpr int kBM = 32, kBN = 64, kBK = 64, kStages = 3, kWarps = 4, kThreads = kWarps * 32;
constexpr int kWarpCols = kBN / kWarps, kMi = kBM / 16, kNj = kWarpCols / 8;
constexpr int kRowChunks = kBK / 8 + 1;  // 8 chunks of 16 bytes padded to 9: ldmatrix without conflicts
constexpr uint32_t kATile = kBM * kRowChunks * 16, kBTile = kBN * kRowChunks * 16;
static_assert(kStages * (kATile + kBTile) <= 48 * 1024, "static shared memory");

__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
  return static_cast<uint32_t>((row * kRowChunks + chunk) * 16);
}

// One 32 x 64 tile: rows [first, first + valid) of `expert`, columns [col0, col0 + 64).
__device__ void few_rows_tile(const ExpertGemmArgs& args, int expert, int64_t first, int64_t valid, int64_t col0,
                              unsigned char* smem) {
  const bf16* a = static_cast<const bf16*>(args.a) + first * args.lda;
  const bf16* w = static_cast<const bf16*>(args.weights[expert]) + col0 * args.k;
  const int64_t valid_cols = min64(kBN, args.n - col0);

  const uint32_t a_tiles = smem_address(smem), b_tiles = a_tiles + kStages * kATile;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  auto load = [&](int t) {
    const int stage = t % kStages;
    const int64_t k0 = int64_t{t} * kBK;
    for (int i = tid; i < (kBM + kBN) * (kBK / 8); i += kThreads) {
      const bool is_a = i < kBM * (kBK / 8);
      const int j = is_a ? i : i - kBM * (kBK / 8);
      const int row = j / (kBK / 8), chunk = j % (kBK / 8);
      const int64_t column = k0 + chunk * 8;
      if (is_a) {
        const bool in = row < valid && column < args.k;
        cp_async_16(a_tiles + stage * kATile + tile_offset(row, chunk), in ? a + row * args.lda + column : a, in ? 16 : 0);
      } else {
        const bool in = row < valid_cols && column < args.k;
        cp_async_16(b_tiles + stage * kBTile + tile_offset(row, chunk), in ? w + row * args.k + column : w, in ? 16 : 0);
      }
    }
  };

  float acc[kMi][kNj][4] = {};
  const int k_tiles = static_cast<int>((args.k + kBK - 1) / kBK);
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < k_tiles) load(t);
    cp_async_commit();
  }
  for (int t = 0; t < k_tiles; ++t) {
    cp_async_wait<kStages - 2>();  // tile t has landed
    __syncthreads();               // for every thread; and tile t - 1's stage is free to refill
    if (t + kStages - 1 < k_tiles) load(t + kStages - 1);
    cp_async_commit();
    const uint32_t a_tile = a_tiles + (t % kStages) * kATile, b_tile = b_tiles + (t % kStages) * kBTile;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t fa[kMi][4];
#pragma unroll
      for (int mi = 0; mi < kMi; ++mi) ldmatrix_x4(fa[mi], a_tile + tile_offset(mi * 16 + (lane & 15), 2 * kk + (lane >> 4)));
#pragma unroll
      for (int nj = 0; nj < kNj; nj += 2) {
        uint32_t fb[4];  // b0, b1 of n-tile nj, then of nj + 1
        const int matrix = lane >> 3;
        ldmatrix_x4(fb, b_tile + tile_offset(warp * kWarpCols + (nj + (matrix >> 1)) * 8 + (lane & 7), 2 * kk + (matrix & 1)));
#pragma unroll
        for (int mi = 0; mi < kMi; ++mi) {
          mma_bf16_16816(acc[mi][nj], fa[mi], fb[0], fb[1]);
          mma_bf16_16816(acc[mi][nj + 1], fa[mi], fb[2], fb[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  bf16* out = static_cast<bf16*>(args.out) + first * args.ldc + col0;
  const int quad_row = lane / 4, quad_col = lane % 4;
#pragma unroll
  for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
    for (int nj = 0; nj < kNj; ++nj)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = mi * 16 + quad_row + 8 * half;
        const int col = warp * kWarpCols + nj * 8 + 2 * quad_col;
        if (row < valid && col < valid_cols)
          *reinterpret_cast<uint32_t*>(out + row * args.ldc + col) =
              pack_bf16x2(acc[mi][nj][2 * half], acc[mi][nj][2 * half + 1]);
      }
}

__global__ void __launch_bounds__(kThreads) expert_gemm_few_rows_kernel(const ExpertGemmArgs args) {
  __shared__ __align__(128) unsigned char smem[kStages * (kATile + kBTile)];
  const int expert = static_cast<int>(blockIdx.y);
  const int64_t begin = args.offsets[expert], rows = args.offsets[expert + 1] - begin;
  const int64_t col0 = int64_t{blockIdx.x} * kBN;
  // Row tiles z, z + gridDim.z, ...: every row even past the bound the grid was sized by.
  for (int64_t tile = blockIdx.z; tile * kBM < rows; tile += gridDim.z) {
    few_rows_tile(args, expert, begin + tile * kBM, min64(kBM, rows - tile * kBM), col0, smem);
    __syncthreads();  // the next tile's loads overwrite the stages
  }
}

}  // namespace

void expert_gemm_few_rows(const ExpertGemmArgs& args, cudaStream_t stream) {
  MOSAIC_CUDA_REQUIRE(args.experts <= 65535);
  const int64_t bound = args.max_rows_per_expert > 0 ? std::min(args.max_rows_per_expert, args.max_rows) : args.max_rows;
  const int64_t row_tiles = std::clamp<int64_t>((bound + kBM - 1) / kBM, 1, 65535);
  const dim3 grid(static_cast<unsigned>((args.n + kBN - 1) / kBN), static_cast<unsigned>(args.experts),
                  static_cast<unsigned>(row_tiles));
  expert_gemm_few_rows_kernel<<<grid, kThreads, 0, stream>>>(args);
  MOSAIC_CUDA_CHECK_LAUNCH();
}

}  // namespace mosaic::cuda
