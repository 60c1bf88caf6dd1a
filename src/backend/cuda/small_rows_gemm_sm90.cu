// small_rows_gemm (small_rows_gemm.h) on Hopper (docs/design/small-rows-gemm.md).
//
// One CTA per column strip of kStrip output columns, over all of K; five warps:
// - warp 4, one lane: TMA loads, per stage of kSub K tiles of 64, each tile's A rows (m rounded up
//   to 8) and the strip's weight tile [kStrip x 64], into mbarrier-guarded stages (kSub 4 reads
//   512 contiguous bytes of every weight row a stage: measured 1.2-1.5x faster than 128 where the
//   stages still number six, docs/design/small-rows-gemm.md);
// - warps 0-3 (one warpgroup): per K step four wgmma.m64n{kStrip}k16 per 64-row tile, A and B from
//   shared memory, into fp32 accumulators; then the epilogue from the accumulators, with
//   cuBLASLt's roundings: + bias in fp32 and one rounding to bf16; for the residual add (beta = 1)
//   the product rounded to bf16 first, then + C in fp32 and a second rounding (measured: the
//   one-rounding form differs from cuBLASLt in ~21 % of outputs); 4-byte stores of rows below m.
// Stages fill 196 KiB for one CTA per SM, 90 KiB where two share one. The K steps of a row are
// added in order, k16 by k16, whatever the stage width, as in every split-K-free Hopper kernel
// (docs/design/gemm-algorithms.md): the reference's bits, which the Gemm checks on a shape's first
// call before using it.

#include "backend/cuda/small_rows_gemm.h"

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/once_per_device.h"
#include "backend/cuda/ptx.cuh"
#include "backend/cuda/shared_memory_limit.h"
#include "backend/cuda/sm90_ptx.cuh"
#include "backend/cuda/tensor_map.h"

