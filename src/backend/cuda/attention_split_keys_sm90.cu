// Split-keys attention (docs/design/split-keys-attention.md): a segment's keys in key_splits = P
// parts, each on one CTA of a cluster of P, merged through distributed shared memory.
//
// One launch per part count P present. Grid: x = P x query tiles (clusters of P CTAs along x: one
// cluster per query tile of 64 rows), y = q heads, z = segments; segments of other part counts
// leave at once. CTA `rank` of the cluster takes key tiles [rank T / P, (rank + 1) T / P) of the
// segment's T tiles of 64 keys, from a fresh state, with the portable kernel's per-tile
// arithmetic (attention_portable_tile.cuh). It leaves its rows' running max m, normaliser l and
// unnormalised O (fp32) in its shared memory. After a cluster barrier, CTA r merges the rows
// congruent to r mod P, one column per thread, reading every part's state from the CTAs that hold
// it, in the parts' order:
//   m' = max(m, m_s);  l = l 2^((m - m') c) + l_s 2^((m_s - m') c);  O likewise;  m = m'
// (parts without keys, m_s = -inf, are skipped), then stores O / l as bf16. A second barrier
// keeps every CTA's shared memory alive until all merges have read it.
//
// When the query tiles alone fill the GPU (a batch of many sequences), a second kernel runs a
// tile's parts in turn on one CTA and folds each into the merge as it finishes, with the same
// per-part arithmetic and the same merge step (merge_weights, merge_value): the same bits, with
// no extra CTAs.
//
// Exactness: a row's parts and their order depend only on the segment's key count and
// key_splits, its arithmetic within a part only on its Q row and the part's keys, and its merge
// only on the parts' states: splitting a segment's queries (query chunking) or batching changes
// no output bit. Splitting keys rounds differently from one pass over them, which is why a
// segment is split or not by a rule that chunking cannot change (core/attention_segment.h).
#include "backend/cuda/attention_split_keys.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/attention_epilogue.cuh"
#include "backend/cuda/attention_kernel_args.cuh"
#include "backend/cuda/attention_portable_tile.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/once_per_device.h"
#include "backend/cuda/pair_launch.h"
#include "backend/cuda/ptx.cuh"
#include "backend/cuda/shared_memory_limit.h"
#include "backend/cuda/sm90_ptx.cuh"

namespace mosaic::cuda {
namespace {

using namespace ptx;

constexpr int kHeadDim = 128;
constexpr int kBlockM = 64;  // query rows per CTA: 4 warps of 16
constexpr int kBlockN = 64;  // keys per tile
constexpr int kThreads = 128;
constexpr unsigned kCluster = 8;
static_assert(kCluster == static_cast<unsigned>(kMaxKeySplits), "one part per CTA of a cluster");
constexpr int64_t kMaxGridZ = 65535;

using Layout = portable::TileLayout<kHeadDim>;
using Rows = portable::WarpRows<kHeadDim, kBlockN>;
constexpr uint32_t kQBytes = Layout::bytes(kBlockM);
constexpr uint32_t kKVBytes = Layout::bytes(kBlockN);
// A part's state, written over the K/V stages once the key loop is done: O [64][128] fp32, then
// m [64] and l [64].
constexpr uint32_t kPartO = 0, kPartMax = kBlockM * kHeadDim * 4, kPartSum = kPartMax + kBlockM * 4;

// kStages: K/V tiles in flight (a ring of stages); kStages - 1 are loading while one is computed.
template <int kStages>
constexpr int shared_bytes() {
  return static_cast<int>(kQBytes + 2 * kStages * kKVBytes);
}

using KernelArgs = AttentionKernelArgs;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Tiles [first_tile, end_tile) of the tile's keys into `rows` (the warp's 16 query rows, if it has
// any), through a ring of kStages K/V stages after the Q tile at `q_tile` (loaded first when
// `load_q`; it stays). Ends with every load landed and every warp done with the stages.
template <int kStages, int kProbe>
__device__ __forceinline__ void walk_part(const KernelArgs& args, const QueryTile<kBlockM, kBlockN, kHeadDim>& work,
                                          int first_tile, int end_tile, uint32_t q_tile, bool load_q,
                                          bool warp_active, Rows& rows) {
  const uint32_t k_tiles = q_tile + kQBytes;              // [kStages]
  const uint32_t v_tiles = k_tiles + kStages * kKVBytes;  // [kStages]
  auto load_kv = [&](int t) {
    const int valid = work.key_valid(t);
    const uint32_t stage = static_cast<uint32_t>((t - first_tile) % kStages) * kKVBytes;
    portable::load_tile<kHeadDim, kBlockN, false, kThreads>(k_tiles + stage, work.k_tile(args, t), args.k_stride,
                                                            valid, kHeadDim);
    portable::load_tile<kHeadDim, kBlockN, false, kThreads>(v_tiles + stage, work.v_tile(args, t), args.v_stride,
                                                            valid, kHeadDim);
  };

  // Commit groups: Q with the first tile, then one group per tile (empty past the part's end), so
  // that "all but the newest kStages - 2 groups done" always means "tile t has landed".
  if (load_q) {
    portable::load_tile<kHeadDim, kBlockM, false, kThreads>(q_tile, work.q(args), args.q_stride, work.q_valid(),
                                                            kHeadDim);
  }
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (first_tile + i < end_tile) load_kv(first_tile + i);
    cp_async_commit();
  }

