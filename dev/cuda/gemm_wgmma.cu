// Workbench: a hand-written Hopper GEMM against cuBLASLt, to learn whether the gate/up product
// could carry SwiGLU in its epilogue (docs/design/cuda-kernels.md, "A hand-written GEMM for SwiGLU
// in the epilogue"). C [M x N] = A [M x K] B [N x K]^T in bf16 with fp32 accumulation, as the
// engine's projections (activations times nn.Linear weights).
//
//   nvcc -std=c++20 -arch=sm_90a -O3 --expt-relaxed-constexpr -Isrc -Iinclude \
//        dev/cuda/gemm_wgmma.cu -lcublasLt -o /tmp/gemm_wgmma && /tmp/gemm_wgmma [rounds]
//
// The kernel: CTA tiles of 128 x 256 with K steps of 64; a producer lane loads A and B tiles with
// TMA into 4 mbarrier-guarded stages (48 KiB each); two consumer warpgroups issue
// wgmma.m64n256k16 on 64 rows each, one MMA group in flight; tiles rastered in groups of 8 row
// tiles (or row-tile pairs) so that concurrent CTAs share B tiles in L2. Switches: kPaired (v2)
// runs clusters of two CTAs on neighbouring row tiles that multicast halves of the shared B
// tile; kStaged (v3) stages the epilogue in shared memory for 16-byte stores (v1: 4-byte stores
// from the accumulator layout). gemm_pingpong_kernel (v4) is persistent, its two consumer
// warpgroups taking 128 x 128 tiles in turn so that one's epilogue runs under the other's MMAs;
// gemm_epilogue_warps_kernel (v5) is persistent with v3's tiles, the consumers staging bf16
// results and the producer warpgroup's idle warps storing them under the next tile's MMAs. With kSwiglu, B's rows are interleaved in blocks of 128 (gate
// rows, then the matching up rows) and the epilogue writes silu(g) u over 128 output columns per
// tile, g and u rounded to bf16 first as the separate products would be.
//
// It prints, per shape: cuBLASLt's time and each variant's, plain and fused, against cuBLASLt's
// separate gate and up products plus the engine's SwiGLU kernel, and how many outputs differ
// from cuBLASLt's (plain) or from that unfused path (fused). It uses the engine's Hopper PTX
// helpers (backend/cuda/sm90_ptx.cuh) and includes elementwise.cu for its SwiGLU kernel.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.cu"
#include "backend/cuda/sm90_ptx.cuh"
#include "backend/cuda/swiglu_math.cuh"
#include "backend/cuda/tensor_map.cc"
#include "bench_timing.cuh"

#include <cublasLt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "core/half.h"

#define CHECK_BLAS(call)                                                                          \
  do {                                                                                            \
    const cublasStatus_t status_ = (call);                                                        \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                                       \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cublasLtGetStatusName(status_));     \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

namespace mosaic::cuda::gemm_bench {

using namespace ptx;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
using namespace sm90;
#endif

using bf16 = __nv_bfloat16;
constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kGroupM = 8;
constexpr uint32_t kABytes = kBM * kBK * 2, kBBytes = kBN * kBK * 2, kStageBytes = kABytes + kBBytes;
constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 2 * kStages * 8;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// SwiGLU of two fp32 accumulators, each rounded to bf16 first as the separate products' outputs
// would be: the unfused path's bits.
__device__ __forceinline__ float swiglu_of_accumulators(float g, float u) {
  return silu_times(__bfloat162float(__float2bfloat16_rn(g)), __bfloat162float(__float2bfloat16_rn(u)));
}

// The barriers initialised by thread 0 become visible to the CTA (paired: to both CTAs of the
// cluster, which arrive on each other's barriers and multicast into each other's stages).
template <bool kPaired>
__device__ __forceinline__ void publish_barriers() {
  if constexpr (kPaired) {
    fence_mbarrier_init();
    cluster_sync();
  } else {
    __syncthreads();
  }
}

// A consumer warp's release of a stage: on this CTA's empty barrier, or (paired) on both CTAs'.
template <bool kPaired>
__device__ __forceinline__ void release_stage(uint32_t bar) {
  if constexpr (kPaired) {
    mbarrier_arrive_in_cta(bar, 0), mbarrier_arrive_in_cta(bar, 1);
  } else {
    mbarrier_arrive(bar);
  }
}
#endif

// The tile of work unit `unit`: units are row tiles (paired: pairs of neighbouring row tiles, the
// CTA of rank `rank` taking the first or second) by column tiles, rastered in groups of kGroupM
// row units that walk the column tiles together, so that concurrent CTAs share B tiles in L2.
struct TileRaster {
  int m_units, n_tiles;
  bool paired;
  uint32_t rank;
  __device__ __forceinline__ void tile(int unit, int* m_tile, int* n_tile) const {
    const int per_group = kGroupM * n_tiles, group = unit / per_group;
    const int first_m = group * kGroupM, group_rows = min(kGroupM, m_units - first_m);
    const int in_group = unit % per_group;
    const int m_unit = first_m + in_group % group_rows;
    *n_tile = in_group / group_rows;
    *m_tile = paired ? 2 * m_unit + static_cast<int>(rank) : m_unit;
  }
};

// kPaired (v2): clusters of two CTAs on neighbouring row tiles and the same column tile; each
// loads half of the B tile (128 rows, b_map's box) and multicasts it into both, so that what
// travels from L2 per CTA and K step falls from 48 to 32 KiB; a stage is free again once the
// consumer warps of both CTAs released it.
// kStaged (v3): the epilogue goes through shared memory (below) instead of 4-byte stores.
template <bool kSwiglu, bool kPaired, bool kStaged>
__global__ void __launch_bounds__(384, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map, bf16* c,
                int64_t ldc, int m_tiles, int n_tiles, int k_tiles) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const uint32_t rank = kPaired ? cluster_rank() : 0;
  const TileRaster raster{kPaired ? m_tiles / 2 : m_tiles, n_tiles, kPaired, rank};
  int m_tile, n_tile;
  raster.tile(kPaired ? static_cast<int>(blockIdx.x) / 2 : static_cast<int>(blockIdx.x), &m_tile, &n_tile);

