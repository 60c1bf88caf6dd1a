#include "exec/attention_tail_split.h"

#include <gtest/gtest.h>

#include "exec/tiny_step_graph.h"

namespace mosaic {
namespace {

std::vector<size_t> attention_ops(const Graph& graph) {
  std::vector<size_t> found;
  for (size_t i = 0; i < graph.ops.size(); ++i)
    if (graph.ops[i].kind == OpKind::attention) found.push_back(i);
  return found;
}

TEST(AttentionTailSplit, SplitsLongSingleSequenceOpsAtAQueryTile) {
  const Graph graph = tiny_step_graph({{9000}, {3000}});
  const std::vector<size_t> ops = attention_ops(graph);
  ASSERT_GE(ops.size(), 2u);
  for (size_t n = 0; n + 1 < ops.size(); ++n) {  // every layer but the last (over the candidates)
    const std::optional<AttentionTailSplit> split = attention_tail_split(graph, ops[n]);
    ASSERT_TRUE(split.has_value()) << "attention op " << ops[n];
    // 9000 - 512 = 8488 rows, down to a multiple of 256: 8448; the tail keeps 552.
    EXPECT_EQ(split->head_rows(), 8448);
    EXPECT_EQ(split->head.q_begin, 0);
    EXPECT_EQ(split->head.q_count, 8448);
    EXPECT_EQ(split->tail.q_begin, 8448);
    EXPECT_EQ(split->tail.q_count, 552);
    for (const AttentionSegment& part : {split->head, split->tail}) {
      EXPECT_EQ(part.kv_begin, 0);
      EXPECT_EQ(part.kv_count, 9000);
    }
  }
  EXPECT_FALSE(attention_tail_split(graph, ops.back()).has_value()) << "3,000 candidate rows: too short";
}

TEST(AttentionTailSplit, LeavesOtherOpsAlone) {
  // Shorter than kAttentionMinRowsForTailSplit.
  const Graph short_graph = tiny_step_graph({{8000}, {10}});
  for (size_t op : attention_ops(short_graph)) EXPECT_FALSE(attention_tail_split(short_graph, op));
  // Two sequences: two segments per attention op.
  const Graph batch = tiny_step_graph({{9000, 300}, {10, 10}});
  for (size_t op : attention_ops(batch)) EXPECT_FALSE(attention_tail_split(batch, op));
  // Query chunks of 4,500 rows.
  const Graph chunked = tiny_step_graph({{9000}, {10}}, {.attention = 2});
  for (size_t op : attention_ops(chunked)) EXPECT_FALSE(attention_tail_split(chunked, op));
  // Not an attention op, and an attention op whose successor is not its o-projection.
  Graph graph = tiny_step_graph({{9000}, {10}});
  const size_t first = attention_ops(graph).front();
  EXPECT_FALSE(attention_tail_split(graph, first + 1));
  ASSERT_TRUE(attention_tail_split(graph, first));
  graph.ops[first + 1].accumulate = false;
  EXPECT_FALSE(attention_tail_split(graph, first));
  EXPECT_FALSE(attention_tail_split(graph, graph.ops.size() - 1));
}

}  // namespace
}  // namespace mosaic
