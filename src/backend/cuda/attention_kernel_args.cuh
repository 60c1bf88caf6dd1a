// What both attention kernels (attention.cu, attention_sm90.cu) receive: validated AttentionArgs
// as typed pointers, with the scale taken to base 2 (scores are exponentiated with ex2); and the
// work of one CTA, which every kernel derives from its block index the same way. Include only
// from .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention.h"
#include "backend/cuda/ptx.cuh"

namespace mosaic::cuda {

struct AttentionKernelArgs {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  __nv_bfloat16* out;
  int64_t q_stride, k_stride, v_stride, out_stride;
  int group;          // q heads per kv head
  int head_dim;       // the heads' width in elements (a kernel's tiles may be wider)
  float scale_log2;   // scale * log2(e): scores are taken to base 2 in one multiply
  const AttentionSegment* segments;
  const int32_t* kv_pages;  // paged segments' page table (AttentionSegment::kv_pages)
  int64_t page_rows;
  bool skip_split_segments;  // segments with key_splits > 0 run in the split-keys kernel instead
};

inline AttentionKernelArgs kernel_args_of(const AttentionArgs& args) {
  AttentionKernelArgs kernel_args;
  kernel_args.q = static_cast<const __nv_bfloat16*>(args.q);
  kernel_args.k = static_cast<const __nv_bfloat16*>(args.k);
  kernel_args.v = static_cast<const __nv_bfloat16*>(args.v);
  kernel_args.out = static_cast<__nv_bfloat16*>(args.out);
  kernel_args.q_stride = args.q_stride, kernel_args.k_stride = args.k_stride;
  kernel_args.v_stride = args.v_stride, kernel_args.out_stride = args.out_stride;
  kernel_args.group = static_cast<int>(args.q_heads / args.kv_heads);
  kernel_args.head_dim = static_cast<int>(args.head_dim);
  kernel_args.scale_log2 = args.scale * 1.4426950408889634f;
  kernel_args.segments = args.segments;
  kernel_args.kv_pages = args.kv_pages, kernel_args.page_rows = args.page_rows;
  kernel_args.skip_split_segments = args.split_segments_elsewhere;
  return kernel_args;
}

// The work of one CTA (grid = query tiles x q heads x segments): query rows [q_row0, q_row0 +
// kBlockM) of q head blockIdx.y in segment segment_offset + blockIdx.z, against the segment's
// keys in tiles of kBlockN from kv_begin. A tile that starts past the segment's queries
// (past_queries()) has nothing to do. A head's columns start at head x kHeadDim, or, with
// kRuntimeHeadDim (a kernel whose tiles are wider than the heads), at head x args.head_dim.
template <int kBlockM, int kBlockN, int kHeadDim, bool kRuntimeHeadDim = false>
struct QueryTile {
  AttentionSegment segment;
  int64_t q_row0;  // first query row of the tile, within the segment
  int head, kv_head;

  __device__ __forceinline__ QueryTile(const AttentionKernelArgs& args, int64_t segment_offset)
      : QueryTile(args, segment_offset, blockIdx.x) {}
  // Query tile `q_tile` of the segment (a kernel whose x extent holds more than the query tiles).
  __device__ __forceinline__ QueryTile(const AttentionKernelArgs& args, int64_t segment_offset, int64_t q_tile)
      : segment(args.segments[segment_offset + blockIdx.z]),
        q_row0(q_tile * kBlockM),
        head(static_cast<int>(blockIdx.y)),
        kv_head(static_cast<int>(blockIdx.y) / args.group) {}

  __device__ __forceinline__ bool past_queries() const { return q_row0 >= segment.q_count; }
  // The segment is another kernel's: split-keys segments when that kernel runs them.
  __device__ __forceinline__ bool elsewhere(const AttentionKernelArgs& args) const {
    return args.skip_split_segments && segment.key_splits > 0;
  }
  // Rows of the tile inside the segment.
  __device__ __forceinline__ int q_valid() const {
    return static_cast<int>(ptx::min64(kBlockM, segment.q_count - q_row0));
  }
  __device__ __forceinline__ int kv_tiles() const {
    return static_cast<int>((segment.kv_count + kBlockN - 1) / kBlockN);
  }
  // Keys of key tile t inside the segment (kBlockN but for the last).
  __device__ __forceinline__ int key_valid(int t) const {
    return static_cast<int>(ptx::min64(kBlockN, segment.kv_count - int64_t{t} * kBlockN));
  }
  __device__ __forceinline__ static int64_t width(const AttentionKernelArgs& args) {
    if constexpr (kRuntimeHeadDim) return args.head_dim;
    return kHeadDim;
  }
  // The tile's first row of Q and of the output, each at this head's columns.
  __device__ __forceinline__ const __nv_bfloat16* q(const AttentionKernelArgs& args) const {
    return args.q + (segment.q_begin + q_row0) * args.q_stride + int64_t{head} * width(args);
  }
  __device__ __forceinline__ __nv_bfloat16* out(const AttentionKernelArgs& args) const {
    return args.out + (segment.q_begin + q_row0) * args.out_stride + int64_t{head} * width(args);
  }
  // The K and V row of key tile t's first key: kv_begin + t kBlockN, or for a paged segment that
  // position's row in the cache (the host checked that a page holds whole tiles).
  __device__ __forceinline__ int64_t key_tile_row(const AttentionKernelArgs& args, int t) const {
    const int64_t position = segment.kv_begin + int64_t{t} * kBlockN;
    if (segment.kv_pages < 0) return position;
    return int64_t{args.kv_pages[segment.kv_pages + position / args.page_rows]} * args.page_rows +
           position % args.page_rows;
  }
  // Key tile t's first row of K and of V at this head's columns.
  __device__ __forceinline__ const __nv_bfloat16* k_tile(const AttentionKernelArgs& args, int t) const {
    return args.k + key_tile_row(args, t) * args.k_stride + int64_t{kv_head} * width(args);
  }
  __device__ __forceinline__ const __nv_bfloat16* v_tile(const AttentionKernelArgs& args, int t) const {
    return args.v + key_tile_row(args, t) * args.v_stride + int64_t{kv_head} * width(args);
  }
};

}  // namespace mosaic::cuda