  extern __shared__ unsigned char smem[];
  const uint32_t base = (smem_address(smem) + 1023) & ~uint32_t{1023};
  auto a_stage = [&](int s) { return base + s * kStageBytes; };
  auto b_stage = [&](int s) { return base + s * kStageBytes + kABytes; };
  const uint32_t bars = base + kStages * kStageBytes;
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (kStages + s); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbarrier_init(full(s), 1), mbarrier_init(empty(s), kPaired ? 16 : 8);
  }
  publish_barriers<kPaired>();
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    release_registers<40>();
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % kStages, round = kt / kStages;
        if (round > 0) mbarrier_wait(empty(s), (round - 1) & 1);
        mbarrier_arrive_expect_bytes(full(s), kStageBytes);
        tma_load_2d(a_stage(s), &a_map, kt * kBK, m_tile * kBM, full(s));
        if constexpr (kPaired) {
          tma_load_2d_multicast(b_stage(s) + rank * (kBBytes / 2), &b_map, kt * kBK,
                                n_tile * kBN + static_cast<int>(rank) * (kBN / 2), full(s), 0b11);
        } else {
          tma_load_2d(b_stage(s), &b_map, kt * kBK, n_tile * kBN, full(s));
        }
      }
      if constexpr (kPaired) {  // the other CTA arrives on these barriers until its last release
        for (int kt = k_tiles > kStages ? k_tiles - kStages : 0; kt < k_tiles; ++kt)
          mbarrier_wait(empty(kt % kStages), (kt / kStages) & 1);
      }
    }
    return;
  }
  claim_registers<232>();
  const int consumer = warpgroup - 1;
  auto release = [](uint32_t bar) { release_stage<kPaired>(bar); };
  // No zeroing: the first MMA ignores d (scale-d 0), so no ordinary instruction writes the
  // accumulators inside the MMA pipeline (ptxas would serialise every wgmma).
  float d[128];
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % kStages;
    mbarrier_wait(full(s), (kt / kStages) & 1);
    const uint64_t a = smem_descriptor(a_stage(s) + consumer * 64 * 128, 16, 1024);
    const uint64_t b = smem_descriptor(b_stage(s), 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) wgmma_m64n256k16_ss(d, a + 2 * kk, b + 2 * kk, kt > 0 || kk > 0);
    wgmma_commit();
    wgmma_wait<1>();  // the previous step's MMAs are done: release its stage
    if (kt > 0 && threadIdx.x % 32 == 0) release(empty((kt - 1) % kStages));
  }
  wgmma_wait<0>();
  fence_registers(d);
  if (threadIdx.x % 32 == 0) release(empty((k_tiles - 1) % kStages));
  // Accumulator layout (per warp the m16n8 layout, 32 n8 tiles): d[4j + e] is row lane / 4
  // (+ 8 for e >= 2) of the warp's 16, column 8j + 2 (lane % 4) + (e & 1).
  const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t{m_tile} * kBM + consumer * 64 + warp * 16 + lane / 4;
  constexpr auto swiglu = swiglu_of_accumulators;
  if constexpr (kStaged) {
    // This warp's 16 rows go through its consumer's rows of A stage `warp` (8 KiB that only this
    // consumer's MMAs read, all completed; every TMA write has landed), 16-byte chunk j of row r
    // at chunk j ^ (r & 7) (no bank conflicts either way), then out 16 bytes per lane.
    constexpr int kOutCols = kSwiglu ? kBN / 2 : kBN, kChunks = kOutCols / 8, kRowBytes = kOutCols * 2;
    const uint32_t staging = a_stage(warp) + consumer * 64 * 128;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = lane / 4 + 8 * half;
        uint32_t packed;
        if constexpr (kSwiglu) {
          const float* g = d + 4 * j + 2 * half;
          const float* u = d + 4 * (j + 16) + 2 * half;
          packed = pack_bf16x2(swiglu(g[0], u[0]), swiglu(g[1], u[1]));
        } else {
          packed = pack_bf16x2(d[4 * j + 2 * half], d[4 * j + 2 * half + 1]);
        }
        st_shared_4(staging + r * kRowBytes + ((j ^ (r & 7)) * 16) + (lane % 4) * 4, packed);
      }
    }
    __syncwarp();
    bf16* out = c + (int64_t{m_tile} * kBM + consumer * 64 + warp * 16) * ldc + int64_t{n_tile} * kOutCols;
    constexpr int kRowsPerPass = 32 / kChunks;
