// Flash attention forward for Hopper (sm_90a): the same contract and arithmetic as the portable
// kernel in attention.cu, with the two matrix products on warpgroup MMA (wgmma) reading their
// B operands — and Q — straight from shared memory (docs/design/cuda-kernels.md, "Attention on
// Hopper").
//
// Per warpgroup of 64 query rows (RowBlock), for each tile of kBlockN = 128 keys from kv_begin:
//   1. S [64, 128] = Q K_t^T       8 × wgmma m64n128k16, A = Q and B = K from shared memory
//   2. online softmax per row, exactly as the portable kernel does it (same operations, same
//      order per row: m' = max(m, rowmax S), alpha, P rounded to bf16, l = l alpha + rowsum P)
//   3. O [64, 128] = O alpha + P V_t   8 × wgmma m64n128k16, A = P from registers (the S
//      accumulator layout is the A fragment layout), B = V from shared memory, transposed
// Every tile in shared memory uses the 128-byte swizzle wgmma reads: [head_dim / 64 column
// blocks][rows][64 elements], 16-byte chunk c of row r at chunk c ^ (r & 7), 1024-byte aligned.
//
// Two kernels: flash_attention_ws_kernel, the engine's (a producer warp loads K/V tiles with TMA
// into mbarrier-guarded stages, two consumer warpgroups with Q in registers take turns on the
// tensor cores; from 64 query tiles up, CTAs run in pairs that multicast each K/V tile into
// both; template switches give the workbench its earlier versions), and
// flash_attention_wgmma_kernel, where all threads load and compute between CTA barriers (kept
// for dev/cuda/attention_bench.cu, which measures both).
//
// Exactness: a query row's arithmetic depends only on that row of Q and the segment's keys and
// values, in an instruction sequence that is the same whichever warpgroup, tile or call the row
// lands in, so query chunking changes no output bit (as with the portable kernel).
#include "backend/cuda/attention_sm90.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>

#include "backend/cuda/attention_epilogue.cuh"
#include "backend/cuda/attention_kernel_args.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/once_per_device.h"
#include "backend/cuda/pair_launch.h"
#include "backend/cuda/ptx.cuh"
#include "backend/cuda/shared_memory_limit.h"
#include "backend/cuda/sm90_ptx.cuh"
#include "backend/cuda/tensor_map.h"

namespace mosaic::cuda {
namespace hopper {  // a namespace of its own: dev/cuda/attention_bench.cu includes this file
namespace {         // beside attention.cu

using namespace ptx;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
using namespace sm90;
#endif

constexpr int kHeadDim = 128;
constexpr int kBlockN = 128;  // keys per tile
constexpr int64_t kMaxGridZ = 65535;
constexpr uint32_t kKVBytes = kBlockN * kHeadDim * 2;
constexpr int kKStages = 2, kVStages = 3;  // see the main loop

// How a row's normaliser l (the sum of its softmax weights) is added up, tile by tile:
enum class RowSum {
  rounded_alu,    // the bf16 weights P V uses, unpacked and added on the ALU (v5)
  unrounded_alu,  // the fp32 weights before they are rounded, added on the ALU (v6: FlashAttention's)
  rounded_mma,    // the bf16 weights on the tensor cores, P times a [keys x 8] matrix of ones issued
                  // with P V (v8, workbench only): no adds on the ALU, but 8 more MMAs per tile
};

// A CTA of kGroups warpgroups owns 64 kGroups query rows.
template <int kGroups>
struct Tiling {
  static constexpr int kBlockM = 64 * kGroups;
  static constexpr int kThreads = 128 * kGroups;
  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kSharedBytes = 1024 + kQBytes + (kKStages + kVStages) * kKVBytes;  // + alignment
};

// Device code exists only in the sm_90a pass; the host pass sees the launch stub.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Byte offset of 16-byte chunk `chunk` (0 .. kHeadDim / 8 - 1) of row `row` in a swizzled tile of
// kRows rows.
template <int kRows>
__device__ __forceinline__ uint32_t swizzled_offset(int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * kRows * 128 + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
}

// One thread's share of copying a [kRows][kHeadDim] tile from global memory: it always copies the
// same 16-byte column of rows row, row + kRowStep, ... (kRowStep a multiple of 8, so the swizzle
// repeats), hence its addresses are computed once per kernel, not once per chunk.
template <int kRows, int kThreads>
struct TileCopier {
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr int kRowStep = kThreads / kChunks;
  static constexpr int kCopies = (kRows + kRowStep - 1) / kRowStep;
  static_assert(kThreads % kChunks == 0 && kRowStep % 8 == 0);

  int row;          // first row this thread copies
  uint32_t offset;  // its byte offset in the tile
  int column;       // its element offset within a row

  __device__ __forceinline__ TileCopier()
      : row(static_cast<int>(threadIdx.x) / kChunks),
        offset(swizzled_offset<kRows>(static_cast<int>(threadIdx.x) / kChunks, threadIdx.x % kChunks)),
        column(static_cast<int>(threadIdx.x % kChunks) * 8) {}

