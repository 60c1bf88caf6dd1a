// The mixture-of-experts kernels (moe.h gives the numerics; docs/design/moe.md).
//
// - moe_route: a warp per row; the softmax's max and sum are warp butterflies (a fixed order),
//   top-k is k rounds of a warp argmax (ties to the lower expert).
// - moe_permute: one CTA of 1024 threads. A shared histogram gives each expert's first row;
//   then the (row, expert) pairs are placed in order, 1,024 at a time, each at its expert's
//   next free rows: its rank among the earlier pairs of the same expert comes from
//   __match_any_sync within its warp and per-warp counts across warps, so rows stay ascending
//   within an expert.
// - expert_gemm: 128 x 128 output tiles of one expert's permuted rows, 8 warps of mma.sync
//   m16n8k16 (bf16 in, fp32 accumulate), K in 32-wide tiles double-buffered by cp.async. The
//   grid covers an upper bound of every expert's row tiles (max_rows / 128 + experts); a CTA finds
//   its expert by walking the offsets and leaves when it has none. An output's K loop is the same
//   whichever tile or CTA computes its row, so row chunking changes no bit.
// - moe_combine: one thread per output element, the k terms in order.
#include "backend/cuda/moe.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/expert_gemm_few_rows.h"
#include "backend/cuda/ptx.cuh"

namespace mosaic::cuda {
namespace {

using namespace ptx;
using bf16 = __nv_bfloat16;

constexpr int kMaxPerLane = static_cast<int>(kMoeMaxExperts / 32);

// ---- routing -------------------------------------------------------------------------------
__global__ void __launch_bounds__(256) moe_route_kernel(int64_t rows, int experts, int k, const bf16* logits,
                                                        int64_t logits_stride, int32_t* route_experts,
                                                        float* route_weights) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t r = int64_t{blockIdx.x} * (blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
    const bf16* row = logits + r * logits_stride;
    float p[kMaxPerLane];
    float max = -INFINITY;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int e = lane + 32 * i;
      p[i] = e < experts ? __bfloat162float(row[e]) : -INFINITY;
      max = fmaxf(max, p[i]);
    }
    for (int offset = 16; offset > 0; offset /= 2) max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, offset));
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      p[i] = lane + 32 * i < experts ? expf(__fsub_rn(p[i], max)) : 0.0f;
      sum = __fadd_rn(sum, p[i]);
    }
    for (int offset = 16; offset > 0; offset /= 2) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, offset));
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) p[i] = __fdiv_rn(p[i], sum);

    uint32_t chosen = 0;  // bit i: expert lane + 32 i taken
    int picked[kMoeMaxExpertsPerToken];
    float weight[kMoeMaxExpertsPerToken];
    for (int t = 0; t < k; ++t) {
      float best = -1.0f;
      int best_expert = 0x7fffffff;
#pragma unroll
      for (int i = 0; i < kMaxPerLane; ++i) {
        const int e = lane + 32 * i;
        if (e < experts && !(chosen >> i & 1u) && p[i] > best) best = p[i], best_expert = e;
      }
      for (int offset = 16; offset > 0; offset /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, best, offset);
        const int other_expert = __shfl_xor_sync(0xffffffffu, best_expert, offset);
        if (other > best || (other == best && other_expert < best_expert)) best = other, best_expert = other_expert;
      }
      if (best_expert % 32 == lane) chosen |= 1u << (best_expert / 32);
      picked[t] = best_expert, weight[t] = best;
    }
    if (lane == 0) {  // ascending expert order
      for (int a = 1; a < k; ++a)
        for (int b = a; b > 0 && picked[b - 1] > picked[b]; --b) {
          const int e = picked[b]; picked[b] = picked[b - 1]; picked[b - 1] = e;
          const float w = weight[b]; weight[b] = weight[b - 1]; weight[b - 1] = w;
        }
      for (int t = 0; t < k; ++t) {
        route_experts[r * k + t] = picked[t];
        route_weights[r * k + t] = weight[t];
      }
    }
  }
}