#pragma unroll
    for (int i = 0; i < 16 / kRowsPerPass; ++i) {
      const int r = i * kRowsPerPass + lane / kChunks, chunk = lane % kChunks;
      const uint4 value = ld_shared_16(staging + r * kRowBytes + ((chunk ^ (r & 7)) * 16));
      *reinterpret_cast<uint4*>(out + r * ldc + chunk * 8) = value;
    }
  } else if constexpr (!kSwiglu) {
    bf16* out = c + row * ldc + int64_t{n_tile} * kBN + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      *reinterpret_cast<__nv_bfloat162*>(out + 8 * j) = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
      *reinterpret_cast<__nv_bfloat162*>(out + 8 * ldc + 8 * j) = __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
    }
  } else {
    bf16* out = c + row * ldc + int64_t{n_tile} * (kBN / 2) + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float* g = d + 4 * j;
      const float* u = d + 4 * (j + 16);
      *reinterpret_cast<__nv_bfloat162*>(out + 8 * j) =
          __floats2bfloat162_rn(swiglu(g[0], u[0]), swiglu(g[1], u[1]));
      *reinterpret_cast<__nv_bfloat162*>(out + 8 * ldc + 8 * j) =
          __floats2bfloat162_rn(swiglu(g[2], u[2]), swiglu(g[3], u[3]));
    }
  }
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}

template <bool kSwiglu, bool kPaired = false, bool kStaged = false>
void launch(const bf16* a, const bf16* b, bf16* c, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  const CUtensorMap a_map = bf16_row_major_map(a, k, m, k, kBK, kBM);
  const CUtensorMap b_map = bf16_row_major_map(b, k, n, k, kBK, kPaired ? kBN / 2 : kBN);
  static bool configured = false;
  const auto kernel = gemm_kernel<kSwiglu, kPaired, kStaged>;
  if (!configured) {
    MOSAIC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    configured = true;
  }
  const int m_tiles = static_cast<int>(m / kBM), n_tiles = static_cast<int>(n / kBN), k_tiles = static_cast<int>(k / kBK);
  const int64_t ldc = kSwiglu ? n / 2 : n;
  if constexpr (kPaired) {
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 2, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(m_tiles * n_tiles), config.blockDim = dim3(384), config.dynamicSmemBytes = kSmemBytes;
    config.stream = stream, config.attrs = &cluster, config.numAttrs = 1;
    MOSAIC_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, a_map, b_map, c, ldc, m_tiles, n_tiles, k_tiles));
  } else {
    kernel<<<m_tiles * n_tiles, 384, kSmemBytes, stream>>>(a_map, b_map, c, ldc, m_tiles, n_tiles, k_tiles);
  }
  MOSAIC_CUDA_CHECK_LAUNCH();
}

// ---- v4: persistent, ping-pong ------------------------------------------------------------------
// Each consumer warpgroup owns whole 128 x 128 tiles (two m64n128k16 per k16 step, 128
// accumulators) and the two take every other tile of the CTA's sequence; the producer fills one
// ring of stages (A 128 x 64, B 128 x 64: 32 KiB) tile after tile, so a warpgroup's MMAs start
// as the other's end and its epilogue (staged in its own 32 KiB) runs under the other's MMAs.
// Persistent: one CTA per SM walks tiles tile += gridDim; with kPaired, clusters of two CTAs on
// neighbouring row tiles multicast halves of the shared B tile. With kSwiglu, B's rows are
// interleaved in blocks of 64 (gate, then up) and a tile writes 64 output columns.
constexpr int kPBM = 128, kPBN = 128, kPStages = 4;
constexpr uint32_t kPABytes = kPBM * kBK * 2, kPBBytes = kPBN * kBK * 2, kPStageBytes = kPABytes + kPBBytes;
constexpr uint32_t kPStagingBytes = kPBM * kPBN * 2;  // per consumer
constexpr int kPSmemBytes = 1024 + kPStages * kPStageBytes + 2 * kPStagingBytes + 2 * kPStages * 8;