namespace mosaic::cuda {
namespace small_rows_sm90 {
namespace {

using bf16 = __nv_bfloat16;
using namespace ptx;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
using namespace sm90;
#endif

constexpr int kBlockK = 64;  // k per stage: one 128-byte swizzled row of bf16
constexpr int kThreads = 160;
constexpr int kMaxStages = 32;
// Shared memory for stages: one CTA per SM when the strips do not outnumber the SMs, else two.
constexpr int kOneCtaStageBytes = 196 * 1024;
constexpr int kTwoCtaStageBytes = 90 * 1024;
// The MMAs read 64 rows of A per row tile whatever m is; past a stage's rows they read the next
// bytes (garbage for unstored rows), so the last stage is followed by this much shared memory.
constexpr int kTailBytes = 16 * 1024;
constexpr int kBarrierBytes = 1024;  // 2 kMaxStages mbarriers, rounded to the 1024-byte alignment

// A's boxes: 64, 32, 16 and 8 rows.
__host__ __device__ constexpr int box_rows(int size) { return 64 >> size; }
// A's rows in a stage: m rounded up to whole 8-row swizzle atoms.
__host__ __device__ constexpr int a_rows_of(int64_t m) { return static_cast<int>((m + 7) / 8 * 8); }
// Whether the stage's boxes (64-row ones while 64 rows remain, then one each of 32, 16, 8: the
// binary digits of the rest) include one of `size`: the host encodes only those maps.
__host__ __device__ constexpr bool box_used(int a_rows, int size) {
  return size == 0 ? a_rows >= 64 : ((a_rows % 64) & box_rows(size)) != 0;
}

// A stage holds A's rows rounded up to 8 (whole 1024-byte swizzle atoms) and the strip's weight
// tile; as many stages as the budget holds, so that the fewer the rows, the more weight bytes
// are in flight (a strip's bandwidth is its bytes in flight over the memory latency).
struct Stages {
  uint32_t a_bytes, stage_bytes;
  int count;
  int shared_bytes() const { return 1024 + kBarrierBytes + count * static_cast<int>(stage_bytes) + kTailBytes; }
};

// Whether the strips do not outnumber the SMs: one CTA per SM, with the larger stage budget.
bool strips_fit_one_per_sm(int64_t n, int strip) { return n / strip <= device_sm_count(); }

Stages stages_for(int64_t m, int strip, bool one_cta_per_sm, int k_subtiles) {
  Stages s;
  s.a_bytes = static_cast<uint32_t>(a_rows_of(m) * 128);
  s.stage_bytes = static_cast<uint32_t>(k_subtiles) * (s.a_bytes + static_cast<uint32_t>(strip) * kBlockK * 2);
  const int budget = one_cta_per_sm ? kOneCtaStageBytes : kTwoCtaStageBytes;
  s.count = std::max(2, std::min<int>(kMaxStages, budget / static_cast<int>(s.stage_bytes)));
  return s;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int kStrip>
__device__ __forceinline__ void wgmma_strip(float (&d)[kStrip / 2], uint64_t a, uint64_t b, int accumulate) {
  if constexpr (kStrip == 16) wgmma_m64n16k16_ss(d, a, b, accumulate);
  else if constexpr (kStrip == 32) wgmma_m64n32k16_ss(d, a, b, accumulate);
  else if constexpr (kStrip == 64) wgmma_m64n64k16_ss(d, a, b, accumulate);
  else wgmma_m64n128k16_ss(d, a, b, accumulate);
}
#endif

// Maps of A in boxes of 64, 32, 16 and 8 rows (box_rows): a stage loads the rows of A, rounded up
// to a multiple of 8, in the fewest boxes (TMA's cost grows with the boxes issued and with the rows
// it fills past the tensor's end).
struct AMaps {
  CUtensorMap box[4];
};

// kSub: 64-wide K tiles per stage (each row of the weight read kSub x 128 contiguous bytes at a
// time). kProbe (the workbench's, 0 in the engine): 1 leaves out the MMAs and the epilogue.
template <int kStrip, int kRowTiles, int kSub = 1, int kProbe = 0>
__global__ void __launch_bounds__(kThreads, 1)
    small_rows_gemm_kernel(const __grid_constant__ AMaps a_maps, const __grid_constant__ CUtensorMap b_map,
                           bf16* c, int64_t ldc, const bf16* __restrict__ bias, int accumulate, int m, int k_tiles,
                           Stages stages) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem[];
  const uint32_t base = (smem_address(smem) + 1023) & ~uint32_t{1023};
  const uint32_t bars = base;
  // A stage: kSub A tiles, then kSub weight tiles.
  auto a_stage = [&](int s, int sub) { return base + kBarrierBytes + s * stages.stage_bytes + sub * stages.a_bytes; };
  auto b_stage = [&](int s, int sub) {
    return a_stage(s, kSub) + static_cast<uint32_t>(sub) * (kStrip * kBlockK * 2);
  };
  const int k_steps = k_tiles / kSub;  // the host sees that kSub divides k_tiles
  auto full = [&](int s) { return bars + 8 * s; };                 // the stage has landed
  auto empty = [&](int s) { return bars + 8 * (kMaxStages + s); };  // the consumer warps are done
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages.count; ++s) mbarrier_init(full(s), 1), mbarrier_init(empty(s), 4);
  }
  fence_mbarrier_init();
  __syncthreads();

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int column0 = static_cast<int>(blockIdx.x) * kStrip;
  // A arrives in boxes of whole 1024-byte swizzle atoms (8 rows) covering m: rows past m in the last
  // box read as zeros, later rows of the tile are never written and feed only accumulator rows that
  // are not stored (a row's products depend on its own A row alone).
  const int a_rows = a_rows_of(m);
  if (warp == 4) {  // the producer
    if (lane == 0) {
      int s = 0;
      uint32_t round = 0;
      for (int step = 0; step < k_steps; ++step) {
        if (round > 0) mbarrier_wait(empty(s), (round - 1) & 1);
        mbarrier_arrive_expect_bytes(full(s), stages.stage_bytes);
        for (int sub = 0; sub < kSub; ++sub) {
          const int kt = step * kSub + sub;
          int row = 0;
#pragma unroll
          for (int size = 0; size < 4; ++size) {
            for (; a_rows - row >= box_rows(size); row += box_rows(size))
              tma_load_2d(a_stage(s, sub) + row * 128, &a_maps.box[size], kt * kBlockK, row, full(s));
          }
          tma_load_2d(b_stage(s, sub), &b_map, kt * kBlockK, column0, full(s));
        }
        if (++s == stages.count) s = 0, ++round;
      }
    }
    return;
  }

