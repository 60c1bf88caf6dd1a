// Bidirectional flash attention on bf16 with grouped-query heads over packed variable-length
// sequences: no [L, L] matrix ever exists in memory (online softmax over key tiles, fp32
// accumulation). Query head h reads kv head h / (q_heads / kv_heads). Segments are the CPU
// backend's (core/attention_segment.h): each names query rows and the key/value rows they attend
// to, so whole sequences, query chunks and candidate-only rows use one kernel.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>

#include "core/attention_segment.h"

namespace mosaic::cuda {

// Which kernel runs for a segment that is not split (AttentionSegment::key_splits == 0):
// automatic takes the Hopper (wgmma) kernel for head_dim 128 on compute
// capability 9.0, the portable (mma.sync, sm_80+) kernel otherwise. Tests and benchmarks name one.
// The Hopper kernel runs its CTAs in pairs that share K/V tiles when there are many query tiles
// (attention_sm90.cu); hopper_paired pairs them whenever their number is even, so that tests reach
// the pairs at small sizes. No output bit depends on the choice.
enum class AttentionKernel { automatic, portable, hopper, hopper_paired };
// How the split-keys kernel (attention_split_keys.h) runs a segment's parts: automatic takes a
// cluster of CTAs per query tile, one part each, unless the query tiles alone fill the GPU; in_turn
// runs the parts one after the other on one CTA. Both give the same bits (tests compare them).
enum class AttentionSplitKeys { automatic, clusters, in_turn };

struct AttentionArgs {
  const void* q = nullptr;  int64_t q_stride = 0;    // bf16 [rows, q_heads, head_dim]
  const void* k = nullptr;  int64_t k_stride = 0;    // bf16 [rows, kv_heads, head_dim]
  const void* v = nullptr;  int64_t v_stride = 0;    // bf16 [rows, kv_heads, head_dim]
  void* out = nullptr;      int64_t out_stride = 0;  // bf16 [rows, q_heads, head_dim]
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;   // head_dim 1 .. 256
  float scale = 0;
  const AttentionSegment* segments = nullptr;        // device array
  int64_t segment_count = 0;
  int64_t max_q_rows = 0;                            // max q_count over segments (grid size)
  // Segments with AttentionSegment::key_splits > 0: the most query rows of one (0: none), and how
  // many segments have none. On a device that runs the split-keys kernel
  // (attention_split_keys.h) the split ones run there, the others in the kernels above.
  int64_t max_split_q_rows = 0;
  int64_t unsplit_segments = 0;
  uint32_t split_part_counts = 0;  // bit p: some segment has key_splits = p
  bool split_segments_elsewhere = false;  // set by attention(): the kernels below skip split segments
  // Paged segments (AttentionSegment::kv_pages >= 0: a KV cache) find their keys' rows through
  // this device page table, pages of page_rows positions (a multiple of 128, so that every key
  // tile lies in one page).
  const int32_t* kv_pages = nullptr;
  int64_t page_rows = 0;
  AttentionKernel kernel = AttentionKernel::automatic;
  AttentionSplitKeys split_keys = AttentionSplitKeys::automatic;
};

void attention(const AttentionArgs& args, cudaStream_t stream);

// Sets the fields attention() reads from the segments' host copy: max_q_rows, and for split-keys
// segments max_split_q_rows, unsplit_segments and split_part_counts.
inline void summarize_segments(AttentionArgs& args, std::span<const AttentionSegment> host_segments) {
  args.max_q_rows = args.max_split_q_rows = args.unsplit_segments = 0;
  args.split_part_counts = 0;
  for (const AttentionSegment& s : host_segments) {
    args.max_q_rows = std::max(args.max_q_rows, s.q_count);
    if (s.key_splits > 0) {
      args.max_split_q_rows = std::max(args.max_split_q_rows, s.q_count);
      args.split_part_counts |= uint32_t{1} << s.key_splits;
    } else {
      ++args.unsplit_segments;
    }
  }
}

// The head dimensions the kernels take: 64, 80, 96, 128 and 256 at full speed (16-byte aligned
// rows), any other up to 256 through the next of those widths with element-wise copies. A model
// with a wider head is refused (or run on the CPU) before its first step
// (api/step_runner_factory.cc), never aborted in a launch.
inline constexpr int64_t kAttentionMaxHeadDim = 256;
inline constexpr bool attention_supports_head_dim(int64_t head_dim) {
  return head_dim >= 1 && head_dim <= kAttentionMaxHeadDim;
}

}  // namespace mosaic::cuda