template <bool kSwiglu, bool kPaired>
__global__ void __launch_bounds__(384, 1)
    gemm_pingpong_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                         bf16* c, int64_t ldc, int m_tiles, int n_tiles, int k_tiles) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int m_units = kPaired ? m_tiles / 2 : m_tiles, units = m_units * n_tiles;
  const int first_unit = kPaired ? static_cast<int>(blockIdx.x) / 2 : static_cast<int>(blockIdx.x);
  if (first_unit >= units) return;  // (both CTAs of a pair)
  const int unit_stride = kPaired ? static_cast<int>(gridDim.x) / 2 : static_cast<int>(gridDim.x);
  const uint32_t rank = kPaired ? cluster_rank() : 0;
  const TileRaster raster{m_units, n_tiles, kPaired, rank};
  auto tile_of = [&](int unit, int* m_tile, int* n_tile) { raster.tile(unit, m_tile, n_tile); };

  extern __shared__ unsigned char smem[];
  const uint32_t base = (smem_address(smem) + 1023) & ~uint32_t{1023};
  auto a_stage = [&](int s) { return base + s * kPStageBytes; };
  auto b_stage = [&](int s) { return base + s * kPStageBytes + kPABytes; };
  const uint32_t staging0 = base + kPStages * kPStageBytes;
  const uint32_t bars = staging0 + 2 * kPStagingBytes;
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (kPStages + s); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kPStages; ++s) mbarrier_init(full(s), 1), mbarrier_init(empty(s), kPaired ? 8 : 4);
  }
  publish_barriers<kPaired>();
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    release_registers<40>();
    if (threadIdx.x == 0) {
      int64_t g = 0;  // k steps loaded so far, over all tiles
      for (int unit = first_unit; unit < units; unit += unit_stride) {
        int m_tile, n_tile;
        tile_of(unit, &m_tile, &n_tile);
        for (int kt = 0; kt < k_tiles; ++kt, ++g) {
          const int s = static_cast<int>(g % kPStages);
          const int64_t round = g / kPStages;
          if (round > 0) mbarrier_wait(empty(s), static_cast<uint32_t>((round - 1) & 1));
          mbarrier_arrive_expect_bytes(full(s), kPStageBytes);
          tma_load_2d(a_stage(s), &a_map, kt * kBK, m_tile * kPBM, full(s));
          if constexpr (kPaired) {
            tma_load_2d_multicast(b_stage(s) + rank * (kPBBytes / 2), &b_map, kt * kBK,
                                  n_tile * kPBN + static_cast<int>(rank) * (kPBN / 2), full(s), 0b11);
          } else {
            tma_load_2d(b_stage(s), &b_map, kt * kBK, n_tile * kPBN, full(s));
          }
        }
      }
      if constexpr (kPaired) {  // the other CTA arrives on these barriers until its last release
        for (int64_t last = g > kPStages ? g - kPStages : 0; last < g; ++last)
          mbarrier_wait(empty(static_cast<int>(last % kPStages)), static_cast<uint32_t>((last / kPStages) & 1));
      }
    }
    return;
  }
  claim_registers<232>();
  const int consumer = warpgroup - 1;
  const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  auto release = [](uint32_t bar) { release_stage<kPaired>(bar); };
  constexpr auto swiglu = swiglu_of_accumulators;
  const uint32_t staging = staging0 + consumer * kPStagingBytes;
  // Turns (named barrier 1 + c is consumer c's): a consumer waits for the stages of its tile only
  // after the other has waited for all of the previous tile's. Without them a consumer could test
  // a stage's full barrier one phase early, while the previous tile's use of that stage has not
  // landed, and take the parity as done. Consumer 1 opens consumer 0's first turn; a consumer
  // hands over only where the other has a tile left, so no arrival is left at exit.
  const uint32_t my_turn = 1 + consumer, their_turn = 2 - consumer;
  if (consumer == 1) named_barrier_arrive(1, 256);
  float d0[64], d1[64];  // rows 0..63 and 64..127 of the tile
  int local = 0;         // the CTA's tile number
  for (int unit = first_unit; unit < units; unit += unit_stride, ++local) {
    if (local % 2 != consumer) continue;
    int m_tile, n_tile;
    tile_of(unit, &m_tile, &n_tile);
    const int64_t g0 = int64_t{local} * k_tiles;
    named_barrier_sync(my_turn, 256);
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int64_t g = g0 + kt;
      const int s = static_cast<int>(g % kPStages);
      mbarrier_wait(full(s), static_cast<uint32_t>((g / kPStages) & 1));
      const uint64_t a0 = smem_descriptor(a_stage(s), 16, 1024), a1 = smem_descriptor(a_stage(s) + 64 * 128, 16, 1024);
      const uint64_t b = smem_descriptor(b_stage(s), 16, 1024);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        wgmma_m64n128k16_ss(d0, a0 + 2 * kk, b + 2 * kk, kt > 0 || kk > 0);
        wgmma_m64n128k16_ss(d1, a1 + 2 * kk, b + 2 * kk, kt > 0 || kk > 0);
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (kt > 0 && lane == 0) release(empty(static_cast<int>((g - 1) % kPStages)));
    }
    if (unit + unit_stride < units) named_barrier_arrive(their_turn, 256);
    wgmma_wait<0>();
    fence_registers(d0);
    fence_registers(d1);
    if (lane == 0) release(empty(static_cast<int>((g0 + k_tiles - 1) % kPStages)));
    // Epilogue: this warp's 32 rows (16 of each half) through its quarter of the consumer's
    // staging (chunk j of row r at j ^ (r & 7)), then 16 bytes per lane.
    constexpr int kOutCols = kSwiglu ? kPBN / 2 : kPBN, kChunks = kOutCols / 8, kRowBytes = kOutCols * 2;
    const uint32_t mine = staging + warp * 32 * kRowBytes;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* d = h == 0 ? d0 : d1;
#pragma unroll
      for (int j = 0; j < kChunks; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = 16 * h + lane / 4 + 8 * half;
          uint32_t packed;
          if constexpr (kSwiglu) {
            const float* gate = d + 4 * j + 2 * half;
            const float* up = d + 4 * (j + 8) + 2 * half;
            packed = pack_bf16x2(swiglu(gate[0], up[0]), swiglu(gate[1], up[1]));
          } else {
            packed = pack_bf16x2(d[4 * j + 2 * half], d[4 * j + 2 * half + 1]);
          }
          st_shared_4(mine + r * kRowBytes + ((j ^ (r & 7)) * 16) + (lane % 4) * 4, packed);
        }
      }
    }
    __syncwarp();
    constexpr int kRowsPerPass = 32 / kChunks;
#pragma unroll
    for (int i = 0; i < 32 / kRowsPerPass; ++i) {
      const int r = i * kRowsPerPass + lane / kChunks, chunk = lane % kChunks;
      const int tile_row = (r / 16) * 64 + warp * 16 + r % 16;  // staging row r: half r / 16
      const uint4 value = ld_shared_16(mine + r * kRowBytes + ((chunk ^ (r & 7)) * 16));
      *reinterpret_cast<uint4*>(c + (int64_t{m_tile} * kPBM + tile_row) * ldc + int64_t{n_tile} * kOutCols + chunk * 8) =
          value;
    }
    __syncwarp();  // the next tile rewrites the staging
  }
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}