  // Rows [0, valid) from base (row r at base + r * stride elements); rows [valid, kRows) zeroed.
  __device__ __forceinline__ void copy(uint32_t tile, const __nv_bfloat16* base, int64_t stride,
                                       int valid) const {
    const __nv_bfloat16* src = base + row * stride + column;
    const int64_t step = kRowStep * stride;
#pragma unroll
    for (int c = 0; c < kCopies; ++c) {
      const int r = row + c * kRowStep;
      if (kRows % kRowStep != 0 && r >= kRows) break;
      const bool inside = r < valid;
      cp_async_16(tile + offset + c * kRowStep * 128, inside ? src : base, inside ? 16 : 0);
      src += step;
    }
  }
};

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

using KernelArgs = AttentionKernelArgs;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr int kNTiles = 16;  // n8 tiles of S (kBlockN / 8) and of O (kHeadDim / 8)
static_assert(kBlockN / 8 == kNTiles && kHeadDim / 8 == kNTiles);

// One warpgroup's 64 query rows: the S and O accumulators, P, the online-softmax state, and the
// steps of one key tile. Both kernels below run exactly these instructions per row.
struct RowBlock {
  float o[64];          // [n8 tile j][4]: rows quad_row (+8), columns 8j + 2 quad_col (+1)
  float s[64];          // scores of the current tile, then 2^(...) in place
  float l[4];           // RowSum::rounded_mma: l of row quad_row in [0], [1], of quad_row + 8 in [2], [3]
  uint32_t p[kNTiles][2];  // bf16 P: the A operand of P V ([j][0] row quad_row, [j][1] + 8)
  float row_max[2], row_sum[2], alpha[2];  // rows quad_row and quad_row + 8
  float scale_log2;
  int quad_col;

  __device__ __forceinline__ explicit RowBlock(float scale_log2_) : scale_log2(scale_log2_) {
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.0f;
    l[0] = l[1] = l[2] = l[3] = 0.0f;
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.0f;
    alpha[0] = alpha[1] = 1.0f;
    quad_col = threadIdx.x % 4;
  }

