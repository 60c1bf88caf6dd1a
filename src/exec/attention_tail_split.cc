#include "exec/attention_tail_split.h"

namespace mosaic {

std::optional<AttentionTailSplit> attention_tail_split(const Graph& graph, size_t index) {
  if (index + 1 >= graph.ops.size()) return std::nullopt;
  const GraphOp& attention = graph.ops[index];
  const GraphOp& projection = graph.ops[index + 1];
  if (attention.kind != OpKind::attention || attention.segment_count != 1) return std::nullopt;
  const AttentionSegment& segment = graph.segments.at(static_cast<size_t>(attention.segment_begin));
  if (segment.q_begin != 0 || segment.q_count != attention.rows || attention.rows < kAttentionMinRowsForTailSplit)
    return std::nullopt;
  const bool projects_this_output = projection.kind == OpKind::linear && projection.weight == WeightRole::o &&
                                    projection.accumulate && projection.a.tensor == attention.out.tensor &&
                                    projection.a.row == attention.out.row && projection.rows == attention.rows;
  if (!projects_this_output) return std::nullopt;
  // Whole pairs of 128-row query tiles before the split, so that the head part runs in the
  // attention kernels' paired CTAs where the whole op would.
  constexpr int64_t kQueryTilePair = 256;
  const int64_t head_rows = (attention.rows - kAttentionTailRows) / kQueryTilePair * kQueryTilePair;
  AttentionTailSplit split;
  split.head = segment, split.head.q_count = head_rows;
  split.tail = segment, split.tail.q_begin = head_rows, split.tail.q_count = attention.rows - head_rows;
  return split;
}

}  // namespace mosaic
