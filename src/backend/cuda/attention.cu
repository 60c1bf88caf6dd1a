// Flash attention forward on tensor cores: bf16 q/k/v, fp32 scores, softmax and accumulators,
// bf16 out; bidirectional, grouped-query heads, packed variable-length segments
// (docs/design/cuda-kernels.md, "Attention").
//
// One CTA of 8 warps owns kBlockM = 128 query rows of one (segment, q head); warp w owns rows
// 16w..16w+15. It walks the segment's keys in tiles of kBlockN (64; 32 for head_dim 256) from
// kv_begin, in order:
//   1. S [16, 64] = Q_w K_t^T        mma.sync m16n8k16, fp32 accumulators
//   2. online softmax per row: m' = max(m, rowmax S), alpha = 2^((m - m') scale log2 e),
//      P = 2^(S scale log2 e - m' scale log2 e) rounded to bf16, l = l alpha + rowsum P
//   3. O [16, head_dim] = O alpha + P V_t   (P re-used from the S registers as the A operand)
// then O / l is rounded to bf16 and stored. K and V tiles are double-buffered in shared memory
// with cp.async; Q stays in shared memory and is re-read by ldmatrix on every key tile.
//
// Exactness: a query row's arithmetic uses only that row of Q and the segment's keys and values,
// in the same instruction sequence whichever warp, tile or call it lands in (mma rows are
// independent; reductions run over the 4 lanes that share a row in a fixed butterfly; the key
// loop starts at kv_begin in fixed tiles). So splitting a segment's queries into several
// segments (query chunking) changes no output bit.
//
// Head dims: 64, 80, 96, 128 and 256 are instances with 16-byte tile copies (cp.async). Any other
// head_dim up to 256, or rows not 16-byte aligned, runs the instance of the next of those widths
// with element-wise copies: the columns past head_dim are zeros in Q, K and V, which add exact
// zeros to the scores and give output columns that are not stored.
#include "backend/cuda/attention.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/attention_epilogue.cuh"
#include "backend/cuda/attention_kernel_args.cuh"
#include "backend/cuda/attention_portable_tile.cuh"
#include "backend/cuda/attention_split_keys.h"
#include "backend/cuda/attention_sm90.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ptx.cuh"
#include "backend/cuda/shared_memory_limit.h"