  // S = Q K^T, issued and committed. q: descriptor of this warpgroup's first Q row in a Q tile
  // of kQRows rows; k: descriptor of the K stage. k16 step kk reads bytes 32 (kk % 4) .. of
  // column block kk / 4; 8-row groups are 1024 bytes apart (the leading offset is unused with
  // K-major swizzled operands); an offset is added to the start-address field in 16-byte units.
  template <int kQRows>
  __device__ __forceinline__ void issue_scores(uint64_t q, uint64_t k) {
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint32_t column = (kk % 4) * 32;
      wgmma_m64n128k16_ss(s, q + (((kk / 4) * kQRows * 128 + column) >> 4),
                          k + (((kk / 4) * kBlockN * 128 + column) >> 4), kk > 0);
    }
    wgmma_commit();
  }
  // The same with this warp's 16 rows of Q in registers: q[kk] is the m16n8k16 A fragment of k16
  // step kk (the kernel loads it once with ldmatrix), so only K is read from shared memory.
  __device__ __forceinline__ void issue_scores(const uint32_t (&q)[kHeadDim / 16][4], uint64_t k) {
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      wgmma_m64n128k16_rs(s, q[kk], k + (((kk / 4) * kBlockN * 128 + (kk % 4) * 32) >> 4), kk > 0);
    }
    wgmma_commit();
  }
  // O += P V, issued and committed: k16 step kk covers keys 16kk..16kk+15, two 8-row groups
  // (2048 bytes) of every column block; column blocks (N) are kBlockN * 128 bytes apart (in v).
  // With RowSum::rounded_mma also l += P 1 (`ones`: a [16 x 8] matrix of ones, the same for every
  // k16 step), in the same commit group.
  template <RowSum kRowSum = RowSum::rounded_alu>
  __device__ __forceinline__ void issue_values(uint64_t v, uint64_t ones = 0) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t a[4] = {p[2 * kk][0], p[2 * kk][1], p[2 * kk + 1][0], p[2 * kk + 1][1]};
      wgmma_m64n128k16_rs_transposed_b(o, a, v + ((kk * 2048) >> 4));
    }
    if constexpr (kRowSum == RowSum::rounded_mma) {
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        const uint32_t a[4] = {p[2 * kk][0], p[2 * kk][1], p[2 * kk + 1][0], p[2 * kk + 1][1]};
        wgmma_m64n8k16_rs(l, a, ones);
      }
    }
    wgmma_commit();
  }
  // Softmax, first half (needs only S): keys at or past key_valid score -inf, the new running
  // max, alpha, and 2^(S scale log2 e - m' scale log2 e) in place. Each row lives in the 4 lanes
  // of a quad.
  __device__ __forceinline__ void exponentiate(int key_valid) {
    if (key_valid < kBlockN) {
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (j * 8 + 2 * quad_col + (e & 1) >= key_valid) s[4 * j + e] = -INFINITY;
        }
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) tile_max = fmaxf(tile_max, fmaxf(s[4 * j + 2 * half], s[4 * j + 2 * half + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(row_max[half], tile_max);  // finite: every tile has a key
      alpha[half] = exp2_approx(__fmul_rn(__fsub_rn(row_max[half], new_max), scale_log2));
      row_max[half] = new_max;
      const float shifted_max = __fmul_rn(new_max, scale_log2);
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        s[4 * j + 2 * half] = exp2_approx(__fmaf_rn(s[4 * j + 2 * half], scale_log2, -shifted_max));
        s[4 * j + 2 * half + 1] = exp2_approx(__fmaf_rn(s[4 * j + 2 * half + 1], scale_log2, -shifted_max));
      }
    }
  }
  // Softmax, second half (once no P V in flight reads p or writes o or l): P rounded to bf16, the
  // normaliser l = l alpha + rowsum P, O scaled by alpha. RowSum (above) says how rowsum P is
  // added: on the ALU here, over the rounded or the unrounded weights, or on the tensor cores
  // with P V (issue_values), where l is an accumulator scaled by alpha like O.
  template <bool kSkipUnitRescale = false, RowSum kRowSum = RowSum::rounded_alu>
  __device__ __forceinline__ void round_and_rescale() {
    float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        p[j][half] = pack_bf16x2(s[4 * j + 2 * half], s[4 * j + 2 * half + 1]);
        if constexpr (kRowSum == RowSum::unrounded_alu) {
          tile_sum[half] = __fadd_rn(tile_sum[half], __fadd_rn(s[4 * j + 2 * half], s[4 * j + 2 * half + 1]));
        } else if constexpr (kRowSum == RowSum::rounded_alu) {
          tile_sum[half] = __fadd_rn(tile_sum[half], __fadd_rn(bf16_low(p[j][half]), bf16_high(p[j][half])));
        }
      }
    }
    if constexpr (kRowSum != RowSum::rounded_mma) {
#pragma unroll
      for (int half = 0; half < 2; ++half) row_sum[half] = __fmaf_rn(row_sum[half], alpha[half], tile_sum[half]);
    }
    // Once a row's maximum has settled, alpha is exactly 1 (2^0) and O alpha = O: with
    // kSkipUnitRescale a warp skips the 64 multiplies when none of its rows needs them (no bit
    // changes).
    if (kSkipUnitRescale && !__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) return;
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      o[4 * j + 0] = __fmul_rn(o[4 * j + 0], alpha[0]);
      o[4 * j + 1] = __fmul_rn(o[4 * j + 1], alpha[0]);
      o[4 * j + 2] = __fmul_rn(o[4 * j + 2], alpha[1]);
      o[4 * j + 3] = __fmul_rn(o[4 * j + 3], alpha[1]);
    }
    if constexpr (kRowSum == RowSum::rounded_mma) {
      l[0] = __fmul_rn(l[0], alpha[0]), l[1] = __fmul_rn(l[1], alpha[0]);
      l[2] = __fmul_rn(l[2], alpha[1]), l[3] = __fmul_rn(l[3], alpha[1]);
    }
  }
  // O / l rounded to bf16, staged through this warp's own 16 rows (warp_row0 ..) of the Q tile
  // (only this warpgroup's wgmmas read them, and they have completed), then stored 16 bytes per
  // lane to out (row r of the tile at out + r * out_stride); rows at or past q_valid are skipped.
  // With RowSum::rounded_mma every lane holds its rows' whole l (each column of P 1 is the row sum).
  template <int kQRows, RowSum kRowSum = RowSum::rounded_alu>
  __device__ __forceinline__ void store(uint32_t q_tile, int warp_row0, int q_valid, __nv_bfloat16* out,
                                        int64_t out_stride) {
    const int quad_row = threadIdx.x % 32 / 4;
    float inv_sum[2];
    if constexpr (kRowSum == RowSum::rounded_mma) {
      inv_sum[0] = row_inverse(l[0]), inv_sum[1] = row_inverse(l[2]);
    } else {
      inv_sum[0] = quad_row_inverse(row_sum[0]), inv_sum[1] = quad_row_inverse(row_sum[1]);
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_row0 + quad_row + 8 * half;
        const uint32_t packed = pack_bf16x2(__fmul_rn(o[4 * j + 2 * half], inv_sum[half]),
                                            __fmul_rn(o[4 * j + 2 * half + 1], inv_sum[half]));
        const uint32_t address = q_tile + swizzled_offset<kQRows>(row, j) + quad_col * 4;
        st_shared_4(address, packed);
      }
    }
    __syncwarp();
    store_staged_rows<kHeadDim>(
        q_tile, [](int row, int chunk) { return swizzled_offset<kQRows>(row, chunk); }, warp_row0, q_valid, out,
        out_stride);
  }
};
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// ---- all threads load, all compute (v3) --------------------------------------------------------
// kOverlap: issue S of tile t before waiting for P V of tile t - 1, so that the exponentials of
// tile t run while the tensor cores finish tile t - 1 (needs ~200 registers per thread).
template <int kGroups, bool kOverlap>
__global__ void __launch_bounds__(Tiling<kGroups>::kThreads, 1)
    flash_attention_wgmma_kernel(const KernelArgs args, int64_t segment_offset) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBlockM = Tiling<kGroups>::kBlockM, kThreads = Tiling<kGroups>::kThreads;
  constexpr uint32_t kQBytes = Tiling<kGroups>::kQBytes;

  const QueryTile<kBlockM, kBlockN, kHeadDim> work(args, segment_offset);
  if (work.past_queries() || work.elsewhere(args)) return;
  const int q_valid = work.q_valid(), kv_tiles = work.kv_tiles();

  extern __shared__ unsigned char smem[];
  const uint32_t q_tile = (smem_address(smem) + 1023) & ~uint32_t{1023};
  const uint32_t k_tiles = q_tile + kQBytes;                 // [kKStages]
  const uint32_t v_tiles = k_tiles + kKStages * kKVBytes;    // [kVStages]

  const TileCopier<kBlockN, kThreads> kv_copier;
  auto load_kv = [&](int t) {
    kv_copier.copy(k_tiles + (t % kKStages) * kKVBytes, work.k_tile(args, t), args.k_stride, work.key_valid(t));
    kv_copier.copy(v_tiles + (t % kVStages) * kKVBytes, work.v_tile(args, t), args.v_stride, work.key_valid(t));
  };

  TileCopier<kBlockM, kThreads>().copy(q_tile, work.q(args), args.q_stride, q_valid);
  if (kv_tiles > 0) load_kv(0);
  cp_async_commit();

  const int warpgroup = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4;
  const bool group_active = warpgroup * 64 < q_valid;  // uniform per warpgroup, as wgmma needs
  RowBlock rows(args.scale_log2);
  // Operand descriptors, built once; a stage adds its offset / 16 (no carry: shared memory is
  // below 256 KiB).
  const uint64_t q_descriptor = smem_descriptor(q_tile + warpgroup * 64 * 128, 16, 1024);
  auto k_descriptor = [&](int t) { return smem_descriptor(k_tiles, 16, 1024) + (t % kKStages) * (kKVBytes >> 4); };
  auto v_descriptor = [&](int t) {
    return smem_descriptor(v_tiles, kBlockN * 128, 1024) + (t % kVStages) * (kKVBytes >> 4);
  };

  // Tile t's K and V land (one cp.async group per tile) while tile t - 1 is computed. Stages are
  // reused only after the barrier that follows every warpgroup's wait for the MMAs reading them:
  // K_{t+1} replaces K_{t-1} (its S completed in iteration t - 1), V_{t+1} replaces V_{t-2} (its
  // P V completed in iteration t - 1), hence two K stages and three V stages.
  // (The first tile is peeled off so that the loop body is straight-line code: ptxas serialises
  // wgmma in branches it cannot see through.)
  auto tile_landed = [&](int t) {
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    if (t + 1 < kv_tiles) {
      load_kv(t + 1);
      cp_async_commit();
    }
  };
  if (kv_tiles > 0) {
    tile_landed(0);
    if (group_active) {
      wgmma_fence();
      rows.issue_scores<kBlockM>(q_descriptor, k_descriptor(0));
      wgmma_wait<0>();
      fence_registers(rows.s);
      rows.exponentiate(work.key_valid(0));
      rows.round_and_rescale();
    }
  }
  for (int t = 1; t < kv_tiles; ++t) {
    tile_landed(t);
    if (group_active) {
      wgmma_fence();
      if constexpr (kOverlap) {
        rows.issue_scores<kBlockM>(q_descriptor, k_descriptor(t));
        rows.issue_values(v_descriptor(t - 1));
        wgmma_wait<1>();  // S of tile t; P V of tile t - 1 still runs
        fence_registers(rows.s);
        rows.exponentiate(work.key_valid(t));
        wgmma_wait<0>();  // P V of tile t - 1
        fence_registers(rows.o);
      } else {
        rows.issue_values(v_descriptor(t - 1));
        rows.issue_scores<kBlockM>(q_descriptor, k_descriptor(t));
        wgmma_wait<0>();
        fence_registers(rows.o);
        fence_registers(rows.s);
        rows.exponentiate(work.key_valid(t));
      }
      rows.round_and_rescale();
    }
  }
  if (group_active && kv_tiles > 0) {
    wgmma_fence();
    rows.issue_values(v_descriptor(kv_tiles - 1));
    wgmma_wait<0>();
    fence_registers(rows.o);
  }

  if (kv_tiles == 0) {  // a segment without keys: the Q loads may still be in flight
    cp_async_wait<0>();
    __syncthreads();
  }
  if (!group_active) return;
  rows.store<kBlockM>(q_tile, warpgroup * 64 + warp * 16, q_valid, work.out(args), args.out_stride);
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a features: never launched (hopper_attention_available)
#endif
}

