// gate_up_swiglu (gate_up_swiglu.h) on Hopper: a persistent warp-specialised GEMM whose tile holds
// the gate and the up product of the same 128 output columns, with SwiGLU in its epilogue
// (docs/design/gate-up-swiglu.md; the workbench's v5, dev/cuda/gemm_wgmma.cu, measured it).
//
// A CTA of three warpgroups walks tiles of 128 rows x 128 output columns (tile += grid):
// - warp 0 of warpgroup 0, one lane: TMA loads of x [128 x 64] and of the weights [256 x 64]
//   (128 gate rows, then the 128 up rows of the same columns) into 3 mbarrier-guarded stages;
//   CTAs run in clusters of two on neighbouring row tiles, the first loading the gate half of the
//   B tile and the second the up half, each multicasting its half into both;
// - warpgroups 1 and 2, 64 rows each: wgmma.m64n256k16 with A and B from shared memory, fp32
//   accumulators; at a tile's end they round g and u to bf16 (the bits the separate products
//   store) into 64 KiB of swizzled staging and go on with the next tile;
// - warps 1-3 of warpgroup 0: read the staged tile, compute silu(g) u with the SwiGLU kernel's
//   arithmetic (swiglu_math.cuh) and store 16 bytes per lane, under the next tile's MMAs.
// Hopper's MMAs add a row's k16 steps in the same order whatever the tile or kernel, as cuBLASLt's
// split-K-free algorithms do (docs/design/gemm-algorithms.md), hence the separate products' bits.

#include "backend/cuda/gate_up_swiglu.h"

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/once_per_device.h"
#include "backend/cuda/pair_launch.h"
#include "backend/cuda/ptx.cuh"
#include "backend/cuda/shared_memory_limit.h"
#include "backend/cuda/sm90_ptx.cuh"
#include "backend/cuda/swiglu_math.cuh"
#include "backend/cuda/tensor_map.h"

namespace mosaic::cuda {
namespace gate_up_swiglu_sm90 {
namespace {

using bf16 = __nv_bfloat16;
using namespace ptx;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
using namespace sm90;
#endif

constexpr int kBlockM = 128;          // rows of x per tile
constexpr int kBlockF = 128;          // output columns per tile
constexpr int kBlockN = 2 * kBlockF;  // product columns per tile: g, then u
constexpr int kBlockK = 64;           // k per stage: one 128-byte swizzled row of bf16
constexpr int kStages = 3;
[[maybe_unused]] constexpr int kGroupPairs = 8;        // the raster's groups: 8 pairs of row tiles walk the columns together
constexpr int kThreads = 384;
[[maybe_unused]] constexpr int kEpilogueThreads = 96;  // warps 1-3
constexpr uint32_t kABytes = kBlockM * kBlockK * 2;
constexpr uint32_t kBBytes = kBlockN * kBlockK * 2;
constexpr uint32_t kStageBytes = kABytes + kBBytes;       // 48 KiB
constexpr uint32_t kStagingBytes = kBlockM * kBlockN * 2;  // 64 KiB
[[maybe_unused]] constexpr uint32_t kStagingRowBytes = kBlockN * 2;         // 16-byte chunk j of row r at chunk j ^ (r & 7)
constexpr int kSharedBytes = 1024 + kStages * kStageBytes + kStagingBytes + (2 * kStages + 2) * 8;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The tile of work unit `unit`: units are pairs of neighbouring row tiles by column tiles, rastered
// in groups of kGroupPairs pairs that walk the column tiles together, so that concurrent clusters
// share weight tiles in L2; the CTA of cluster rank `rank` takes the pair's first or second tile.
struct TileRaster {
  int pairs, f_tiles;
  __device__ __forceinline__ void tile(int unit, uint32_t rank, int* m_tile, int* f_tile) const {
    const int per_group = kGroupPairs * f_tiles, group = unit / per_group;
    const int first_pair = group * kGroupPairs, group_pairs = min(kGroupPairs, pairs - first_pair);
    const int in_group = unit % per_group;
    *f_tile = in_group / group_pairs;
    *m_tile = 2 * (first_pair + in_group % group_pairs) + static_cast<int>(rank);
  }
};
#endif

__global__ void __launch_bounds__(kThreads, 1)
    gate_up_swiglu_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap gate_map,
                          const __grid_constant__ CUtensorMap up_map, bf16* out, int64_t out_stride, int64_t m,
                          int pairs, int f_tiles, int k_tiles) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int units = pairs * f_tiles;
  const int first_unit = static_cast<int>(blockIdx.x) / 2, unit_stride = static_cast<int>(gridDim.x) / 2;
  if (first_unit >= units) return;  // both CTAs of the cluster
  const uint32_t rank = cluster_rank();
  const TileRaster raster{pairs, f_tiles};
  // A pair's second tile may lie past the rows (an odd number of row tiles): it loads the last
  // row tile again, so that its partner gets its half of the weights, and stores nothing.
  const int last_m_tile = static_cast<int>((m - 1) / kBlockM);