namespace mosaic::cuda {
namespace {

using namespace ptx;
using portable::load_tile;
using portable::tile_offset;
using portable::TileLayout;

constexpr int kBlockM = 128;  // query rows per CTA
constexpr int kWarps = kBlockM / 16;
constexpr int kThreads = kWarps * 32;
constexpr int64_t kMaxGridZ = 65535;
constexpr int64_t kPagedKeyTileRows = 128;  // the largest key tile of the kernels (the Hopper one's)

// Keys per tile and CTAs per SM the register allocation must allow, per tile width
// (dev/cuda/attention_bench.cu measures the choices; ptxas, sm_90: 128 registers at 64 wide, 147
// at 80, 158 at 96, 194 at 128, 245 at 256, none spilled). head_dim 256 takes 32 keys a tile: its
// O accumulators alone are 128 registers a thread, and 64 keys would need 192 KiB of shared memory.
template <int kHeadDim>
constexpr int kBlockNFor = kHeadDim == 256 ? 32 : 64;
template <int kHeadDim>
constexpr int kMinBlocksFor = kHeadDim == 64 ? 2 : 1;

// A warp's rows row0 .. row0 + 15 of a staged tile, columns [0, head_dim), to out element by
// element; rows at or past q_valid are left out.
template <int kHeadDim>
__device__ __forceinline__ void store_staged_row_elements(uint32_t tile, int row0, int q_valid, int head_dim,
                                                          __nv_bfloat16* out, int64_t out_stride) {
  auto* elements = reinterpret_cast<uint16_t*>(out);
  for (int i = threadIdx.x % 32; i < 16 * head_dim; i += 32) {
    const int row = row0 + i / head_dim, column = i % head_dim;
    if (row >= q_valid) break;  // i grows with row
    elements[row * out_stride + column] =
        ld_shared_2(tile + tile_offset<kHeadDim>(row, column / 8) + (column % 8) * 2);
  }
}

using KernelArgs = AttentionKernelArgs;

// kHeadDim: the tiles' width; kElements: heads of args.head_dim <= kHeadDim columns copied element
// by element (load_tile); kMinBlocks: CTAs per SM the register allocation must allow.
template <int kHeadDim, bool kElements, int kMinBlocks = kMinBlocksFor<kHeadDim>>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    flash_attention_kernel(const KernelArgs args, int64_t segment_offset) {
  constexpr int kBlockN = kBlockNFor<kHeadDim>;
  using Rows = portable::WarpRows<kHeadDim, kBlockN>;
  constexpr uint32_t kQBytes = TileLayout<kHeadDim>::bytes(kBlockM);
  constexpr uint32_t kKVBytes = TileLayout<kHeadDim>::bytes(kBlockN);

  const QueryTile<kBlockM, kBlockN, kHeadDim, kElements> work(args, segment_offset);
  if (work.past_queries() || work.elsewhere(args)) return;
  const int q_valid = work.q_valid(), kv_tiles = work.kv_tiles();

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t q_tile = smem_address(smem);
  const uint32_t k_tiles = q_tile + kQBytes;            // [2] stages
  const uint32_t v_tiles = k_tiles + 2 * kKVBytes;      // [2] stages

  auto load_kv = [&](int t) {
    const int valid = work.key_valid(t);
    const uint32_t stage = (t & 1) * kKVBytes;
    load_tile<kHeadDim, kBlockN, kElements, kThreads>(k_tiles + stage, work.k_tile(args, t), args.k_stride, valid,
                                                      args.head_dim);
    load_tile<kHeadDim, kBlockN, kElements, kThreads>(v_tiles + stage, work.v_tile(args, t), args.v_stride, valid,
                                                      args.head_dim);
  };

  load_tile<kHeadDim, kBlockM, kElements, kThreads>(q_tile, work.q(args), args.q_stride, q_valid, args.head_dim);
  if (kv_tiles > 0) load_kv(0);
  cp_async_commit();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int quad_row = lane / 4, quad_col = lane % 4;  // mma fragment coordinates
  const bool warp_active = warp * 16 < q_valid;        // rows beyond q_count skip the math

  Rows rows;

  for (int t = 0; t < kv_tiles; ++t) {
    if (t + 1 < kv_tiles) {
      load_kv(t + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    if (warp_active) {
      rows.add_key_tile(q_tile, warp * 16, k_tiles + (t & 1) * kKVBytes, v_tiles + (t & 1) * kKVBytes,
                        work.key_valid(t), args.scale_log2);
    }
    __syncthreads();  // the stage read here is overwritten by the loads of tile t + 2
  }

  if (kv_tiles == 0) {  // a segment without keys: the Q loads may still be in flight
    cp_async_wait<0>();
    __syncthreads();
  }
  if (!warp_active) return;

  // O / l, rounded to bf16, staged through this warp's own 16 rows of the Q tile (only this warp
  // ever read them), then stored 16 bytes per lane.
  const float inv_sum[2] = {quad_row_inverse(rows.row_sum[0]), quad_row_inverse(rows.row_sum[1])};
  __syncwarp();
#pragma unroll
  for (int n = 0; n < Rows::kONTiles; ++n) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp * 16 + quad_row + 8 * half;
      const uint32_t packed = pack_bf16x2(__fmul_rn(rows.o[n][2 * half], inv_sum[half]),
                                          __fmul_rn(rows.o[n][2 * half + 1], inv_sum[half]));
      const uint32_t address = q_tile + tile_offset<kHeadDim>(row, n) + quad_col * 4;
      st_shared_4(address, packed);
    }
  }
  __syncwarp();
  if constexpr (kElements) {
    store_staged_row_elements<kHeadDim>(q_tile, warp * 16, q_valid, args.head_dim, work.out(args),
                                        args.out_stride);
  } else {
    store_staged_rows<kHeadDim>(
        q_tile, [](int row, int chunk) { return tile_offset<kHeadDim>(row, chunk); }, warp * 16, q_valid,
        work.out(args), args.out_stride);
  }
}

template <int kHeadDim>
constexpr int shared_bytes() {  // Q, K[2], V[2]
  return static_cast<int>(TileLayout<kHeadDim>::bytes(kBlockM + 4 * kBlockNFor<kHeadDim>));
}

[[noreturn]] void invalid_arguments(const char* what) {
  std::fprintf(stderr, "mosaic: internal error: cuda::attention: %s\n", what);
  std::abort();
}

bool aligned(const void* pointer, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; }

template <int kHeadDim, bool kElements, int kMinBlocks = kMinBlocksFor<kHeadDim>>
void launch(const AttentionArgs& args, const KernelArgs& kernel_args, cudaStream_t stream) {
  constexpr int kShared = shared_bytes<kHeadDim>();
  static std::atomic<uint64_t> configured{0};
  raise_shared_limit(reinterpret_cast<const void*>(flash_attention_kernel<kHeadDim, kElements, kMinBlocks>),
                     kShared, configured);
  const int64_t q_tiles = (args.max_q_rows + kBlockM - 1) / kBlockM;
  for (int64_t first = 0; first < args.segment_count; first += kMaxGridZ) {
    const dim3 grid(static_cast<unsigned>(q_tiles), static_cast<unsigned>(args.q_heads),
                    static_cast<unsigned>(std::min(kMaxGridZ, args.segment_count - first)));
    flash_attention_kernel<kHeadDim, kElements, kMinBlocks><<<grid, kThreads, kShared, stream>>>(kernel_args,
                                                                                                 first);
    MOSAIC_CUDA_CHECK_LAUNCH();
  }
}

// The segments not split, or all of them where the split-keys kernel does not run.
void run_unsplit(const AttentionArgs& args, bool rows_aligned, cudaStream_t stream) {
  const bool hopper_fits = args.head_dim == 128 && rows_aligned && hopper_attention_available();
  if ((args.kernel == AttentionKernel::hopper || args.kernel == AttentionKernel::hopper_paired) && !hopper_fits) {
    invalid_arguments("the Hopper kernel needs head_dim 128, 16-byte aligned rows and a compute capability 9.0 device");
  }
  if (args.kernel != AttentionKernel::portable && hopper_fits) {
    hopper_attention(args, stream);
    return;
  }
  const KernelArgs kernel_args = kernel_args_of(args);
  const int64_t d = args.head_dim;
  const bool copies_16 = rows_aligned && (d == 64 || d == 80 || d == 96 || d == 128 || d == 256);
  if (copies_16) {
    if (d == 64) launch<64, false>(args, kernel_args, stream);
    if (d == 80) launch<80, false>(args, kernel_args, stream);
    if (d == 96) launch<96, false>(args, kernel_args, stream);
    if (d == 128) launch<128, false>(args, kernel_args, stream);
    if (d == 256) launch<256, false>(args, kernel_args, stream);
  } else if (d <= 64) {
    launch<64, true>(args, kernel_args, stream);
  } else if (d <= 80) {
    launch<80, true>(args, kernel_args, stream);
  } else if (d <= 96) {
    launch<96, true>(args, kernel_args, stream);
  } else if (d <= 128) {
    launch<128, true>(args, kernel_args, stream);
  } else {
    launch<256, true>(args, kernel_args, stream);
  }
}

}  // namespace

void attention(const AttentionArgs& args, cudaStream_t stream) {
  if (args.segment_count <= 0 || args.max_q_rows <= 0) return;
  if (!attention_supports_head_dim(args.head_dim)) invalid_arguments("head_dim must be 1 to 256");
  if (args.q_heads <= 0 || args.kv_heads <= 0 || args.q_heads % args.kv_heads != 0 ||
      args.q_heads > 65535) {
    invalid_arguments("q_heads must be a positive multiple of kv_heads, at most 65535");
  }
  if (args.q_stride < args.q_heads * args.head_dim || args.out_stride < args.q_heads * args.head_dim ||
      args.k_stride < args.kv_heads * args.head_dim || args.v_stride < args.kv_heads * args.head_dim) {
    invalid_arguments("a row stride is smaller than heads x head_dim");
  }
  if (!aligned(args.q, 2) || !aligned(args.k, 2) || !aligned(args.v, 2) || !aligned(args.out, 2))
    invalid_arguments("q, k, v, out must be bf16-aligned pointers");
  // Every head's row starts 16-byte aligned: the 16-byte tile copies apply.
  const bool rows_aligned = args.head_dim % 8 == 0 && args.q_stride % 8 == 0 && args.k_stride % 8 == 0 &&
                            args.v_stride % 8 == 0 && args.out_stride % 8 == 0 && aligned(args.q, 16) &&
                            aligned(args.k, 16) && aligned(args.v, 16) && aligned(args.out, 16);
  if (!(args.scale > 0.0f)) invalid_arguments("scale must be positive");
  if (args.kv_pages != nullptr && (args.page_rows <= 0 || args.page_rows % kPagedKeyTileRows != 0))
    invalid_arguments("KV cache pages must hold a multiple of 128 positions");
  if ((args.max_q_rows + kBlockM - 1) / kBlockM > 0x7fffffff) invalid_arguments("max_q_rows");

  // Split segments run in the split-keys kernel where it runs; the other kernels then skip them.
  const bool split_here = args.max_split_q_rows > 0 && split_keys_attention_fits(args);
  if (split_here) {
    split_keys_attention(args, stream);
    if (args.unsplit_segments == 0) return;
  }
  AttentionArgs rest = args;
  rest.split_segments_elsewhere = split_here;
  run_unsplit(rest, rows_aligned, stream);
}

}  // namespace mosaic::cuda