// ---- permutation ---------------------------------------------------------------------------
constexpr int kPermuteThreads = 1024, kPermuteWarps = kPermuteThreads / 32;

__global__ void __launch_bounds__(kPermuteThreads) moe_permute_kernel(int64_t pairs, int experts, int k,
                                                                      const int32_t* route_experts,
                                                                      int32_t* expert_rows, int32_t* route_slots) {
  __shared__ int32_t next[kMoeMaxExperts];                         // each expert's next free row
  __shared__ int32_t warp_counts[kPermuteWarps][kMoeMaxExperts];   // pairs per warp and expert, this round
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  for (int e = tid; e < experts; e += kPermuteThreads) next[e] = 0;
  __syncthreads();
  for (int64_t i = tid; i < pairs; i += kPermuteThreads) atomicAdd(&next[route_experts[i]], 1);
  __syncthreads();
  if (tid == 0) {
    int32_t first = 0;
    for (int e = 0; e < experts; ++e) {
      const int32_t count = next[e];
      expert_rows[e] = first, next[e] = first;
      first += count;
    }
    expert_rows[experts] = first;
  }
  __syncthreads();
  int32_t* sources = expert_rows + experts + 1;
  for (int64_t base = 0; base < pairs; base += kPermuteThreads) {
    for (int i = tid; i < kPermuteWarps * experts; i += kPermuteThreads) warp_counts[i / experts][i % experts] = 0;
    __syncthreads();
    const int64_t i = base + tid;
    const int e = i < pairs ? route_experts[i] : -1;
    const uint32_t peers = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    if (e >= 0 && rank == 0) warp_counts[warp][e] = __popc(peers);
    __syncthreads();
    if (e >= 0) {
      int32_t before = 0;
      for (int w = 0; w < warp; ++w) before += warp_counts[w][e];
      const int32_t slot = next[e] + before + rank;
      sources[slot] = static_cast<int32_t>(i / k);
      route_slots[i] = slot;
    }
    __syncthreads();
    for (int x = tid; x < experts; x += kPermuteThreads) {
      int32_t total = 0;
      for (int w = 0; w < kPermuteWarps; ++w) total += warp_counts[w][x];
      next[x] += total;
    }
    __syncthreads();
  }
}

// ---- grouped product -----------------------------------------------------------------------
// 8 warps in 2 x 4, each a 64 x 32 block of the 128 x 128 tile (4 x 4 mma tiles).
constexpr int kBM = 128, kBN = 128, kBK = 32, kWarpsN = 4, kGemmThreads = 256;
constexpr int kWarpRows = 64, kWarpCols = 32, kMi = kWarpRows / 16, kNj = kWarpCols / 8;
constexpr int kRowChunks = kBK / 8 + 1;  // a tile row of 4 chunks padded to 5: ldmatrix without conflicts

__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
  return static_cast<uint32_t>((row * kRowChunks + chunk) * 16);
}