  const int warp = threadIdx.x / 32;
  for (int t = first_tile; t < end_tile; ++t) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile t is in; every warp is done with tile t - 1, whose stage is reloaded next
    if (t + kStages - 1 < end_tile) load_kv(t + kStages - 1);
    cp_async_commit();
    if (warp_active && kProbe < 2) {
      const uint32_t stage = static_cast<uint32_t>((t - first_tile) % kStages) * kKVBytes;
      rows.add_key_tile(q_tile, warp * 16, k_tiles + stage, v_tiles + stage, work.key_valid(t), args.scale_log2);
    }
  }
  cp_async_wait<0>();  // the Q loads, where there were no keys
  __syncthreads();     // every warp is done with the stages (the state is written over them)
}

// One step of the in-order merge of the parts' states (m, l, O) with part s's (m_s, l_s, O_s):
//   m' = max(m, m_s);  l = l_s 2^((m_s - m') c) + l 2^((m - m') c);  O likewise;  m = m'.
// Both kernels below merge through these two functions: the same bits either way.
struct MergeWeights {
  float merged, keep, take;
};
__device__ __forceinline__ MergeWeights merge_weights(float m, float m_s, float scale_log2) {
  const float merged = fmaxf(m, m_s);
  return {merged, exp2_approx(__fmul_rn(__fsub_rn(m, merged), scale_log2)),
          exp2_approx(__fmul_rn(__fsub_rn(m_s, merged), scale_log2))};
}
__device__ __forceinline__ float merge_value(float value, float value_s, const MergeWeights& w) {
  return __fmaf_rn(value_s, w.take, __fmul_rn(value, w.keep));
}

#endif

// kProbe (the workbench's, 0 in the engine): 1 leaves out the merge, 2 the merge and the math.
template <int kStages, int kProbe = 0>
__global__ void __launch_bounds__(kThreads, kStages <= 3 ? 2 : 1)
    split_keys_attention_kernel(const KernelArgs args, int64_t segment_offset) {
  static_assert(kPartSum + kBlockM * 4 <= 2 * kStages * kKVBytes, "a part's state fits the K/V stages");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const uint32_t rank = sm90::cluster_rank();
  const uint32_t parts_here = sm90::cluster_size();
  const QueryTile<kBlockM, kBlockN, kHeadDim> work(args, segment_offset, blockIdx.x / parts_here);
  // The same segment and query tile for the whole cluster: all of it leaves, or none. A launch
  // runs the segments of one part count, its cluster size.
  if (work.segment.key_splits != static_cast<int64_t>(parts_here) || work.past_queries()) return;
  const int q_valid = work.q_valid();
  const int64_t tiles = work.kv_tiles();
  const int first_tile = static_cast<int>(rank * tiles / parts_here);
  const int end_tile = static_cast<int>((rank + 1) * tiles / parts_here);

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t q_tile = smem_address(smem);
  const uint32_t part = q_tile + kQBytes;  // the part's state, over the K/V stages after the key loop
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int quad_row = lane / 4, quad_col = lane % 4;
  const bool warp_active = warp * 16 < q_valid;
  Rows rows;
  walk_part<kStages, kProbe>(args, work, first_tile, end_tile, q_tile, true, warp_active, rows);

  // This part's state: l summed over the quad (quad_total, as quad_row_inverse sums it).
  if (warp_active) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp * 16 + quad_row + 8 * half;
      const float total = quad_total(rows.row_sum[half]);
      if (quad_col == 0) {
        st_shared_4(part + kPartMax + row * 4, __float_as_uint(rows.row_max[half]));
        st_shared_4(part + kPartSum + row * 4, __float_as_uint(total));
      }
#pragma unroll
      for (int n = 0; n < Rows::kONTiles; ++n) {
        const uint32_t at = part + kPartO + (row * kHeadDim + n * 8 + 2 * quad_col) * 4;
        st_shared_4(at, __float_as_uint(rows.o[n][2 * half]));
        st_shared_4(at + 4, __float_as_uint(rows.o[n][2 * half + 1]));
      }
    }
  }
  if constexpr (kProbe > 0) return;
  sm90::cluster_sync();

  // Merge rows rank, rank + P, ... of the tile, column threadIdx.x of each, over the parts in
  // order; every part's values are loaded before the first is used (remote loads are slow).
  const int column = static_cast<int>(threadIdx.x);
  __nv_bfloat16* out = work.out(args);
  for (int row = static_cast<int>(rank); row < q_valid; row += static_cast<int>(parts_here)) {
    float m_s[kCluster], l_s[kCluster], o_s[kCluster];
#pragma unroll
    for (uint32_t s = 0; s < kCluster; ++s) {
      if (s < parts_here) {
        m_s[s] = sm90::ld_cluster_shared_f32(sm90::cluster_shared_address(part + kPartMax + row * 4, s));
        l_s[s] = sm90::ld_cluster_shared_f32(sm90::cluster_shared_address(part + kPartSum + row * 4, s));
        o_s[s] = sm90::ld_cluster_shared_f32(
            sm90::cluster_shared_address(part + kPartO + (row * kHeadDim + column) * 4, s));
      }
    }
    float m = -INFINITY, l = 0.0f, o = 0.0f;
#pragma unroll
    for (uint32_t s = 0; s < kCluster; ++s) {
      if (s >= parts_here || m_s[s] == -INFINITY) continue;  // a part without keys
      const MergeWeights w = merge_weights(m, m_s[s], args.scale_log2);
      l = merge_value(l, l_s[s], w);
      o = merge_value(o, o_s[s], w);
      m = w.merged;
    }
    out[int64_t{row} * args.out_stride + column] = __float2bfloat16_rn(__fmul_rn(o, row_inverse(l)));
  }
  sm90::cluster_sync();  // every merge has read every part's state