// ---- warp-specialised, ping-pong (v4, v5) ------------------------------------------------------
// 3 warpgroups. Warpgroup 0 produces K and V tiles into 3-stage rings guarded by mbarriers (full:
// the tile has landed; empty: both consumers are done with it), so no CTA-wide barrier exists in
// the loop: one lane with TMA (v5, the engine's), or warps 0-1 for K and 2-3 for V with cp.async
// (v4). Warpgroups 1 and 2 consume, 64 query rows each, and
// take turns issuing their MMAs (two named barriers): while one issues S of tile t and P V of
// tile t - 1, the other exponentiates, so the tensor cores and the exponential unit work at
// once (FlashAttention-3's ping-pong). Registers move from the producer (40) to the consumers
// (232).
constexpr int kWsStages = 3;
constexpr int kWsBlockM = 128;
constexpr int kWsThreads = 384;
constexpr uint32_t kWsQBytes = kWsBlockM * kHeadDim * 2;
// RowSum::rounded_mma's B operand: two 8 x 8 core matrices of bf16 ones, unswizzled (256 bytes).
constexpr uint32_t kOnesBytes = 256;
constexpr int kWsSharedBytes = 1024 + kWsQBytes + 2 * kWsStages * kKVBytes + 128 + kOnesBytes;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// One warp copies half of a [kBlockN][kHeadDim] tile, rows [half * 64, half * 64 + 64): lane l
// copies 16-byte chunk l % 16 of rows l / 16, l / 16 + 2, ...; rows at or past `valid` are
// zero-filled.
__device__ __forceinline__ void warp_copy_half_tile(uint32_t tile, const __nv_bfloat16* base, int64_t stride,
                                                    int valid, int half) {
  const int lane = threadIdx.x % 32, chunk = lane % 16, first = half * (kBlockN / 2) + lane / 16;
  const __nv_bfloat16* src = base + first * stride + chunk * 8;
  const int64_t step = 2 * stride;
#pragma unroll 8
  for (int k = 0; k < kBlockN / 4; ++k) {
    const int row = first + 2 * k;
    const bool inside = row < valid;
    cp_async_16(tile + swizzled_offset<kBlockN>(row, chunk), inside ? src : base, inside ? 16 : 0);
    src += step;
  }
}
#endif