__global__ void __launch_bounds__(kGemmThreads) expert_gemm_kernel(const ExpertGemmArgs args) {
  // This CTA's expert and row tile.
  int64_t tile = blockIdx.x;
  int expert = -1;
  int64_t first = 0, valid = 0;
  for (int e = 0; e < args.experts; ++e) {
    const int64_t begin = args.offsets[e], rows = args.offsets[e + 1] - begin;
    const int64_t tiles = (rows + kBM - 1) / kBM;
    if (tile < tiles) {
      expert = e, first = begin + tile * kBM, valid = min64(kBM, rows - tile * kBM);
      break;
    }
    tile -= tiles;
  }
  if (expert < 0) return;
  const int64_t col0 = int64_t{blockIdx.y} * kBN;
  const bf16* a = static_cast<const bf16*>(args.a) + first * args.lda;
  const bf16* w = static_cast<const bf16*>(args.weights[expert]) + col0 * args.k;
  const int64_t valid_cols = min64(kBN, args.n - col0);

  __shared__ __align__(128) unsigned char smem[2 * 2 * kBM * kRowChunks * 16];
  const uint32_t a_tiles = smem_address(smem), b_tiles = a_tiles + 2 * kBM * kRowChunks * 16;
  constexpr uint32_t kStage = kBM * kRowChunks * 16;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / kWarpsN, warp_n = warp % kWarpsN;

  auto load = [&](int t) {
    const int64_t k0 = int64_t{t} * kBK;
    static_assert(kBM == kBN, "A and B tiles share the loop");
    for (int i = tid; i < kBM * (kBK / 8); i += kGemmThreads) {
      const int row = i / (kBK / 8), chunk = i % (kBK / 8);
      const int64_t column = k0 + chunk * 8;
      const bool a_in = row < valid && column < args.k, b_in = row < valid_cols && column < args.k;
      cp_async_16(a_tiles + (t & 1) * kStage + tile_offset(row, chunk), a_in ? a + row * args.lda + column : a,
                  a_in ? 16 : 0);
      cp_async_16(b_tiles + (t & 1) * kStage + tile_offset(row, chunk), b_in ? w + row * args.k + column : w,
                  b_in ? 16 : 0);
    }
  };

  float acc[kMi][kNj][4] = {};
  const int k_tiles = static_cast<int>((args.k + kBK - 1) / kBK);
  load(0);
  cp_async_commit();
  for (int t = 0; t < k_tiles; ++t) {
    if (t + 1 < k_tiles) {
      load(t + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint32_t a_tile = a_tiles + (t & 1) * kStage, b_tile = b_tiles + (t & 1) * kStage;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t fa[kMi][4];
#pragma unroll
      for (int mi = 0; mi < kMi; ++mi)
        ldmatrix_x4(fa[mi], a_tile + tile_offset(warp_m * kWarpRows + mi * 16 + (lane & 15), 2 * kk + (lane >> 4)));
#pragma unroll
      for (int nj = 0; nj < kNj; nj += 2) {
        uint32_t fb[4];  // b0, b1 of n-tile nj, then of nj + 1
        const int matrix = lane >> 3;
        ldmatrix_x4(fb, b_tile + tile_offset(warp_n * kWarpCols + (nj + (matrix >> 1)) * 8 + (lane & 7),
                                             2 * kk + (matrix & 1)));
#pragma unroll
        for (int mi = 0; mi < kMi; ++mi) {
          mma_bf16_16816(acc[mi][nj], fa[mi], fb[0], fb[1]);
          mma_bf16_16816(acc[mi][nj + 1], fa[mi], fb[2], fb[3]);
        }
      }
    }
    __syncthreads();  // the stage read here is overwritten by the loads of tile t + 2
  }

  bf16* out = static_cast<bf16*>(args.out) + first * args.ldc + col0;
  const int quad_row = lane / 4, quad_col = lane % 4;
#pragma unroll
  for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
    for (int nj = 0; nj < kNj; ++nj)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_m * kWarpRows + mi * 16 + quad_row + 8 * half;
        const int col = warp_n * kWarpCols + nj * 8 + 2 * quad_col;
        if (row < valid && col < valid_cols)
          *reinterpret_cast<uint32_t*>(out + row * args.ldc + col) =
              pack_bf16x2(acc[mi][nj][2 * half], acc[mi][nj][2 * half + 1]);
      }
}

// ---- combine -------------------------------------------------------------------------------
__global__ void moe_combine_kernel(int64_t rows, int64_t hidden, int k, bf16* x, int64_t x_stride, const bf16* y,
                                   int64_t y_stride, const float* route_weights, const int32_t* route_slots) {
  const int64_t total = rows * hidden;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / hidden, d = i % hidden;
    float sum = 0.0f;
    for (int j = 0; j < k; ++j)
      sum = __fmaf_rn(route_weights[r * k + j], __bfloat162float(y[int64_t{route_slots[r * k + j]} * y_stride + d]), sum);
    bf16& out = x[r * x_stride + d];
    out = __float2bfloat16_rn(__fadd_rn(__bfloat162float(out), __bfloat162float(__float2bfloat16_rn(sum))));
  }
}

