#include "graph/residual_staging.h"

#include <gtest/gtest.h>

#include "graph/step_graph.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

ModelConfig tiny(Family family) {
  ModelConfig config = test_model_preset(family, "tiny");
  config.layers = 3;
  return config;
}

Graph step(const ModelConfig& config, ChunkConfig chunks, int64_t tokens = 40, int64_t candidates = 10) {
  GraphOptions options{.activations = DType::bf16, .head = HeadMode::stats};
  options.head_scratch_per_row = 64;
  return instantiate_step_graph(config, StepShape{{tokens}, {candidates}}, chunks, options);
}

ChunkConfig in_host(ChunkConfig chunks) {
  chunks.residual_in_host = true;
  return chunks;
}

int32_t residual_of(const Graph& graph) {
  for (size_t t = 0; t < graph.tensors.size(); ++t)
    if (graph.tensors[t].role == TensorRole::residual) return static_cast<int32_t>(t);
  return -1;
}

bool names(const GraphOp& op, int32_t tensor) {
  for (const TensorRef* ref : {&op.out, &op.a, &op.b, &op.c, &op.index, &op.out2, &op.scratch, &op.staged})
    if (ref->tensor == tensor) return true;
  return false;
}

// Rows [begin, begin + rows) of x a stage or unstage op moves.
struct Moved {
  int64_t begin, rows;
  bool operator==(const Moved&) const = default;
};

TEST(ResidualStaging, OnlyTheCopiesAndTheWholeRowOpsAddressTheHostRows) {
  for (const Family family : {Family::llada, Family::dream, Family::llada_moe, Family::llada2}) {
    const ModelConfig config = tiny(family);
    const Graph graph = step(config, in_host({3, 4, 2, 2}));
    const int32_t x = residual_of(graph);
    ASSERT_GE(x, 0);
    EXPECT_TRUE(graph.tensors[x].host);
    EXPECT_EQ(graph.host_bytes(), graph.tensors[x].bytes());
    for (int32_t i = 0; i < graph.op_count(); ++i) {
      const GraphOp& op = graph.ops[i];
      if (!names(op, x)) continue;
      EXPECT_TRUE(op.kind == OpKind::stage_rows || op.kind == OpKind::unstage_rows || addresses_host_rows(op))
          << family_name(family) << " op " << i << " " << op_kind_name(op.kind);
    }
  }
}

// Per layer but the last: one visit per K/V chunk (read only), per query chunk and per FFN chunk
// (each written back). Each staged tensor is written by its stage op, one visit ahead of use.
TEST(ResidualStaging, EachChunkIsAVisitStagedOneAheadAndWrittenBackIfWritten) {
  const ModelConfig config = tiny(Family::llada);
  const ChunkConfig chunks{3, 4, 2, 1};
  const Graph graph = step(config, in_host(chunks));
  const int32_t x = residual_of(graph);
  std::vector<Moved> staged, unstaged;
  for (int32_t i = 0; i < graph.op_count(); ++i) {
    const GraphOp& op = graph.ops[i];
    if (op.kind == OpKind::stage_rows) {
      EXPECT_EQ(op.a.tensor, x);
      const GraphTensor& rows = graph.tensors[op.out.tensor];
      EXPECT_EQ(rows.role, TensorRole::residual_rows);
      EXPECT_GE(rows.rows, op.rows);  // the chunk's capacity
      EXPECT_EQ(rows.first_op, i);
      if (op.a.row < 40 && op.a.row > 0 && rows.layer == 0 && rows.chunk < 3) {
        // A K/V chunk's rows arrive before the previous chunk's norm.
        EXPECT_EQ(graph.ops[i + 1].kind, OpKind::rms_norm);
      }
      staged.push_back({op.a.row, op.rows});
    }
    if (op.kind == OpKind::unstage_rows) {
      EXPECT_EQ(op.out.tensor, x);
      EXPECT_EQ(graph.tensors[op.a.tensor].last_op, i);
      unstaged.push_back({op.out.row, op.rows});
    }
  }
  // Layers 0 and 1: 3 + 4 + 2 visits; the last layer: its 3 K/V chunks (its queries and FFN run
  // over the candidates' gathered rows, on the device).
  const std::vector<Moved> kv{{0, 14}, {14, 14}, {28, 12}}, queries{{0, 10}, {10, 10}, {20, 10}, {30, 10}},
      ffn{{0, 20}, {20, 20}};
  std::vector<Moved> expect_staged, expect_unstaged;
  for (int layer = 0; layer < 2; ++layer) {
    for (const auto* phase : {&kv, &queries, &ffn}) expect_staged.insert(expect_staged.end(), phase->begin(), phase->end());
    for (const auto* phase : {&queries, &ffn})
      expect_unstaged.insert(expect_unstaged.end(), phase->begin(), phase->end());
  }
  expect_staged.insert(expect_staged.end(), kv.begin(), kv.end());
  EXPECT_EQ(staged, expect_staged);
  EXPECT_EQ(unstaged, expect_unstaged);
}

// A visit whose rows overlap the previous visit's written rows is staged only after they are
// written back: with one query chunk ([0, 40)) and two FFN chunks, FFN chunk 0 waits.
TEST(ResidualStaging, OverlappingRowsAreStagedAfterTheirWriteBack) {
  const Graph graph = step(tiny(Family::llada), in_host({2, 1, 2, 1}));
  bool checked = false;
  for (int32_t i = 1; i < graph.op_count(); ++i) {
    const GraphOp& op = graph.ops[i];
    if (op.kind != OpKind::stage_rows || graph.tensors[op.out.tensor].layer != 0) continue;
    if (graph.ops[i - 1].kind == OpKind::unstage_rows && graph.ops[i - 1].rows == 40) {
      EXPECT_EQ(op.a.row, 0);
      EXPECT_EQ(op.rows, 20);
      checked = true;
    }
  }
  EXPECT_TRUE(checked);
}

TEST(ResidualStaging, AGraphWithoutAResidualStreamIsUnchanged) {
  Graph empty;
  const Graph same = stage_residual_rows(empty);
  EXPECT_EQ(same.op_count(), 0);
}

}  // namespace
}  // namespace mosaic
