// The last query rows of a long attention op, run beside the o-projection of the rows before
// them (docs/design/attention-tail.md).
//
// A long attention op is thousands of CTAs of equal work (a 32k LLaDA-8B layer: 8,192 on 132
// SMs, 62.06 waves), so its last wave keeps a few SMs busy while the rest wait for the
// o-projection, which needs every head of its rows. The CUDA executor splits such an op at a
// query row: the head part runs on the step's stream, the tail part (kAttentionTailRows rows,
// all heads) on a side stream of lower priority, which the GPU serves when the head part has no
// CTA left to start, i.e. in its last wave; the o-projection of the head rows follows on the
// step's stream while the tail still runs, and that of the tail rows once it is done. A row's
// attention and projection are the same arithmetic either way (query chunking is bit-exact and a
// GEMM's rows are independent of the call's row count: backend/cuda/gemm.h), so outputs do not
// change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/attention_segment.h"
#include "graph/graph.h"

namespace mosaic {

// Attention ops with fewer query rows than this are not split: their last wave is short, and two
// launches cost more than it idles.
inline constexpr int64_t kAttentionMinRowsForTailSplit = 8192;
// Rows the tail part holds (plus the head part's remainder past a multiple of 256, a pair of the
// attention kernels' 128-row query tiles): 4 query tiles of every head, about one wave of CTAs on
// an H200 for LLaDA-8B and Dream-7B. (256, 512 and 1,024 rows measured within noise of one
// another; 512 was best at 32k for both models: docs/design/attention-tail.md.)
inline constexpr int64_t kAttentionTailRows = 512;

struct AttentionTailSplit {
  AttentionSegment head, tail;  // the op's one segment, its query rows before and from the split
  int64_t head_rows() const { return head.q_count; }  // the o-projection's rows before the split
};

// Whether graph.ops[index] is an attention op to split, and where: one segment whose query rows
// are the op's rows (at least kAttentionMinRowsForTailSplit), followed by its o-projection into
// the residual over the same rows. Nothing otherwise (batched segments, short ops, any other
// successor).
std::optional<AttentionTailSplit> attention_tail_split(const Graph& graph, size_t index);

}  // namespace mosaic