bool aligned_16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

void moe_route(int64_t rows, int64_t experts, int64_t k, const void* logits, int64_t logits_stride,
               int32_t* route_experts, float* route_weights, cudaStream_t stream) {
  if (rows <= 0) return;
  MOSAIC_CUDA_REQUIRE(experts >= 1 && experts <= kMoeMaxExperts && k >= 1 && k <= std::min(experts, kMoeMaxExpertsPerToken));
  MOSAIC_CUDA_REQUIRE(logits_stride >= experts);
  const int64_t blocks = std::min<int64_t>((rows + 7) / 8, 4096);
  moe_route_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      rows, static_cast<int>(experts), static_cast<int>(k), static_cast<const bf16*>(logits), logits_stride,
      route_experts, route_weights);
  MOSAIC_CUDA_CHECK_LAUNCH();
}

void moe_permute(int64_t rows, int64_t experts, int64_t k, const int32_t* route_experts, int32_t* expert_rows,
                 int32_t* route_slots, cudaStream_t stream) {
  MOSAIC_CUDA_REQUIRE(experts >= 1 && experts <= kMoeMaxExperts && k >= 1 && rows >= 0 && rows * k < (int64_t{1} << 31));
  moe_permute_kernel<<<1, kPermuteThreads, 0, stream>>>(rows * k, static_cast<int>(experts), static_cast<int>(k),
                                                        route_experts, expert_rows, route_slots);
  MOSAIC_CUDA_CHECK_LAUNCH();
}

void expert_gemm(const ExpertGemmArgs& args, cudaStream_t stream) {
  if (args.max_rows <= 0) return;
  MOSAIC_CUDA_REQUIRE(args.k > 0 && args.k % 8 == 0 && args.n > 0 && args.n % 2 == 0 && args.experts >= 1);
  MOSAIC_CUDA_REQUIRE(args.lda >= args.k && args.lda % 8 == 0 && args.ldc >= args.n && args.ldc % 2 == 0);
  MOSAIC_CUDA_REQUIRE(aligned_16(args.a) && aligned_16(args.out) && args.weights != nullptr && args.offsets != nullptr);
  MOSAIC_CUDA_REQUIRE((args.n + kBN - 1) / kBN <= 65535);
  const bool few_rows = args.kernel == ExpertGemmKernel::few_rows ||
                        (args.kernel == ExpertGemmKernel::automatic && args.max_rows <= kFewRowsPerExpert * args.experts);
  if (few_rows) return expert_gemm_few_rows(args, stream);
  const int64_t row_tiles = (args.max_rows + kBM - 1) / kBM + args.experts;
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>((args.n + kBN - 1) / kBN));
  expert_gemm_kernel<<<grid, kGemmThreads, 0, stream>>>(args);
  MOSAIC_CUDA_CHECK_LAUNCH();
}

void moe_combine(int64_t rows, int64_t hidden, int64_t k, void* x, int64_t x_stride, const void* y,
                 int64_t y_stride, const float* route_weights, const int32_t* route_slots, cudaStream_t stream) {
  if (rows <= 0) return;
  MOSAIC_CUDA_REQUIRE(hidden > 0 && k >= 1 && x_stride >= hidden && y_stride >= hidden);
  const int64_t blocks = std::min<int64_t>((rows * hidden + 255) / 256, 8192);
  moe_combine_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      rows, hidden, static_cast<int>(k), static_cast<bf16*>(x), x_stride, static_cast<const bf16*>(y), y_stride,
      route_weights, route_slots);
  MOSAIC_CUDA_CHECK_LAUNCH();
}

}  // namespace mosaic::cuda