template <bool kSwiglu, bool kPaired>
void launch_pingpong(const bf16* a, const bf16* b, bf16* c, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  const CUtensorMap a_map = bf16_row_major_map(a, k, m, k, kBK, kPBM);
  const CUtensorMap b_map = bf16_row_major_map(b, k, n, k, kBK, kPaired ? kPBN / 2 : kPBN);
  static bool configured = false;
  const auto kernel = gemm_pingpong_kernel<kSwiglu, kPaired>;
  static int sms = 0;
  if (!configured) {
    MOSAIC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kPSmemBytes));
    MOSAIC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    configured = true;
  }
  const int m_tiles = static_cast<int>(m / kPBM), n_tiles = static_cast<int>(n / kPBN), k_tiles = static_cast<int>(k / kBK);
  const int64_t ldc = kSwiglu ? n / 2 : n;
  const int ctas = std::min(m_tiles * n_tiles, sms / 2 * 2);
  if constexpr (kPaired) {
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 2, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(ctas), config.blockDim = dim3(384), config.dynamicSmemBytes = kPSmemBytes;
    config.stream = stream, config.attrs = &cluster, config.numAttrs = 1;
    MOSAIC_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, a_map, b_map, c, ldc, m_tiles, n_tiles, k_tiles));
  } else {
    kernel<<<ctas, 384, kPSmemBytes, stream>>>(a_map, b_map, c, ldc, m_tiles, n_tiles, k_tiles);
  }
  MOSAIC_CUDA_CHECK_LAUNCH();
}

// ---- v5: persistent, 128 x 256 tiles, the epilogue on the producer warpgroup's idle warps --------
// The consumers (as in v3: two warpgroups, 64 rows each of a 128 x 256 tile, paired CTAs
// multicasting B) round their accumulators to bf16 into 64 KiB of staging and go on with the
// next tile; warps 1-3 of the producer warpgroup store the staged tile (with kSwiglu: silu(g) u
// of its g and u halves) while the next tile's MMAs run. 3 stages of 48 KiB.
constexpr int kEStages = 3;
constexpr uint32_t kEStagingBytes = kBM * kBN * 2;
constexpr int kESmemBytes = 1024 + kEStages * kStageBytes + kEStagingBytes + (2 * kEStages + 2) * 8;

template <bool kSwiglu>
__global__ void __launch_bounds__(384, 1)
    gemm_epilogue_warps_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                               bf16* c, int64_t ldc, int m_tiles, int n_tiles, int k_tiles) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int m_units = m_tiles / 2, units = m_units * n_tiles;
  const int first_unit = static_cast<int>(blockIdx.x) / 2, unit_stride = static_cast<int>(gridDim.x) / 2;
  if (first_unit >= units) return;  // (both CTAs of a pair)
  const uint32_t rank = cluster_rank();
  const TileRaster raster{m_units, n_tiles, true, rank};
  auto tile_of = [&](int unit, int* m_tile, int* n_tile) { raster.tile(unit, m_tile, n_tile); };
  extern __shared__ unsigned char smem[];
  const uint32_t base = (smem_address(smem) + 1023) & ~uint32_t{1023};
  auto a_stage = [&](int s) { return base + s * kStageBytes; };
  auto b_stage = [&](int s) { return base + s * kStageBytes + kABytes; };
  const uint32_t staging = base + kEStages * kStageBytes;
  const uint32_t bars = staging + kEStagingBytes;
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (kEStages + s); };
  const uint32_t staged = bars + 8 * (2 * kEStages), drained = staged + 8;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kEStages; ++s) mbarrier_init(full(s), 1), mbarrier_init(empty(s), 16);
    mbarrier_init(staged, 8), mbarrier_init(drained, 3);
  }
  publish_barriers<true>();
  constexpr int kRowBytes = kBN * 2;  // staging row: 256 bf16, 16-byte chunk j at j ^ (r & 7)
  const int warpgroup = threadIdx.x / 128, warp_in_group = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  if (warpgroup == 0) {
    release_registers<56>();
    if (warp_in_group == 0) {  // the producer
      if (lane == 0) {
        int64_t g = 0;
        for (int unit = first_unit; unit < units; unit += unit_stride) {
          int m_tile, n_tile;
          tile_of(unit, &m_tile, &n_tile);
          for (int kt = 0; kt < k_tiles; ++kt, ++g) {
            const int s = static_cast<int>(g % kEStages);
            const int64_t round = g / kEStages;
            if (round > 0) mbarrier_wait(empty(s), static_cast<uint32_t>((round - 1) & 1));
            mbarrier_arrive_expect_bytes(full(s), kStageBytes);
            tma_load_2d(a_stage(s), &a_map, kt * kBK, m_tile * kBM, full(s));
            tma_load_2d_multicast(b_stage(s) + rank * (kBBytes / 2), &b_map, kt * kBK,
                                  n_tile * kBN + static_cast<int>(rank) * (kBN / 2), full(s), 0b11);
          }
        }
        for (int64_t last = g > kEStages ? g - kEStages : 0; last < g; ++last)
          mbarrier_wait(empty(static_cast<int>(last % kEStages)), static_cast<uint32_t>((last / kEStages) & 1));
      }
      return;
    }
    // The epilogue: 96 threads store each staged tile.
    const int t = threadIdx.x - 32;
    constexpr int kOutChunks = kSwiglu ? kBN / 16 : kBN / 8;  // 16-byte chunks of an output row
    int local = 0;
    for (int unit = first_unit; unit < units; unit += unit_stride, ++local) {
      int m_tile, n_tile;
      tile_of(unit, &m_tile, &n_tile);
      mbarrier_wait(staged, static_cast<uint32_t>(local & 1));
      bf16* out = c + int64_t{m_tile} * kBM * ldc + int64_t{n_tile} * (kSwiglu ? kBN / 2 : kBN);
      for (int item = t; item < kBM * kOutChunks; item += 96) {
        const int r = item / kOutChunks, chunk = item % kOutChunks;
        uint4 value = ld_shared_16(staging + r * kRowBytes + ((chunk ^ (r & 7)) * 16));
        if constexpr (kSwiglu) {
          const int up_chunk = chunk + kBN / 16;
          const uint4 up = ld_shared_16(staging + r * kRowBytes + ((up_chunk ^ (r & 7)) * 16));
          uint32_t* gv = &value.x;
          const uint32_t* uv = &up.x;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float g0 = bf16_low(gv[e]), g1 = bf16_high(gv[e]), u0 = bf16_low(uv[e]), u1 = bf16_high(uv[e]);
            gv[e] = pack_bf16x2(silu_times(g0, u0), silu_times(g1, u1));
          }
        }
        *reinterpret_cast<uint4*>(out + int64_t{r} * ldc + chunk * 8) = value;
      }
      __syncwarp();
      if (lane == 0) mbarrier_arrive(drained);
    }
    return;
  }
  claim_registers<224>();
  const int consumer = warpgroup - 1;
  auto release = [](uint32_t bar) { release_stage<true>(bar); };
  float d[128];
  int local = 0;
  for (int unit = first_unit; unit < units; unit += unit_stride, ++local) {
    const int64_t g0 = int64_t{local} * k_tiles;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int64_t g = g0 + kt;
      const int s = static_cast<int>(g % kEStages);
      mbarrier_wait(full(s), static_cast<uint32_t>((g / kEStages) & 1));
      const uint64_t a = smem_descriptor(a_stage(s) + consumer * 64 * 128, 16, 1024);
      const uint64_t b = smem_descriptor(b_stage(s), 16, 1024);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) wgmma_m64n256k16_ss(d, a + 2 * kk, b + 2 * kk, kt > 0 || kk > 0);
      wgmma_commit();
      wgmma_wait<1>();
      if (kt > 0 && lane == 0) release(empty(static_cast<int>((g - 1) % kEStages)));
    }
    wgmma_wait<0>();
    fence_registers(d);
    if (lane == 0) release(empty(static_cast<int>((g0 + k_tiles - 1) % kEStages)));
    if (local > 0) mbarrier_wait(drained, static_cast<uint32_t>((local - 1) & 1));  // the last tile is out
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = consumer * 64 + warp_in_group * 16 + lane / 4 + 8 * half;
        st_shared_4(staging + r * kRowBytes + ((j ^ (r & 7)) * 16) + (lane % 4) * 4,
                    pack_bf16x2(d[4 * j + 2 * half], d[4 * j + 2 * half + 1]));
      }
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(staged);
  }
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}

