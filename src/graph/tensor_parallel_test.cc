// One rank's step graph under tensor parallelism: the shard's widths, one all-reduce after the
// embedding and after each projection closing a residual block, the head's summaries combined,
// and the same graph for any chunking.
#include "graph/tensor_parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/head_sampling.h"
#include "graph/step_graph.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

using ::testing::HasSubstr;

Graph step(const ModelConfig& config, int64_t ranks, ChunkConfig chunks = {}, HeadMode head = HeadMode::stats,
           StepShape shape = StepShape{{40, 24}, {10, 6}}) {
  GraphOptions options{.activations = DType::f32, .head = head};
  options.tensor_parallel = ranks;
  return instantiate_step_graph(config, shape, chunks, options);
}

int count(const Graph& graph, OpKind kind) {
  int n = 0;
  for (const GraphOp& op : graph.ops) n += op.kind == kind;
  return n;
}

TEST(TensorParallelGraph, OneRanksWidthsAndItsCollectives) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");  // 4 heads, ffn 768, vocab 1024
  const Graph one = step(config, 1);
  const Graph two = step(config, 2);
  EXPECT_EQ(one.tensor_parallel, 1);
  EXPECT_EQ(two.tensor_parallel, 2);
  EXPECT_EQ(count(one, OpKind::all_reduce), 0);
  // The embedding, then per layer the output and the down projection.
  EXPECT_EQ(count(two, OpKind::all_reduce), 1 + 2 * static_cast<int>(config.layers));
  EXPECT_EQ(count(two, OpKind::combine_head_stats), 1);
  EXPECT_EQ(two.op_count(), one.op_count() + 2 + 2 * static_cast<int>(config.layers));
  for (const GraphTensor& t : two.tensors) {
    if (t.role == TensorRole::q || t.role == TensorRole::k || t.role == TensorRole::attn_out) {
      EXPECT_EQ(t.cols, config.hidden / 2);
    }
    if (t.role == TensorRole::gate || t.role == TensorRole::up) {
      EXPECT_EQ(t.cols, config.ffn / 2);
    }
    if (t.role == TensorRole::residual || t.role == TensorRole::reduce_partial) {
      EXPECT_EQ(t.cols, config.hidden);
    }
  }
  for (int32_t i = 0; i < two.op_count(); ++i) {
    const GraphOp& op = two.ops[i];
    EXPECT_FALSE(op.kind == OpKind::linear && op.accumulate) << "op " << i << " adds a rank's share into x";
    if (op.kind != OpKind::all_reduce || !op.accumulate) continue;
    // Right after the projection that wrote its partial, into the residual rows it would have added to.
    const GraphOp& projection = two.ops[i - 1];
    EXPECT_EQ(projection.kind, OpKind::linear);
    EXPECT_TRUE(projection.weight == WeightRole::o || projection.weight == WeightRole::down);
    EXPECT_EQ(projection.out.tensor, op.a.tensor);
    EXPECT_EQ(two.tensors[op.a.tensor].role, TensorRole::reduce_partial);
    EXPECT_EQ(two.tensors[op.a.tensor].last_op, i);
    const TensorRole into = two.tensors[op.out.tensor].role;
    EXPECT_TRUE(into == TensorRole::residual || into == TensorRole::candidate_residual);
  }
  const GraphOp& combine = two.ops.back();
  EXPECT_EQ(combine.kind, OpKind::combine_head_stats);
  EXPECT_EQ(combine.out.tensor, two.output);
  EXPECT_EQ(two.tensors[combine.a.tensor].cols, kHeadPartialCount);
  EXPECT_EQ(two.tensors[two.output].cols, kHeadStatCount);
}

TEST(TensorParallelGraph, ChunkedHeadWritesEachChunksRowsOfOnePartialsTensor) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  const Graph graph = step(config, 4, ChunkConfig{.qkv = 2, .attention = 3, .ffn = 2, .head = 3});
  int32_t partials = -1;
  int64_t next_row = 0;
  for (const GraphOp& op : graph.ops) {
    if (op.kind == OpKind::lm_head_stats) {
      if (partials < 0) partials = op.out.tensor;
      EXPECT_EQ(op.out.tensor, partials);
      EXPECT_EQ(op.out.row, next_row);
    }
    if (op.kind == OpKind::combine_head_stats) {
      EXPECT_EQ(op.a.tensor, partials);
      EXPECT_EQ(op.a.row, next_row);
      EXPECT_EQ(op.out.row, next_row);
      next_row += op.rows;
    }
  }
  EXPECT_EQ(next_row, 16);
  EXPECT_EQ(graph.tensors[partials].rows, 16);
  // Every chunk of the attention and FFN passes reduces its own rows.
  EXPECT_EQ(count(graph, OpKind::all_reduce), 1 + static_cast<int>(config.layers) * (3 + 2));
}

TEST(TensorParallelGraph, LogitsAreEachRanksVocabularyColumns) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  const Graph graph = step(config, 2, {}, HeadMode::logits);
  EXPECT_EQ(graph.tensors[graph.output].cols, config.vocab / 2);
  EXPECT_EQ(count(graph, OpKind::combine_head_stats), 0);
}

TEST(TensorParallelGraph, RefusesWhatCannotSplitAndTheHostResidual) {
  ModelConfig config = test_model_preset(Family::llada, "tiny");
  try {
    step(config, 3);
    FAIL() << "3 ranks for 4 heads";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("4 attention heads do not divide into 3"));
  }
  try {
    step(config, 2, ChunkConfig{.residual_in_host = true});
    FAIL() << "host residual";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("residual stream in host memory"));
  }
}

}  // namespace
}  // namespace mosaic