// The engine's kernel. Switches (the engine runs the first three on with RowSum::unrounded_alu,
// paired from 64 query tiles up; the workbench times the other combinations):
// kSkipUnitRescale — RowBlock::round_and_rescale skips O * alpha where alpha is 1 for the warp;
// kQInRegisters — each warp loads its 16 Q rows into registers once and S reads A from them;
// kTmaLoads — one producer warp loads each whole K/V tile with two TMA boxes (64 columns each,
// from k_map / v_map) and arms the stage's full barrier with the byte count; a tile that runs
// past its segment is copied by that warp with cp.async instead, so that its missing rows are
// zeros. Without it, four warps copy with cp.async as described below;
// kRowSum — how the normaliser is added up (RowSum, above RowBlock);
// kPairedLoads — launched in clusters of two CTAs along the query tiles (same head and segment,
// so the same K/V tiles): each CTA's producer loads one of a tile's two TMA boxes and multicasts
// it into both CTAs, halving what travels from L2; a stage is free again once the consumers of
// both CTAs released it (the empty barriers count the eight consumer warps of each CTA). Needs
// kTmaLoads and an even number of query tiles.
template <bool kSkipUnitRescale, bool kQInRegisters, bool kTmaLoads, RowSum kRowSum = RowSum::rounded_alu,
          bool kPairedLoads = false>