#endif
}

// The same parts on one CTA, one after the other, merged as they finish, with the merge above:
// the clustered kernel's bits, for launches that fill the GPU with query tiles anyway (a batch
// of many sequences), where a cluster per tile would only add CTAs. Grid: x = query tiles,
// y = q heads, z = segments; a launch runs the segments of one part count, `parts`.
template <int kStages>
__global__ void __launch_bounds__(kThreads, kStages <= 3 ? 2 : 1)
    split_keys_in_turn_kernel(const KernelArgs args, int64_t segment_offset, int parts) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const QueryTile<kBlockM, kBlockN, kHeadDim> work(args, segment_offset);
  if (work.segment.key_splits != parts || work.past_queries()) return;
  const int q_valid = work.q_valid();
  const int64_t tiles = work.kv_tiles();
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t q_tile = smem_address(smem);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int quad_row = lane / 4, quad_col = lane % 4;
  const bool warp_active = warp * 16 < q_valid;

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[Rows::kONTiles][4] = {};
  for (int p = 0; p < parts; ++p) {
    Rows rows;
    const int first_tile = static_cast<int>(p * tiles / parts), end_tile = static_cast<int>((p + 1) * tiles / parts);
    walk_part<kStages, 0>(args, work, first_tile, end_tile, q_tile, p == 0, warp_active, rows);
    if (!warp_active) continue;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float total = quad_total(rows.row_sum[half]);
      if (rows.row_max[half] == -INFINITY) continue;  // a part without keys
      const MergeWeights w = merge_weights(m[half], rows.row_max[half], args.scale_log2);
      l[half] = merge_value(l[half], total, w);
#pragma unroll
      for (int n = 0; n < Rows::kONTiles; ++n) {
        o[n][2 * half] = merge_value(o[n][2 * half], rows.o[n][2 * half], w);
        o[n][2 * half + 1] = merge_value(o[n][2 * half + 1], rows.o[n][2 * half + 1], w);
      }
      m[half] = w.merged;
    }
  }
  if (!warp_active) return;
  __nv_bfloat16* out = work.out(args);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = warp * 16 + quad_row + 8 * half;
    if (row >= q_valid) continue;
    const float inverse = row_inverse(l[half]);
#pragma unroll
    for (int n = 0; n < Rows::kONTiles; ++n) {
      __nv_bfloat16* at = out + int64_t{row} * args.out_stride + n * 8 + 2 * quad_col;
      at[0] = __float2bfloat16_rn(__fmul_rn(o[n][2 * half], inverse));
      at[1] = __float2bfloat16_rn(__fmul_rn(o[n][2 * half + 1], inverse));
    }
  }
#endif
}