  float d[kRowTiles][kStrip / 2];  // per 64-row tile and thread
  int s = 0, previous = 0;
  uint32_t round = 0;
  for (int step = 0; step < k_steps; ++step) {
    mbarrier_wait(full(s), round & 1);
    if constexpr (kProbe == 0) {
      wgmma_fence();
#pragma unroll
      for (int sub = 0; sub < kSub; ++sub) {
        const uint64_t b = smem_descriptor(b_stage(s, sub), 16, 1024);
#pragma unroll
        for (int t = 0; t < kRowTiles; ++t) {
          const uint64_t a = smem_descriptor(a_stage(s, sub) + t * 8192, 16, 1024);
#pragma unroll
          for (int kk = 0; kk < kBlockK / 16; ++kk)
            wgmma_strip<kStrip>(d[t], a + 2 * kk, b + 2 * kk, step > 0 || sub > 0 || kk > 0);
        }
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous stage's MMAs are done: release it
      if (step > 0 && lane == 0) mbarrier_arrive(empty(previous));
    } else if (lane == 0) {
      mbarrier_arrive(empty(s));
    }
    previous = s;
    if (++s == stages.count) s = 0, ++round;
  }
  if constexpr (kProbe != 0) return;
  wgmma_wait<0>();
#pragma unroll
  for (int t = 0; t < kRowTiles; ++t) fence_registers(d[t]);

  // d[t][4 j + 2 half + e]: row 64 t + 16 warp + lane / 4 + 8 half, column 8 j + 2 (lane % 4) + e.
#pragma unroll
  for (int t = 0; t < kRowTiles; ++t) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 64 * t + 16 * warp + lane / 4 + 8 * half;
      if (row >= m) continue;
      bf16* out = c + int64_t{row} * ldc + column0 + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < kStrip / 8; ++j) {
        float v0 = d[t][4 * j + 2 * half], v1 = d[t][4 * j + 2 * half + 1];
        if (accumulate) {  // the product rounded to bf16, then C added in fp32 (cuBLASLt's beta = 1)
          const uint32_t old = *reinterpret_cast<const uint32_t*>(out + 8 * j);
          const uint32_t product = pack_bf16x2(v0, v1);
          v0 = bf16_low(product) + bf16_low(old), v1 = bf16_high(product) + bf16_high(old);
        } else if (bias != nullptr) {
          const uint32_t add = *reinterpret_cast<const uint32_t*>(bias + column0 + 2 * (lane % 4) + 8 * j);
          v0 += bf16_low(add), v1 += bf16_high(add);
        }
        *reinterpret_cast<uint32_t*>(out + 8 * j) = pack_bf16x2(v0, v1);
      }
    }
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a features: never launched (small_rows_gemm_available)
#endif
}

template <int kStrip, int kRowTiles, int kSub = 1, int kProbe = 0>
void launch(const GemmArgs& args, cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  const auto kernel = small_rows_gemm_kernel<kStrip, kRowTiles, kSub, kProbe>;
  raise_shared_limit(reinterpret_cast<const void*>(kernel), 1024 + kBarrierBytes + kOneCtaStageBytes + kTailBytes,
                     configured);
  if (args.k / kBlockK % kSub != 0) {
    std::fprintf(stderr, "mosaic: internal error: cuda::small_rows_gemm: k %lld is not a multiple of %d\n",
                 static_cast<long long>(args.k), kBlockK * kSub);
    std::abort();
  }
  const Stages stages = stages_for(args.m, kStrip, strips_fit_one_per_sm(args.n, kStrip), kSub);
  AMaps a_maps{};  // only the box sizes the stages load: each encoding is host work on every call
  for (int size = 0; size < 4; ++size) {
    if (box_used(a_rows_of(args.m), size))
      a_maps.box[size] = bf16_row_major_map(args.a, args.k, args.m, args.lda, kBlockK, box_rows(size));
  }
  const CUtensorMap b_map = bf16_row_major_map(args.b, args.k, args.n, args.ldb, kBlockK, kStrip);
  const unsigned strips = static_cast<unsigned>(args.n / kStrip);
  kernel<<<strips, kThreads, stages.shared_bytes(), stream>>>(
      a_maps, b_map, static_cast<bf16*>(args.c), args.ldc, static_cast<const bf16*>(args.bias),
      args.accumulate ? 1 : 0, static_cast<int>(args.m), static_cast<int>(args.k / kBlockK), stages);
  MOSAIC_CUDA_CHECK_LAUNCH();
}