template <bool kSwiglu>
void launch_epilogue_warps(const bf16* a, const bf16* b, bf16* c, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  const CUtensorMap a_map = bf16_row_major_map(a, k, m, k, kBK, kBM);
  const CUtensorMap b_map = bf16_row_major_map(b, k, n, k, kBK, kBN / 2);
  static bool configured = false;
  const auto kernel = gemm_epilogue_warps_kernel<kSwiglu>;
  static int sms = 0;
  if (!configured) {
    MOSAIC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kESmemBytes));
    MOSAIC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    configured = true;
  }
  const int m_tiles = static_cast<int>(m / kBM), n_tiles = static_cast<int>(n / kBN), k_tiles = static_cast<int>(k / kBK);
  const int ctas = std::min(m_tiles * n_tiles, sms / 2 * 2);
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 2, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(ctas), config.blockDim = dim3(384), config.dynamicSmemBytes = kESmemBytes;
  config.stream = stream, config.attrs = &cluster, config.numAttrs = 1;
  MOSAIC_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, a_map, b_map, c, kSwiglu ? n / 2 : n, m_tiles, n_tiles, k_tiles));
  MOSAIC_CUDA_CHECK_LAUNCH();
}

// cuBLASLt's heuristic choice for row-major C = A B^T (the engine's layout: column-major C^T = B A^T).
struct Cublas {
  cublasLtHandle_t handle{};
  cublasLtMatmulDesc_t desc{};
  cublasLtMatrixLayout_t lb{}, la{}, lc{};
  cublasLtMatmulAlgo_t algo{};
  void* workspace = nullptr;
  static constexpr size_t kWorkspace = 32 << 20;

  Cublas(int64_t m, int64_t n, int64_t k) {
    CHECK_BLAS(cublasLtCreate(&handle));
    CHECK_BLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)));
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k));
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k));
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n));
    MOSAIC_CUDA_CHECK(cudaMalloc(&workspace, kWorkspace));
    cublasLtMatmulPreference_t pref;
    CHECK_BLAS(cublasLtMatmulPreferenceCreate(&pref));
    const size_t bytes = kWorkspace;
    CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    CHECK_BLAS(cublasLtMatmulAlgoGetHeuristic(handle, desc, lb, la, lc, lc, pref, 1, &result, &found));
    if (found == 0) std::exit(1);
    algo = result.algo;
    cublasLtMatmulPreferenceDestroy(pref);
  }
  void run(const bf16* a, const bf16* b, bf16* c, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    CHECK_BLAS(cublasLtMatmul(handle, desc, &one, b, lb, a, la, &zero, c, lc, c, lc, &algo, workspace, kWorkspace, stream));
  }
};

int64_t count_differences(const bf16* x, const bf16* y, int64_t count) {
  std::vector<uint16_t> hx(count), hy(count);
  MOSAIC_CUDA_CHECK(cudaMemcpy(hx.data(), x, count * 2, cudaMemcpyDeviceToHost));
  MOSAIC_CUDA_CHECK(cudaMemcpy(hy.data(), y, count * 2, cudaMemcpyDeviceToHost));
  int64_t differ = 0;
  for (int64_t i = 0; i < count; ++i) differ += hx[i] != hy[i];
  return differ;
}