__global__ void __launch_bounds__(kWsThreads, 1)
    flash_attention_ws_kernel(const KernelArgs args, int64_t segment_offset, const __grid_constant__ CUtensorMap k_map,
                              const __grid_constant__ CUtensorMap v_map) {
  static_assert(kTmaLoads || !kPairedLoads, "paired CTAs share tiles through TMA multicast");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const QueryTile<kWsBlockM, kBlockN, kHeadDim> work(args, segment_offset);
  if constexpr (kPairedLoads) {
    // Both CTAs of a pair leave together or neither does: a CTA whose own tile is past the
    // segment's queries still loads its half of every K/V tile for the other (and stores nothing).
    if (int64_t{blockIdx.x & ~1u} * kWsBlockM >= work.segment.q_count || work.elsewhere(args)) return;
  } else if (work.past_queries() || work.elsewhere(args)) {
    return;  // the whole CTA
  }
  const int q_valid = work.q_valid(), kv_tiles = work.kv_tiles();

  extern __shared__ unsigned char smem[];
  const uint32_t q_tile = (smem_address(smem) + 1023) & ~uint32_t{1023};
  const uint32_t k_tiles = q_tile + kWsQBytes;                  // [kWsStages]
  const uint32_t v_tiles = k_tiles + kWsStages * kKVBytes;      // [kWsStages]
  const uint32_t barriers = v_tiles + kWsStages * kKVBytes;     // 4 x [kWsStages] mbarriers
  const uint32_t ones = barriers + 128;                          // kOnesBytes
  auto k_full = [&](int stage) { return barriers + 8 * stage; };
  auto k_empty = [&](int stage) { return barriers + 8 * (kWsStages + stage); };
  auto v_full = [&](int stage) { return barriers + 8 * (2 * kWsStages + stage); };
  auto v_empty = [&](int stage) { return barriers + 8 * (3 * kWsStages + stage); };
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kWsStages; ++stage) {
      const uint32_t producers = kTmaLoads ? 1 : 64;  // the TMA lane, or both copying warps' lanes
      // Both consumers' 256 threads, or with pairs lane 0 of each consumer warp of both CTAs.
      const uint32_t consumers = kPairedLoads ? 16 : 256;
      mbarrier_init(k_full(stage), producers), mbarrier_init(v_full(stage), producers);
      mbarrier_init(k_empty(stage), consumers), mbarrier_init(v_empty(stage), consumers);
    }
  }
  if constexpr (kRowSum == RowSum::rounded_mma) {  // warps 2 and 3 write the ones, bf16 1.0 = 0x3f80
    if (threadIdx.x >= 64 && threadIdx.x < 64 + kOnesBytes / 4) {
      st_shared_4(ones + 4 * (threadIdx.x - 64), 0x3f803f80u);
      fence_proxy_async();  // visible to wgmma's operand reads
    }
  }
  if constexpr (kPairedLoads) {
    fence_mbarrier_init();  // the other CTA arrives on these barriers and multicasts into them
    cluster_sync();
  } else {
    __syncthreads();
  }

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    release_registers<40>();
    if constexpr (kTmaLoads) {
      if (threadIdx.x >= 32) return;
      const int lane = threadIdx.x;
      const uint32_t rank = kPairedLoads ? cluster_rank() : 0;
      // TMA addresses the tile by (column, row) of the whole K or V matrix; cp.async from the
      // segment's first row at this head's columns.
      const int column = work.kv_head * kHeadDim;
      auto load = [&](const CUtensorMap& map, bool keys, uint32_t tile, uint32_t full, int t) {
        const int valid = work.key_valid(t);
        if (valid == kBlockN) {
          if (lane == 0) {
            const int row = static_cast<int>(work.key_tile_row(args, t));
            mbarrier_arrive_expect_bytes(full, kKVBytes);  // both boxes, wherever they come from
            if constexpr (kPairedLoads) {  // box `rank` from here, the other from the pair
              tma_load_2d_multicast(tile + rank * kBlockN * 128, &map, column + 64 * static_cast<int>(rank), row,
                                    full, 0b11);
            } else {
              tma_load_2d(tile, &map, column, row, full);
              tma_load_2d(tile + kBlockN * 128, &map, column + 64, row, full);
            }
          }
        } else {  // (both CTAs of a pair copy their own partial tile)
          const __nv_bfloat16* base = keys ? work.k_tile(args, t) : work.v_tile(args, t);
          const int64_t stride = keys ? args.k_stride : args.v_stride;
          warp_copy_half_tile(tile, base, stride, valid, 0);
          warp_copy_half_tile(tile, base, stride, valid, 1);
          cp_async_commit();
          cp_async_wait<0>();
          fence_proxy_async();
          __syncwarp();
          if (lane == 0) mbarrier_arrive(full);
        }
      };
      for (int t = 0; t < kv_tiles; ++t) {
        const int stage = t % kWsStages, round = t / kWsStages;
        if (round > 0) mbarrier_wait(k_empty(stage), (round - 1) & 1);
        load(k_map, true, k_tiles + stage * kKVBytes, k_full(stage), t);
        if (round > 0) mbarrier_wait(v_empty(stage), (round - 1) & 1);
        load(v_map, false, v_tiles + stage * kKVBytes, v_full(stage), t);
      }
      if constexpr (kPairedLoads) {
        // The pair's consumers arrive on this CTA's empty barriers until they release their last
        // tiles: the CTA (its barriers) must outlive that, so the producer waits for every
        // stage's last release. (Whatever the other CTA multicasts here, this CTA's consumers
        // have waited for.)
        for (int t = kv_tiles > kWsStages ? kv_tiles - kWsStages : 0; t < kv_tiles; ++t) {
          mbarrier_wait(k_empty(t % kWsStages), (t / kWsStages) & 1);
          mbarrier_wait(v_empty(t % kWsStages), (t / kWsStages) & 1);
        }
      }
      return;
    }
    // Warps 0 and 1 copy K tiles, warps 2 and 3 V tiles, half a tile each. Tile t goes to stage
    // t % 3 once the consumers released tile t - 3 there (completion t / 3 - 1 of the empty
    // barrier). Two tiles are in flight: after issuing tile t a warp waits for its copies of
    // tile t - 1, makes them visible to wgmma (the async proxy) and arrives on its full barrier,
    // which completes when both warps' 64 lanes have.
    const int warp = threadIdx.x / 32;
    const bool keys = warp < 2;
    const int64_t stride = keys ? args.k_stride : args.v_stride;
    const uint32_t tiles = keys ? k_tiles : v_tiles;
    auto full = [&](int t) { return keys ? k_full(t % kWsStages) : v_full(t % kWsStages); };
    for (int t = 0; t < kv_tiles; ++t) {
      const int stage = t % kWsStages, round = t / kWsStages;
      if (round > 0) mbarrier_wait(keys ? k_empty(stage) : v_empty(stage), (round - 1) & 1);
      warp_copy_half_tile(tiles + stage * kKVBytes, keys ? work.k_tile(args, t) : work.v_tile(args, t), stride,
                          work.key_valid(t), warp % 2);
      cp_async_commit();
      if (t > 0) {
        cp_async_wait<1>();
        fence_proxy_async();
        mbarrier_arrive(full(t - 1));
      }
    }
    if (kv_tiles > 0) {
      cp_async_wait<0>();
      fence_proxy_async();
      mbarrier_arrive(full(kv_tiles - 1));
    }
    return;
  }

  claim_registers<232>();
  const int consumer = warpgroup - 1;  // 0 or 1: rows 64 consumer ..
  const int thread = threadIdx.x % 128, warp = thread / 32;
  {  // this warpgroup's Q rows (zeros in a paired CTA past the segment's queries)
    const __nv_bfloat16* q_base = q_valid > 0 ? work.q(args) : args.q;
    for (int i = thread; i < 64 * (kHeadDim / 8); i += 128) {
      const int row = consumer * 64 + i / (kHeadDim / 8), chunk = i % (kHeadDim / 8);
      const bool inside = row < q_valid;
      cp_async_16(q_tile + swizzled_offset<kWsBlockM>(row, chunk),
                  inside ? q_base + row * args.q_stride + chunk * 8 : q_base, inside ? 16 : 0);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    named_barrier_sync(3 + consumer, 128);
  }
  uint32_t q_fragments[kHeadDim / 16][4];  // k16 step kk: the A fragment of this warp's 16 rows
  if constexpr (kQInRegisters) {
    const int lane = thread % 32, row = consumer * 64 + warp * 16 + lane % 16;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      ldmatrix_x4(q_fragments[kk], q_tile + swizzled_offset<kWsBlockM>(row, 2 * kk + lane / 16));
    }
  }
  RowBlock rows(args.scale_log2);
  const uint64_t q_descriptor = smem_descriptor(q_tile + consumer * 64 * 128, 16, 1024);
  auto k_descriptor = [&](int t) { return smem_descriptor(k_tiles, 16, 1024) + (t % kWsStages) * (kKVBytes >> 4); };
  auto v_descriptor = [&](int t) {
    return smem_descriptor(v_tiles, kBlockN * 128, 1024) + (t % kWsStages) * (kKVBytes >> 4);
  };
  auto landed = [&](int t) { return static_cast<uint32_t>((t / kWsStages) & 1); };
  // Both k16 halves and the one 8-column group read the same 128 bytes of ones, whichever offset
  // the hardware takes for which (each is 128 bytes, inside the 256 written).
  const uint64_t ones_descriptor = smem_descriptor_unswizzled(ones, 128, 128);
  auto issue_values = [&](int t) { rows.issue_values<kRowSum>(v_descriptor(t), ones_descriptor); };
  auto fence_accumulators = [&] {
    fence_registers(rows.o);
    if constexpr (kRowSum == RowSum::rounded_mma) fence_registers(rows.l);
  };
  // A stage's MMAs have completed: tell its producer(s).
  auto release = [&](uint32_t empty) {
    if constexpr (kPairedLoads) {
      if (thread % 32 == 0) mbarrier_arrive_in_cta(empty, 0), mbarrier_arrive_in_cta(empty, 1);
    } else {
      mbarrier_arrive(empty);
    }
  };
  auto issue_scores = [&](int t) {
    if constexpr (kQInRegisters) {
      rows.issue_scores(q_fragments, k_descriptor(t));
    } else {
      rows.issue_scores<kWsBlockM>(q_descriptor, k_descriptor(t));
    }
  };
  // Turns: named barrier 1 + c is consumer c's. A turn begins with bar.sync on one's own barrier
  // and ends with bar.arrive on the other's; consumer 1 opens consumer 0's first turn. Both take
  // kv_tiles + 1 turns, and consumer 1 does not hand over after its last, so no arrival is left.
  const uint32_t my_turn = 1 + consumer, their_turn = 2 - consumer;
  if (kv_tiles > 0) {
    if (consumer == 1) named_barrier_arrive(1, 256);
    mbarrier_wait(k_full(0), 0);
    named_barrier_sync(my_turn, 256);
    wgmma_fence();
    issue_scores(0);
    named_barrier_arrive(their_turn, 256);
    wgmma_wait<0>();
    fence_registers(rows.s);
    release(k_empty(0));
    rows.exponentiate(work.key_valid(0));
    rows.round_and_rescale<kSkipUnitRescale, kRowSum>();
  }
  for (int t = 1; t < kv_tiles; ++t) {
    mbarrier_wait(k_full(t % kWsStages), landed(t));
    mbarrier_wait(v_full((t - 1) % kWsStages), landed(t - 1));
    named_barrier_sync(my_turn, 256);
    wgmma_fence();
    issue_scores(t);
    issue_values(t - 1);
    named_barrier_arrive(their_turn, 256);
    wgmma_wait<1>();  // S of tile t; P V of tile t - 1 still runs
    fence_registers(rows.s);
    release(k_empty(t % kWsStages));
    rows.exponentiate(work.key_valid(t));
    wgmma_wait<0>();  // P V of tile t - 1
    fence_accumulators();
    release(v_empty((t - 1) % kWsStages));
    rows.round_and_rescale<kSkipUnitRescale, kRowSum>();
  }
  if (kv_tiles > 0) {
    mbarrier_wait(v_full((kv_tiles - 1) % kWsStages), landed(kv_tiles - 1));
    named_barrier_sync(my_turn, 256);
    wgmma_fence();
    issue_values(kv_tiles - 1);
    if (consumer == 0) named_barrier_arrive(their_turn, 256);
    wgmma_wait<0>();
    fence_accumulators();
    release(v_empty((kv_tiles - 1) % kWsStages));  // (a paired producer waits for it)
  }
  if (consumer * 64 >= q_valid) return;
  rows.store<kWsBlockM, kRowSum>(q_tile, consumer * 64 + warp * 16, q_valid, work.out(args), args.out_stride);
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a features: never launched (hopper_attention_available)
#endif
}