  extern __shared__ unsigned char smem[];
  const uint32_t base = (smem_address(smem) + 1023) & ~uint32_t{1023};
  auto a_stage = [&](int s) { return base + s * kStageBytes; };
  auto b_stage = [&](int s) { return base + s * kStageBytes + kABytes; };
  const uint32_t staging = base + kStages * kStageBytes;
  const uint32_t bars = staging + kStagingBytes;
  auto full = [&](int s) { return bars + 8 * s; };              // the stage has landed (TMA bytes)
  auto empty = [&](int s) { return bars + 8 * (kStages + s); };  // both CTAs' 8 consumer warps are done
  const uint32_t staged = bars + 8 * (2 * kStages);             // the consumers' 8 warps staged a tile
  const uint32_t drained = staged + 8;                          // the 3 epilogue warps stored it
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbarrier_init(full(s), 1), mbarrier_init(empty(s), 16);
    mbarrier_init(staged, 8), mbarrier_init(drained, 3);
  }
  fence_mbarrier_init();  // the other CTA arrives on these barriers and multicasts into the stages
  cluster_sync();

  const int warpgroup = threadIdx.x / 128, warp_in_group = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  if (warpgroup == 0) {
    release_registers<56>();
    if (warp_in_group == 0) {  // the producer
      if (lane == 0) {
        const CUtensorMap* weights = rank == 0 ? &gate_map : &up_map;
        int64_t g = 0;  // stages filled so far
        for (int unit = first_unit; unit < units; unit += unit_stride) {
          int m_tile, f_tile;
          raster.tile(unit, rank, &m_tile, &f_tile);
          const int load_row = min(m_tile, last_m_tile) * kBlockM;
          for (int kt = 0; kt < k_tiles; ++kt, ++g) {
            const int s = static_cast<int>(g % kStages);
            const int64_t round = g / kStages;
            if (round > 0) mbarrier_wait(empty(s), static_cast<uint32_t>((round - 1) & 1));
            mbarrier_arrive_expect_bytes(full(s), kStageBytes);
            tma_load_2d(a_stage(s), &x_map, kt * kBlockK, load_row, full(s));
            tma_load_2d_multicast(b_stage(s) + rank * (kBBytes / 2), weights, kt * kBlockK, f_tile * kBlockF,
                                  full(s), 0b11);
          }
        }
        // Leave only once both CTAs' consumers are done with every stage this CTA multicast into.
        for (int64_t last = g > kStages ? g - kStages : 0; last < g; ++last)
          mbarrier_wait(empty(static_cast<int>(last % kStages)), static_cast<uint32_t>((last / kStages) & 1));
      }
      return;
    }
    // The epilogue: silu(g) u of each staged tile, 16 bytes (8 outputs) per item.
    const int t = static_cast<int>(threadIdx.x) - 32;
    constexpr int kOutChunks = kBlockF / 8;
    int local = 0;
    for (int unit = first_unit; unit < units; unit += unit_stride, ++local) {
      int m_tile, f_tile;
      raster.tile(unit, rank, &m_tile, &f_tile);
      mbarrier_wait(staged, static_cast<uint32_t>(local & 1));
      const int64_t first_row = int64_t{m_tile} * kBlockM;
      const int rows = static_cast<int>(min64(kBlockM, m - first_row));  // <= 0 past the rows
      bf16* tile_out = out + first_row * out_stride + int64_t{f_tile} * kBlockF;
      for (int item = t; item < rows * kOutChunks; item += kEpilogueThreads) {
        const int r = item / kOutChunks, chunk = item % kOutChunks;
        const uint32_t row = staging + r * kStagingRowBytes;
        uint4 g = ld_shared_16(row + ((chunk ^ (r & 7)) * 16));
        const uint4 u = ld_shared_16(row + (((chunk + kOutChunks) ^ (r & 7)) * 16));
        uint32_t* gv = &g.x;
        const uint32_t* uv = &u.x;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          gv[e] = pack_bf16x2(silu_times(bf16_low(gv[e]), bf16_low(uv[e])),
                              silu_times(bf16_high(gv[e]), bf16_high(uv[e])));
        }
        *reinterpret_cast<uint4*>(tile_out + int64_t{r} * out_stride + chunk * 8) = g;
      }
      __syncwarp();
      if (lane == 0) mbarrier_arrive(drained);
    }
    return;
  }

  claim_registers<224>();
  const int consumer = warpgroup - 1;  // rows 64 consumer .. of the tile
  float d[128];                        // [n8 tile j][4]: rows lane / 4 (+8), columns 8j + 2 (lane % 4) (+1)
  int local = 0;
  for (int unit = first_unit; unit < units; unit += unit_stride, ++local) {
    const int64_t g0 = int64_t{local} * k_tiles;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int64_t g = g0 + kt;
      const int s = static_cast<int>(g % kStages);
      mbarrier_wait(full(s), static_cast<uint32_t>((g / kStages) & 1));
      const uint64_t a = smem_descriptor(a_stage(s) + consumer * 64 * 128, 16, 1024);
      const uint64_t b = smem_descriptor(b_stage(s), 16, 1024);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) wgmma_m64n256k16_ss(d, a + 2 * kk, b + 2 * kk, kt > 0 || kk > 0);
      wgmma_commit();
      wgmma_wait<1>();  // the previous stage's MMAs are done: release it
      if (kt > 0 && lane == 0) {
        const uint32_t bar = empty(static_cast<int>((g - 1) % kStages));
        mbarrier_arrive_in_cta(bar, 0), mbarrier_arrive_in_cta(bar, 1);
      }
    }
    wgmma_wait<0>();
    fence_registers(d);
    if (lane == 0) {
      const uint32_t bar = empty(static_cast<int>((g0 + k_tiles - 1) % kStages));
      mbarrier_arrive_in_cta(bar, 0), mbarrier_arrive_in_cta(bar, 1);
    }
    if (local > 0) mbarrier_wait(drained, static_cast<uint32_t>((local - 1) & 1));  // the last tile is out
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = consumer * 64 + warp_in_group * 16 + lane / 4 + 8 * half;
        st_shared_4(staging + r * kStagingRowBytes + ((j ^ (r & 7)) * 16) + (lane % 4) * 4,
                    pack_bf16x2(d[4 * j + 2 * half], d[4 * j + 2 * half + 1]));
      }
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(staged);
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a features: never launched (gate_up_swiglu_available)
#endif
}