// K tiles per stage (docs/design/small-rows-gemm.md, "Wider stages"): 4 or 2 where the stages of
// one CTA per SM still number kMinStages at that width and the width divides K's tiles, else 1.
// Two CTAs per SM (wide strips) keep one: their budget would leave too few stages.
constexpr int kMinStages = 6;
int k_subtiles_for(int64_t m, int strip, bool one_cta_per_sm, int64_t k_tiles) {
  if (!one_cta_per_sm) return 1;
  for (const int sub : {4, 2}) {
    if (k_tiles % sub == 0 && stages_for(m, strip, true, sub).count >= kMinStages) return sub;
  }
  return 1;
}

template <int kStrip, int kRowTiles>
void launch_strip(const GemmArgs& args, cudaStream_t stream) {
  switch (k_subtiles_for(args.m, kStrip, strips_fit_one_per_sm(args.n, kStrip), args.k / kBlockK)) {
    case 4: return launch<kStrip, kRowTiles, 4>(args, stream);
    case 2: return launch<kStrip, kRowTiles, 2>(args, stream);
    default: return launch<kStrip, kRowTiles, 1>(args, stream);
  }
}

template <int kRowTiles>
void launch_rows(const GemmArgs& args, cudaStream_t stream, int strip) {
  switch (strip) {
    case 16: return launch_strip<16, kRowTiles>(args, stream);
    case 32: return launch_strip<32, kRowTiles>(args, stream);
    case 64: return launch_strip<64, kRowTiles>(args, stream);
    default: return launch_strip<128, kRowTiles>(args, stream);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace
}  // namespace small_rows_sm90

bool small_rows_gemm_fits(const GemmArgs& a) {
  using namespace small_rows_sm90;
  constexpr int64_t kMaxCoordinate = int64_t{1} << 31;  // TMA coordinates are int32
  return a.c_dtype == DType::bf16 && a.m >= 1 && a.m <= kSmallRowsMaxRows && a.k > 0 && a.k % kBlockK == 0 &&
         a.k < kMaxCoordinate && a.n > 0 && a.n % 16 == 0 && a.n < kMaxCoordinate && a.lda % 8 == 0 &&
         a.ldb % 8 == 0 && a.ldc % 2 == 0 && aligned16(a.a) && aligned16(a.b) &&
         reinterpret_cast<uintptr_t>(a.c) % 4 == 0 &&
         (a.bias == nullptr || reinterpret_cast<uintptr_t>(a.bias) % 4 == 0) && !(a.accumulate && a.bias != nullptr);
}

bool small_rows_gemm_available() {
  static std::atomic<uint64_t> asked{0}, available{0};
  return once_per_device(asked, available, [](int device) {
    return device_runs_sm90a_kernel(
        device, reinterpret_cast<const void*>(small_rows_sm90::small_rows_gemm_kernel<32, 1>));
  });
}

int small_rows_gemm_strip(int64_t n, int sm_count) {
  if (sm_count <= 0) sm_count = device_sm_count();
  for (const int strip : {128, 64, 32}) {
    if (n % strip == 0 && n / strip >= sm_count) return strip;
  }
  return n % 32 == 0 ? 32 : 16;  // small_rows_gemm_fits: n is a multiple of 16
}

void small_rows_gemm(const GemmArgs& args, cudaStream_t stream, int strip) {
  using namespace small_rows_sm90;
  if (strip == 0) strip = small_rows_gemm_strip(args.n);
  if (!small_rows_gemm_fits(args) || !small_rows_gemm_available() || args.n % strip != 0 ||
      (strip != 16 && strip != 32 && strip != 64 && strip != 128)) {
    std::fprintf(stderr,
                 "mosaic: internal error: cuda::small_rows_gemm: m %lld, n %lld, k %lld, strip %d do not fit the "
                 "kernel (bf16 C, m <= %lld, k a multiple of 64, n of the strip, 16-byte aligned rows) or the "
                 "device has none\n",
                 static_cast<long long>(args.m), static_cast<long long>(args.n), static_cast<long long>(args.k),
                 strip, static_cast<long long>(kSmallRowsMaxRows));
    std::abort();
  }
  if (args.m <= 64) return launch_rows<1>(args, stream, strip);
  return launch_rows<2>(args, stream, strip);
}

}  // namespace mosaic::cuda