// Lets the kernel use its shared memory on the current device (once per device).
template <int kStages>
void configure() {
  static std::atomic<uint64_t> configured{0};
  raise_shared_limit(reinterpret_cast<const void*>(split_keys_attention_kernel<kStages>), shared_bytes<kStages>(),
                     configured);
}

// Whether the parts run in turn on one CTA per query tile: when those CTAs alone already fill
// every SM twice over (the kernel's occupancy), a cluster per tile would only add CTAs, each
// short. Either way the bits are the same.
bool parts_in_turn(const AttentionArgs& args, int64_t q_tiles) {
  if (args.split_keys != AttentionSplitKeys::automatic) return args.split_keys == AttentionSplitKeys::in_turn;
  const int64_t split_segments = args.segment_count - args.unsplit_segments;
  return q_tiles * args.q_heads * split_segments >= 2 * int64_t{device_sm_count()};
}

template <int kStages, int kProbe = 0>
void launch(const AttentionArgs& args, cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0}, configured_in_turn{0};
  raise_shared_limit(reinterpret_cast<const void*>(split_keys_attention_kernel<kStages, kProbe>),
                     shared_bytes<kStages>(), configured);
  const KernelArgs kernel_args = kernel_args_of(args);
  const int64_t q_tiles = (args.max_split_q_rows + kBlockM - 1) / kBlockM;
  const bool in_turn = kProbe == 0 && parts_in_turn(args, q_tiles);
  if (in_turn) {
    raise_shared_limit(reinterpret_cast<const void*>(split_keys_in_turn_kernel<kStages>), shared_bytes<kStages>(),
                       configured_in_turn);
  }
  for (unsigned parts = 1; parts <= kCluster; ++parts) {  // one launch per part count present
    if ((args.split_part_counts >> parts & 1u) == 0) continue;
    for (int64_t first = 0; first < args.segment_count; first += kMaxGridZ) {
      const unsigned segments = static_cast<unsigned>(std::min(kMaxGridZ, args.segment_count - first));
      if (in_turn) {
        const dim3 grid(static_cast<unsigned>(q_tiles), static_cast<unsigned>(args.q_heads), segments);
        split_keys_in_turn_kernel<kStages><<<grid, kThreads, shared_bytes<kStages>(), stream>>>(
            kernel_args, first, static_cast<int>(parts));
      } else {
        const dim3 grid(static_cast<unsigned>(q_tiles * parts), static_cast<unsigned>(args.q_heads), segments);
        const ClusterLaunchConfig config(grid, dim3(kThreads), shared_bytes<kStages>(), stream, parts);
        MOSAIC_CUDA_CHECK(
            cudaLaunchKernelEx(&config.config, split_keys_attention_kernel<kStages, kProbe>, kernel_args, first));
      }
      MOSAIC_CUDA_CHECK_LAUNCH();
    }
  }
}

// The engine's ring (dev/cuda/split_keys_bench.cu times the others).
constexpr int kEngineStages = 3;

// Whether the current device runs the kernel in clusters of eight, the most parts (a MIG slice or a
// smaller part need not offer eight SMs of one GPC with the shared memory free).
bool device_runs_split_keys(int device) {
  const void* kernel = reinterpret_cast<const void*>(split_keys_attention_kernel<kEngineStages>);
  if (!device_runs_sm90a_kernel(device, kernel)) return false;
  configure<kEngineStages>();
  const ClusterLaunchConfig config(dim3(kCluster, 1, 1), dim3(kThreads), shared_bytes<kEngineStages>(), nullptr,
                                   kCluster);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, split_keys_attention_kernel<kEngineStages>, &config.config) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return clusters > 0;
}

bool aligned_16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

bool split_keys_attention_fits(const AttentionArgs& args) {
  if (args.head_dim != kHeadDim || args.q_stride % 8 != 0 || args.k_stride % 8 != 0 || args.v_stride % 8 != 0 ||
      !aligned_16(args.q) || !aligned_16(args.k) || !aligned_16(args.v)) {
    return false;
  }
  return split_keys_attention_available();
}

bool split_keys_attention_available() {
  // MOSAIC_SPLIT_KEYS=0 runs every segment in one pass (benchmarks compare the two).
  static const bool switched_off = [] {
    const char* value = std::getenv("MOSAIC_SPLIT_KEYS");
    return value != nullptr && std::string_view(value) == "0";
  }();
  if (switched_off) return false;
  static std::atomic<uint64_t> asked{0}, answers{0};
  return once_per_device(asked, answers, device_runs_split_keys);
}

void split_keys_attention(const AttentionArgs& args, cudaStream_t stream) {
  if (args.max_split_q_rows > 0) launch<kEngineStages>(args, stream);
}

}  // namespace mosaic::cuda