void run_shape(const char* name, int64_t m, int64_t n, int64_t k, int repeats) {
  // Gate and up weights [n/2 x k] each; A [m x k]; values ~ the model's scale.
  std::vector<uint16_t> host_a(m * k), host_w(n * k);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& x : host_a) x = f32_to_bf16(dist(rng));
  for (auto& x : host_w) x = f32_to_bf16(dist(rng) * 0.02f);
  // Interleaved copy for the fused kernel: per block of 128 output columns j, gate rows j then up rows j.
  std::vector<uint16_t> host_wi(n * k);
  const int64_t half = n / 2;
  for (int64_t blk = 0; blk < half / 128; ++blk)
    for (int64_t r = 0; r < 128; ++r) {
      std::copy_n(&host_w[(blk * 128 + r) * k], k, &host_wi[(blk * 256 + r) * k]);
      std::copy_n(&host_w[(half + blk * 128 + r) * k], k, &host_wi[(blk * 256 + 128 + r) * k]);
    }
  // And in blocks of 64 for the ping-pong kernel's 128-row B tiles.
  std::vector<uint16_t> host_wi64(n * k);
  for (int64_t blk = 0; blk < half / 64; ++blk)
    for (int64_t r = 0; r < 64; ++r) {
      std::copy_n(&host_w[(blk * 64 + r) * k], k, &host_wi64[(blk * 128 + r) * k]);
      std::copy_n(&host_w[(half + blk * 64 + r) * k], k, &host_wi64[(blk * 128 + 64 + r) * k]);
    }
  bf16 *a, *w, *wi, *wi64, *c0, *c1, *h0, *h1;
  MOSAIC_CUDA_CHECK(cudaMalloc(&a, m * k * 2));
  MOSAIC_CUDA_CHECK(cudaMalloc(&w, n * k * 2));
  MOSAIC_CUDA_CHECK(cudaMalloc(&wi, n * k * 2));
  MOSAIC_CUDA_CHECK(cudaMalloc(&wi64, n * k * 2));
  MOSAIC_CUDA_CHECK(cudaMalloc(&c0, m * n * 2));
  MOSAIC_CUDA_CHECK(cudaMalloc(&c1, m * n * 2));
  MOSAIC_CUDA_CHECK(cudaMalloc(&h0, m * half * 2));
  MOSAIC_CUDA_CHECK(cudaMalloc(&h1, m * half * 2));
  MOSAIC_CUDA_CHECK(cudaMemcpy(a, host_a.data(), m * k * 2, cudaMemcpyHostToDevice));
  MOSAIC_CUDA_CHECK(cudaMemcpy(w, host_w.data(), n * k * 2, cudaMemcpyHostToDevice));
  MOSAIC_CUDA_CHECK(cudaMemcpy(wi, host_wi.data(), n * k * 2, cudaMemcpyHostToDevice));
  MOSAIC_CUDA_CHECK(cudaMemcpy(wi64, host_wi64.data(), n * k * 2, cudaMemcpyHostToDevice));

  Cublas blas(m, n, k);
  Cublas blas_half(m, half, k);  // the engine's separate gate and up products
  blas.run(a, w, c0, nullptr);
  launch<false>(a, w, c1, m, n, k, nullptr);
  MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
  const int64_t differ = count_differences(c0, c1, m * n);
  // Unfused reference: gate and up from cuBLASLt (c0's halves as separate products), then SwiGLU.
  blas_half.run(a, w, c0, nullptr);
  blas_half.run(a, w + half * k, c0 + m * half, nullptr);
  MOSAIC_CUDA_CHECK(cudaMemcpy(h0, c0, m * half * 2, cudaMemcpyDeviceToDevice));
  swiglu(m, half, h0, half, c0 + m * half, half, nullptr);
  launch<true>(a, wi, h1, m, n, k, nullptr);
  MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
  const int64_t differ_h = count_differences(h0, h1, m * half);
  MOSAIC_CUDA_CHECK(cudaMemset(c1, 0, m * n * 2));
  MOSAIC_CUDA_CHECK(cudaMemset(h1, 0, m * half * 2));
  launch<false, true>(a, w, c1, m, n, k, nullptr);
  launch<true, true>(a, wi, h1, m, n, k, nullptr);
  MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
  blas.run(a, w, c0, nullptr);
  MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
  const int64_t differ_2 = count_differences(c0, c1, m * n), differ_2h = count_differences(h0, h1, m * half);
  MOSAIC_CUDA_CHECK(cudaMemset(c1, 0, m * n * 2));
  MOSAIC_CUDA_CHECK(cudaMemset(h1, 0, m * half * 2));
  launch<false, true, true>(a, w, c1, m, n, k, nullptr);
  launch<true, true, true>(a, wi, h1, m, n, k, nullptr);
  MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
  const int64_t differ_3 = count_differences(c0, c1, m * n), differ_3h = count_differences(h0, h1, m * half);
  int64_t differ_4[2], differ_4h[2];
  {
    MOSAIC_CUDA_CHECK(cudaMemset(c1, 0, m * n * 2));
    MOSAIC_CUDA_CHECK(cudaMemset(h1, 0, m * half * 2));
    launch_pingpong<false, false>(a, w, c1, m, n, k, nullptr);
    launch_pingpong<true, false>(a, wi64, h1, m, n, k, nullptr);
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    differ_4[0] = count_differences(c0, c1, m * n), differ_4h[0] = count_differences(h0, h1, m * half);
    MOSAIC_CUDA_CHECK(cudaMemset(c1, 0, m * n * 2));
    MOSAIC_CUDA_CHECK(cudaMemset(h1, 0, m * half * 2));
    launch_pingpong<false, true>(a, w, c1, m, n, k, nullptr);
    launch_pingpong<true, true>(a, wi64, h1, m, n, k, nullptr);
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    differ_4[1] = count_differences(c0, c1, m * n), differ_4h[1] = count_differences(h0, h1, m * half);
  }
  MOSAIC_CUDA_CHECK(cudaMemset(c1, 0, m * n * 2));
  MOSAIC_CUDA_CHECK(cudaMemset(h1, 0, m * half * 2));
  launch_epilogue_warps<false>(a, w, c1, m, n, k, nullptr);
  launch_epilogue_warps<true>(a, wi, h1, m, n, k, nullptr);
  MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
  const int64_t differ_5 = count_differences(c0, c1, m * n), differ_5h = count_differences(h0, h1, m * half);

  const double flops = 2.0 * m * n * k;
  constexpr int kWarmups = 3;  // untimed calls before each timing
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(500)); };
  pause();
  const float t_blas = time_ms([&] { blas.run(a, w, c0, nullptr); }, repeats, kWarmups);
  pause();
  const float t_mine = time_ms([&] { launch<false>(a, w, c1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_unfused = time_ms(
      [&] {
        blas_half.run(a, w, c0, nullptr);
        blas_half.run(a, w + half * k, c0 + m * half, nullptr);
        swiglu(m, half, c0, half, c0 + m * half, half, nullptr);
      },
      repeats, kWarmups);
  pause();
  const float t_fused = time_ms([&] { launch<true>(a, wi, h1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_paired = time_ms([&] { launch<false, true>(a, w, c1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_paired_fused = time_ms([&] { launch<true, true>(a, wi, h1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_staged = time_ms([&] { launch<false, true, true>(a, w, c1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_staged_fused = time_ms([&] { launch<true, true, true>(a, wi, h1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_pp = time_ms([&] { launch_pingpong<false, false>(a, w, c1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_pp_fused = time_ms([&] { launch_pingpong<true, false>(a, wi64, h1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_ppp = time_ms([&] { launch_pingpong<false, true>(a, w, c1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_ppp_fused = time_ms([&] { launch_pingpong<true, true>(a, wi64, h1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_ew = time_ms([&] { launch_epilogue_warps<false>(a, w, c1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_ew_fused = time_ms([&] { launch_epilogue_warps<true>(a, wi, h1, m, n, k, nullptr); }, repeats, kWarmups);
  pause();
  const float t_blas_again = time_ms([&] { blas.run(a, w, c0, nullptr); }, repeats, kWarmups);
  pause();
  const float t_unfused_again = time_ms(
      [&] {
        blas_half.run(a, w, c0, nullptr);
        blas_half.run(a, w + half * k, c0 + m * half, nullptr);
        swiglu(m, half, c0, half, c0 + m * half, half, nullptr);
      },
      repeats, kWarmups);
  std::printf("%-22s m=%6lld n=%6lld k=%5lld | cuBLASLt %8.3f ms %6.1f TFLOP/s | v1 %8.3f ms %6.1f TFLOP/s "
              "(%lld of %lld outputs differ) | gate+up+SwiGLU unfused %8.3f ms, fused %8.3f ms (%lld of %lld differ)\n",
              name, static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), t_blas,
              flops / t_blas / 1e9, t_mine, flops / t_mine / 1e9, static_cast<long long>(differ),
              static_cast<long long>(m * n), t_unfused, t_fused, static_cast<long long>(differ_h),
              static_cast<long long>(m * half));
  std::printf("%-22s v2 (paired CTAs, B multicast) %8.3f ms %6.1f TFLOP/s (%lld differ) | fused %8.3f ms (%lld differ)\n",
              name, t_paired, flops / t_paired / 1e9, static_cast<long long>(differ_2), t_paired_fused,
              static_cast<long long>(differ_2h));
  std::printf("%-22s v3 (v2 + staged epilogue) %8.3f ms %6.1f TFLOP/s (%lld differ) | fused %8.3f ms (%lld differ)"
              " | again: cuBLASLt %8.3f ms, unfused %8.3f ms\n",
              name, t_staged, flops / t_staged / 1e9, static_cast<long long>(differ_3), t_staged_fused,
              static_cast<long long>(differ_3h), t_blas_again, t_unfused_again);
  std::printf("%-22s v4 (persistent ping-pong) %8.3f ms %6.1f TFLOP/s (%lld differ) | fused %8.3f ms (%lld differ)"
              " | v4 paired %8.3f ms %6.1f TFLOP/s (%lld differ) | fused %8.3f ms (%lld differ)\n",
              name, t_pp, flops / t_pp / 1e9, static_cast<long long>(differ_4[0]), t_pp_fused,
              static_cast<long long>(differ_4h[0]), t_ppp, flops / t_ppp / 1e9, static_cast<long long>(differ_4[1]),
              t_ppp_fused, static_cast<long long>(differ_4h[1]));
  std::printf("%-22s v5 (persistent, epilogue warps) %8.3f ms %6.1f TFLOP/s (%lld differ) | fused %8.3f ms (%lld differ)\n",
              name, t_ew, flops / t_ew / 1e9, static_cast<long long>(differ_5), t_ew_fused,
              static_cast<long long>(differ_5h));
  for (bf16* p : {a, w, wi, wi64, c0, c1, h0, h1}) cudaFree(p);
}

}  // namespace mosaic::cuda::gemm_bench

int main(int argc, char** argv) {
  using mosaic::cuda::gemm_bench::run_shape;
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 1;
  for (int round = 0; round < rounds; ++round) {
    run_shape("LLaDA-8B gate+up, 4k", 4096, 24576, 4096, 20);
    run_shape("LLaDA-8B gate+up, 32k", 32768, 24576, 4096, 5);
  }
  return 0;
}