template <int kGroups, bool kOverlap>
void launch(const AttentionArgs& args, cudaStream_t stream) {
  const KernelArgs kernel_args = kernel_args_of(args);

  using T = Tiling<kGroups>;
  static std::atomic<uint64_t> configured{0};
  raise_shared_limit(reinterpret_cast<const void*>(flash_attention_wgmma_kernel<kGroups, kOverlap>),
                     T::kSharedBytes, configured);
  const int64_t q_tiles = (args.max_q_rows + T::kBlockM - 1) / T::kBlockM;
  for (int64_t first = 0; first < args.segment_count; first += kMaxGridZ) {
    const dim3 grid(static_cast<unsigned>(q_tiles), static_cast<unsigned>(args.q_heads),
                    static_cast<unsigned>(std::min(kMaxGridZ, args.segment_count - first)));
    flash_attention_wgmma_kernel<kGroups, kOverlap>
        <<<grid, T::kThreads, T::kSharedBytes, stream>>>(kernel_args, first);
    MOSAIC_CUDA_CHECK_LAUNCH();
  }
}

// Rows a tensor map of K or V declares. The host does not know the buffers' row counts (the
// segments live on the device), and need not: TMA loads only whole tiles, which lie inside their
// segment, so the bound just has to exceed every row a segment names (coordinates are 32-bit).
constexpr uint64_t kTensorMapRows = uint64_t{1} << 31;

// The launch configuration of the paired kernel: clusters of two CTAs along x.
struct PairedLaunchConfig : PairLaunchConfig {
  PairedLaunchConfig(dim3 grid, cudaStream_t stream)
      : PairLaunchConfig(grid, dim3(kWsThreads), kWsSharedBytes, stream) {}
};

// Query tiles of the warp-specialised kernel's grid (its x extent).
int64_t ws_query_tiles(const AttentionArgs& args) { return (args.max_q_rows + kWsBlockM - 1) / kWsBlockM; }

