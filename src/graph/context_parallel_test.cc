// One context-parallel rank's step graph: its rows (ghost rows padding the last ranks), every
// layer's keys and values gathered from all ranks, its queries' key ranges in the gathered rows.
#include "graph/context_parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "graph/step_graph.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

using ::testing::HasSubstr;

Graph rank_step(const StepShape& shape, int64_t rank, int64_t ranks, ChunkConfig chunks = {}) {
  GraphOptions options{.activations = DType::f32, .head = HeadMode::stats};
  options.context_parallel = ranks, options.context_rank = rank;
  return instantiate_step_graph(test_model_preset(Family::llada, "tiny"), shape, chunks, options);
}

const GraphOp& first_attention(const Graph& graph) {
  for (const GraphOp& op : graph.ops)
    if (op.kind == OpKind::attention) return op;
  throw std::runtime_error("no attention");
}

void expect_segment(const AttentionSegment& s, int64_t q_begin, int64_t q_count, int64_t kv_begin, int64_t kv_count) {
  EXPECT_EQ(s.q_begin, q_begin);
  EXPECT_EQ(s.q_count, q_count);
  EXPECT_EQ(s.kv_begin, kv_begin);
  EXPECT_EQ(s.kv_count, kv_count);
}

TEST(ContextParallelGraph, ARanksRowsAttendToEveryRanksKeys) {
  // Sequences of 6 and 4 rows over 3 ranks of 4 rows: rank 1 holds rows 4, 5 (sequence 0) and 6, 7
  // (sequence 1); rank 2 holds rows 8, 9 and two ghost rows. Rank 1's candidates: 1 of sequence 0.
  const StepShape shape{{6, 4}, {1, 0}};
  const Graph graph = rank_step(shape, 1, 3);
  EXPECT_EQ(graph.context_parallel, 3);
  EXPECT_EQ(graph.tokens, 4);
  EXPECT_EQ(graph.candidates, 1);
  int gathers = 0;
  for (const GraphOp& op : graph.ops) {
    if (op.kind != OpKind::all_gather_rows) continue;
    ++gathers;
    EXPECT_EQ(op.rows, 4);
    EXPECT_EQ(graph.tensors[op.a.tensor].rows, 4);
    EXPECT_EQ(graph.tensors[op.out.tensor].rows, 12);
    EXPECT_TRUE(graph.tensors[op.a.tensor].role == TensorRole::k_rows ||
                graph.tensors[op.a.tensor].role == TensorRole::v_rows);
  }
  EXPECT_EQ(gathers, 2 * 2);  // K and V of each of the tiny model's 2 layers
  for (const GraphTensor& t : graph.tensors) {
    if (t.role == TensorRole::residual) {
      EXPECT_EQ(t.rows, 4);
    }
  }
  const GraphOp& attention = first_attention(graph);
  ASSERT_EQ(attention.segment_count, 2);
  const AttentionSegment* s = graph.segments.data() + attention.segment_begin;
  expect_segment(s[0], 0, 2, 0, 6);
  expect_segment(s[1], 2, 2, 6, 4);
}

TEST(ContextParallelGraph, GhostRowsOfTheLastRankReadOneRealKey) {
  const Graph graph = rank_step(StepShape{{6, 4}, {0, 2}}, 2, 3);
  const GraphOp& attention = first_attention(graph);
  ASSERT_EQ(attention.segment_count, 2);
  const AttentionSegment* s = graph.segments.data() + attention.segment_begin;
  expect_segment(s[0], 0, 2, 6, 4);
  expect_segment(s[1], 2, 2, 0, 1);
}

TEST(ContextParallelGraph, ChunkedKeysAreGatheredOnceALayer) {
  const Graph graph = rank_step(StepShape{{64}, {8}}, 0, 2, ChunkConfig{.qkv = 3, .attention = 2, .ffn = 2});
  int gathers = 0, kv_products = 0;
  for (const GraphOp& op : graph.ops) {
    gathers += op.kind == OpKind::all_gather_rows;
    kv_products += op.kind == OpKind::linear && (op.weight == WeightRole::k || op.weight == WeightRole::v);
  }
  EXPECT_EQ(gathers, 4);
  EXPECT_EQ(kv_products, 2 * 3 * 2);
}

TEST(ContextParallelGraph, RefusesWhatItCannotRunByName) {
  GraphOptions options{.activations = DType::f32, .head = HeadMode::stats};
  options.context_parallel = 2, options.tensor_parallel = 2;
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  try {
    instantiate_step_graph(config, StepShape{{8}, {4}}, {}, options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("with tensor parallelism: not supported yet"));
  }
  options.tensor_parallel = 1, options.context_rank = 2;
  EXPECT_THROW(instantiate_step_graph(config, StepShape{{8}, {4}}, {}, options), Error);
}

}  // namespace
}  // namespace mosaic