const void* kernel_address() { return reinterpret_cast<const void*>(gate_up_swiglu_kernel); }

void configure() {
  static std::atomic<uint64_t> configured{0};
  raise_shared_limit(kernel_address(), kSharedBytes, configured);
}

// Clusters of two CTAs along x, one CTA per SM.
struct PairLaunch : PairLaunchConfig {
  PairLaunch(int ctas, cudaStream_t stream)
      : PairLaunchConfig(dim3(static_cast<unsigned>(ctas)), dim3(kThreads), kSharedBytes, stream) {}
};

// Clusters of two CTAs the current device runs at once (0 when it cannot say), asked once per
// device: the persistent grid's size.
int pairs_on_device() {
  static std::atomic<int> known[64] = {};
  return count_once_per_device(known, [](int) {
    int clusters = 0;
    configure();
    const PairLaunch launch(2, nullptr);
    if (cudaOccupancyMaxActiveClusters(&clusters, gate_up_swiglu_kernel, &launch.config) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return clusters;
  });
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace
}  // namespace gate_up_swiglu_sm90

bool gate_up_swiglu_shape_fits(const GateUpSwigluArgs& a) {
  constexpr int64_t kMaxCoordinate = int64_t{1} << 31;  // TMA coordinates are int32
  return a.m >= 0 && a.m < kMaxCoordinate && a.k > 0 && a.k % gate_up_swiglu_sm90::kBlockK == 0 &&
         a.k < kMaxCoordinate && a.f > 0 && a.f % gate_up_swiglu_sm90::kBlockF == 0 && a.f < kMaxCoordinate &&
         a.x_stride >= a.k && a.x_stride % 8 == 0 && a.weight_stride >= a.k && a.weight_stride % 8 == 0 &&
         a.out_stride >= a.f && a.out_stride % 8 == 0 && gate_up_swiglu_sm90::aligned16(a.x) &&
         gate_up_swiglu_sm90::aligned16(a.gate) && gate_up_swiglu_sm90::aligned16(a.up) &&
         gate_up_swiglu_sm90::aligned16(a.out);
}

bool gate_up_swiglu_available() {
  static std::atomic<uint64_t> asked{0}, available{0};
  return once_per_device(asked, available, [](int device) {
    return device_runs_sm90a_kernel(device, gate_up_swiglu_sm90::kernel_address()) &&
           gate_up_swiglu_sm90::pairs_on_device() > 0;
  });
}

void gate_up_swiglu(const GateUpSwigluArgs& args, cudaStream_t stream) {
  using namespace gate_up_swiglu_sm90;
  if (!gate_up_swiglu_shape_fits(args) || !gate_up_swiglu_available()) {
    std::fprintf(stderr,
                 "mosaic: internal error: cuda::gate_up_swiglu: m %lld, k %lld, f %lld do not fit the kernel "
                 "(k a multiple of 64, f of 128, 16-byte aligned rows) or the device has none\n",
                 static_cast<long long>(args.m), static_cast<long long>(args.k), static_cast<long long>(args.f));
    std::abort();
  }
  if (args.m == 0) return;
  configure();
  const CUtensorMap x_map = bf16_row_major_map(args.x, args.k, args.m, args.x_stride, kBlockK, kBlockM);
  const CUtensorMap gate_map = bf16_row_major_map(args.gate, args.k, args.f, args.weight_stride, kBlockK, kBlockF);
  const CUtensorMap up_map = bf16_row_major_map(args.up, args.k, args.f, args.weight_stride, kBlockK, kBlockF);
  const int64_t m_tiles = (args.m + kBlockM - 1) / kBlockM;
  const int pairs = static_cast<int>((m_tiles + 1) / 2);
  const int f_tiles = static_cast<int>(args.f / kBlockF), k_tiles = static_cast<int>(args.k / kBlockK);
  const int64_t units = int64_t{pairs} * f_tiles;
  if (units > 0x7fffffff / 2) {
    std::fprintf(stderr, "mosaic: internal error: cuda::gate_up_swiglu: %lld tiles exceed the kernel's index range\n",
                 static_cast<long long>(units));
    std::abort();
  }
  const int ctas = 2 * static_cast<int>(std::min<int64_t>(units, pairs_on_device()));
  const PairLaunch launch(ctas, stream);
  MOSAIC_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, gate_up_swiglu_kernel, x_map, gate_map, up_map,
                                       static_cast<bf16*>(args.out), args.out_stride, args.m, pairs, f_tiles,
                                       k_tiles));
  MOSAIC_CUDA_CHECK_LAUNCH();
}

}  // namespace mosaic::cuda