// One combination of flash_attention_ws_kernel's switches: the kernel and its launch (with
// kPairedLoads, in clusters of two CTAs; the query tiles must then be even in number).
template <bool kSkipUnitRescale, bool kQInRegisters, bool kTmaLoads, RowSum kRowSum = RowSum::rounded_alu,
          bool kPairedLoads = false>
struct WsVariant {
  static constexpr auto kernel =
      flash_attention_ws_kernel<kSkipUnitRescale, kQInRegisters, kTmaLoads, kRowSum, kPairedLoads>;

  // Lets the kernel use its shared memory on the current device (once per device).
  static void configure() {
    static std::atomic<uint64_t> configured{0};
    raise_shared_limit(reinterpret_cast<const void*>(kernel), kWsSharedBytes, configured);
  }

  static void launch(const AttentionArgs& args, cudaStream_t stream) {
    const KernelArgs kernel_args = kernel_args_of(args);
    CUtensorMap k_map{}, v_map{};
    if constexpr (kTmaLoads) {
      const uint64_t columns = static_cast<uint64_t>(args.kv_heads * kHeadDim);
      k_map = bf16_row_major_map(args.k, columns, kTensorMapRows, static_cast<uint64_t>(args.k_stride), 64, kBlockN);
      v_map = bf16_row_major_map(args.v, columns, kTensorMapRows, static_cast<uint64_t>(args.v_stride), 64, kBlockN);
    }
    configure();
    const int64_t q_tiles = ws_query_tiles(args);
    if (kPairedLoads && q_tiles % 2 != 0) {
      throw std::logic_error("paired attention CTAs need an even number of query tiles");
    }
    for (int64_t first = 0; first < args.segment_count; first += kMaxGridZ) {
      const dim3 grid(static_cast<unsigned>(q_tiles), static_cast<unsigned>(args.q_heads),
                      static_cast<unsigned>(std::min(kMaxGridZ, args.segment_count - first)));
      if constexpr (kPairedLoads) {
        const PairedLaunchConfig launch(grid, stream);
        MOSAIC_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, kernel_args, first, k_map, v_map));
      } else {
        kernel<<<grid, kWsThreads, kWsSharedBytes, stream>>>(kernel_args, first, k_map, v_map);
      }
      MOSAIC_CUDA_CHECK_LAUNCH();
    }
  }
};

// The engine's variants, every switch on (dev/cuda/attention_bench.cu measures the others):
// hopper_attention() launches them and device_runs_wgmma_kernel() asks whether this binary holds
// them. Which one a row lands in changes none of its bits.
// (RowSum::rounded_mma, the normaliser on the tensor cores, ran 4-6 % slower in the workbench and
// made LLaDA-8B's 16k and 32k steps ~1.5 % slower: the kernel is bound by the tensor pipe, not by
// the ALU's adds; docs/design/cuda-kernels.md, v8.)
using EngineVariant = WsVariant<true, true, true, RowSum::unrounded_alu>;
using EnginePairedVariant = WsVariant<true, true, true, RowSum::unrounded_alu, true>;

// Pairs pay where the GPU runs at its power limit, which halving the K/V traffic from L2 eases:
// LLaDA-8B steps 1.1 % faster at 32k and 0.6 % at 16k, but 0.7 % slower at 4k, where a pair's
// two CTAs, each short, wait for one another (and for two free SMs of one GPC) more than the
// traffic costs (docs/design/cuda-kernels.md).
constexpr int64_t kMinPairedQueryTiles = 64;

// Pairs of the paired kernel's CTAs the current device runs at once (0 when it cannot say): a
// cluster of two CTAs with 225 KiB of shared memory each needs two free SMs of one GPC, which a
// MIG slice or a smaller part need not offer.
int paired_clusters_on_device() {
  EnginePairedVariant::configure();
  const PairedLaunchConfig launch(dim3(2, 1, 1), nullptr);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, EnginePairedVariant::kernel, &launch.config) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return clusters;
}

// Whether the current device runs pairs at all, asked once per device: without, every call runs
// unpaired (a paired launch would fail).
bool device_holds_a_pair() {
  static std::atomic<uint64_t> asked{0}, answers{0};
  return once_per_device(asked, answers, [](int) { return paired_clusters_on_device() > 0; });
}

void launch_engine_variant(const AttentionArgs& args, cudaStream_t stream) {
  const int64_t q_tiles = ws_query_tiles(args);
  const bool many_tiles = q_tiles >= kMinPairedQueryTiles || args.kernel == AttentionKernel::hopper_paired;
  if (q_tiles % 2 == 0 && many_tiles && device_holds_a_pair()) {
    EnginePairedVariant::launch(args, stream);
  } else {
    EngineVariant::launch(args, stream);
  }
}

bool device_runs_wgmma_kernel(int device) {
  return device_runs_sm90a_kernel(device, reinterpret_cast<const void*>(EngineVariant::kernel)) &&
         device_runs_sm90a_kernel(device, reinterpret_cast<const void*>(EnginePairedVariant::kernel));
}

}  // namespace
}  // namespace hopper

bool hopper_attention_available() {
  static std::atomic<uint64_t> asked{0}, available{0};
  return once_per_device(asked, available, hopper::device_runs_wgmma_kernel);
}

void hopper_attention(const AttentionArgs& args, cudaStream_t stream) {
  // attention() has checked what TMA needs too: 16-byte aligned rows (base and stride).
  hopper::launch_engine_variant(args, stream);
}

}  // namespace mosaic::cuda
