#include "graph/step_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

using ::testing::HasSubstr;

ModelConfig tiny_dream() { return test_model_preset(Family::dream, "tiny"); }

TEST(StepGraph, UnchunkedShapesAndLifetimes) {
  const ModelConfig c = test_model_preset(Family::llada, "tiny");
  const Graph g = instantiate_step_graph(c, StepShape{{10, 4}, {6, 2}}, {}, {});
  EXPECT_EQ(g.tokens, 14);
  EXPECT_EQ(g.candidates, 8);
  // Per layer: norm, q, k, v, rope x2, attention, o (into x), norm, gate, up, swiglu, down (into x);
  // the last layer: norm, k, v, rope k, gather of the candidates' rows and positions, norm, q,
  // rope q, attention, o, and the MLP over the candidates.
  EXPECT_EQ(g.op_count(), 1 + (c.layers - 1) * 13 + 16 + 2);
  const GraphTensor& logits = g.tensors[g.output];
  EXPECT_EQ(logits.rows, 8);
  EXPECT_EQ(logits.cols, c.vocab);
  EXPECT_EQ(logits.dtype, DType::f32);
  EXPECT_EQ(logits.last_op, g.op_count() - 1);
  for (int32_t t = 0; t < static_cast<int32_t>(g.tensors.size()); ++t) {
    const GraphTensor& tensor = g.tensors[t];
    EXPECT_LE(tensor.first_op, tensor.last_op) << g.tensor_name(t);
    if (tensor.role == TensorRole::k) {
      EXPECT_EQ(tensor.rows, 14);
      EXPECT_EQ(tensor.cols, c.kv_dim());
    }
  }
  // The residual stream lives from the embedding to the last layer's gather of the candidates'
  // rows, which live on to the head.
  const int32_t x = g.ops[0].out.tensor;
  EXPECT_EQ(g.tensors[x].first_op, 0);
  EXPECT_EQ(g.tensor_name(x), "x");
  EXPECT_EQ(g.tensors[g.ids].last_op, 0);
  int32_t gather = -1;
  for (int32_t i = 0; i < g.op_count(); ++i)
    if (g.ops[i].kind == OpKind::gather_rows && g.ops[i].a.tensor == x) gather = i;
  ASSERT_GE(gather, 0);
  EXPECT_EQ(g.tensors[x].last_op, gather);
  const GraphTensor& candidates = g.tensors[g.ops[gather].out.tensor];
  EXPECT_EQ(candidates.role, TensorRole::candidate_residual);
  EXPECT_EQ(candidates.rows, 8);
  EXPECT_EQ(candidates.last_op, g.op_count() - 2);  // read by the head's norm
}

// LLaDA-MoE: q and k normalised per head before RoPE; each layer's FFN is the expert group, its
// permuted buffers sized by rows x experts per token whatever the routing (graph/moe_ffn.h).
TEST(StepGraph, MixtureOfExpertsBuffersAreRowsTimesK) {
  const ModelConfig c = test_model_preset(Family::llada_moe, "tiny");  // 8 experts, 2 per token
  const Graph g = instantiate_step_graph(c, StepShape{{10, 4}, {6, 2}}, ChunkConfig{1, 1, 3, 1}, {});
  std::map<TensorRole, int> count;
  for (const GraphTensor& t : g.tensors) {
    ++count[t.role];
    const int64_t cap = t.layer + 1 == c.layers ? 3 : 5;  // ffn chunks of ceil(8 / 3) candidates, ceil(14 / 3) rows
    switch (t.role) {
      case TensorRole::router_logits: EXPECT_EQ(t.rows, cap); EXPECT_EQ(t.cols, 8); break;
      case TensorRole::route_experts:
      case TensorRole::route_slots: EXPECT_EQ(t.rows, cap); EXPECT_EQ(t.cols, 2); EXPECT_EQ(t.dtype, DType::i32); break;
      case TensorRole::route_weights: EXPECT_EQ(t.dtype, DType::f32); EXPECT_EQ(t.cols, 2); break;
      case TensorRole::expert_rows: EXPECT_EQ(t.rows, 8 + 1 + cap * 2); break;
      case TensorRole::expert_input:
      case TensorRole::expert_output: EXPECT_EQ(t.rows, cap * 2); EXPECT_EQ(t.cols, c.hidden); break;
      case TensorRole::expert_gate:
      case TensorRole::expert_up: EXPECT_EQ(t.rows, cap * 2); EXPECT_EQ(t.cols, c.expert_ffn); break;
      case TensorRole::gate:
      case TensorRole::up: ADD_FAILURE() << "a dense FFN tensor in a mixture-of-experts graph"; break;
      default: break;
    }
    if (t.role == TensorRole::expert_input) {
      EXPECT_EQ(t.category, TensorCategory::experts);
    }
  }
  EXPECT_EQ(count[TensorRole::expert_input], 3 * c.layers);
  int head_norms = 0, ropes = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (g.ops[i].kind == OpKind::head_norm) {
      ++head_norms;
      ASSERT_LT(i + 1, g.ops.size());
      EXPECT_EQ(g.ops[i + 1].kind, OpKind::rope) << "the per-head norm comes right before RoPE";
      EXPECT_EQ(g.ops[i + 1].out.tensor, g.ops[i].out.tensor);
    }
    if (g.ops[i].kind == OpKind::rope) ++ropes;
  }
  EXPECT_EQ(head_norms, ropes);
  EXPECT_EQ(head_norms, 2 * c.layers);
}

TEST(StepGraph, AllRowsInTheLastLayerIsTheEarlierGraph) {
  const ModelConfig c = test_model_preset(Family::llada, "tiny");
  const StepShape shape{{10, 4}, {6, 2}};
  GraphOptions off;
  off.last_layer_candidates_only = false;
  ChunkConfig all_rows;
  all_rows.last_layer_all_rows = true;
  for (const Graph& g : {instantiate_step_graph(c, shape, {}, off), instantiate_step_graph(c, shape, all_rows, {})}) {
    EXPECT_EQ(g.op_count(), 1 + c.layers * 13 + 2);
    for (const GraphOp& op : g.ops) EXPECT_NE(op.kind, OpKind::gather_rows);
    EXPECT_EQ(g.tensors[g.ops[0].out.tensor].last_op, g.op_count() - 2);  // x, to the head's gathered norm
  }
}

TEST(StepGraph, LastLayerQueriesAreTheCandidatesAgainstAllTheirSequencesKeys) {
  const ModelConfig c = tiny_dream();
  const StepShape shape{{37, 8, 1}, {20, 0, 1}};
  const Graph g = instantiate_step_graph(c, shape, {.attention = 3, .ffn = 2}, {});
  const int32_t last = static_cast<int32_t>(c.layers) - 1;
  const std::vector<int64_t> offsets = {0, 37, 45, 46}, candidate_offsets = {0, 20, 20, 21};
  std::vector<int> queried(21), mlp_rows(21);
  for (const GraphOp& op : g.ops) {
    if (op.layer != last) continue;
    if (op.kind == OpKind::attention) {
      const GraphTensor& q = g.tensors[op.a.tensor];
      EXPECT_EQ(q.rows, 7);  // ceil(21 / 3)
      const int64_t chunk_begin = row_chunk(21, 3, q.chunk).begin;
      for (int32_t s = 0; s < op.segment_count; ++s) {
        const AttentionSegment& seg = g.segments[op.segment_begin + s];
        const int64_t first = chunk_begin + seg.q_begin;
        const auto seq = std::upper_bound(candidate_offsets.begin(), candidate_offsets.end(), first) -
                         candidate_offsets.begin() - 1;
        EXPECT_EQ(seg.kv_begin, offsets[seq]);
        EXPECT_EQ(seg.kv_count, offsets[seq + 1] - offsets[seq]);
        EXPECT_LE(first + seg.q_count, candidate_offsets[seq + 1]);
        for (int64_t r = 0; r < seg.q_count; ++r) ++queried[first + r];
      }
    }
    if (op.kind == OpKind::linear && op.weight == WeightRole::down) {
      EXPECT_EQ(g.tensors[op.out.tensor].role, TensorRole::candidate_residual);
      for (int64_t r = 0; r < op.rows; ++r) ++mlp_rows[op.out.row + r];
    }
    if (op.kind == OpKind::linear && (op.weight == WeightRole::k || op.weight == WeightRole::v)) {
      EXPECT_EQ(op.rows, 46);  // keys and values of every row
    }
  }
  for (int count : queried) EXPECT_EQ(count, 1);
  for (int count : mlp_rows) EXPECT_EQ(count, 1);
  // The head reads the candidates' rows as they are, without the gather by logit_rows.
  for (const GraphOp& op : g.ops) {
    if (op.kind == OpKind::rms_norm && op.weight == WeightRole::final_norm) {
      EXPECT_FALSE(op.index.valid());
    }
  }
}

// A cached step's segments are split by their sequence's computed rows and key count
// (core/attention_segment.h), the same in every chunk and in the last layer's candidate queries;
// a full step's never are.
TEST(StepGraph, CachedSegmentsAreSplitByTheirSequencesRowsAndKeys) {
  const ModelConfig c = test_model_preset(Family::llada, "tiny");
  StepShape shape{{32, 300}, {8, 20}};
  shape.page_rows = 128;
  shape.cached = {{.begin = 16352, .keys = 16384, .pages = std::vector<int32_t>(128, 0)},
                  {.begin = 0, .keys = 300, .pages = {1, 2, 3}}};
  for (const ChunkConfig chunks : {ChunkConfig{}, ChunkConfig{.qkv = 2, .attention = 5, .ffn = 3}}) {
    const Graph g = instantiate_step_graph(c, shape, chunks, {});
    int attention_ops = 0;
    for (const GraphOp& op : g.ops) {
      if (op.kind != OpKind::attention) continue;
      ++attention_ops;
      for (int32_t s = 0; s < op.segment_count; ++s) {
        const AttentionSegment& seg = g.segments[op.segment_begin + s];
        ASSERT_TRUE(seg.paged());
        // The first sequence: 32 rows against 16,384 keys, 4 parts; the second computes 300 rows.
        EXPECT_EQ(seg.key_splits, seg.kv_count == 16384 ? 4 : 0) << "kv_count " << seg.kv_count;
      }
    }
    EXPECT_GT(attention_ops, 0);
  }
  const Graph full = instantiate_step_graph(c, StepShape{{32, 300}, {8, 20}}, {}, {});
  for (const AttentionSegment& seg : full.segments) EXPECT_EQ(seg.key_splits, 0);
}

TEST(StepGraph, KeySplitsFollowTheKeyCount) {
  EXPECT_EQ(attention_key_splits(false, 32, 16384), 0);  // keys in the step itself
  EXPECT_EQ(attention_key_splits(true, kKeySplitMaxSequenceRows + 1, 16384), 0);
  EXPECT_EQ(attention_key_splits(true, kKeySplitMaxSequenceRows, 16384), 4);
  EXPECT_EQ(attention_key_splits(true, 32, 4096), 0);  // one sequence's block at 4k: one pass
  EXPECT_EQ(attention_key_splits(true, 1, 0), 0);
  EXPECT_EQ(attention_key_splits(true, 1, 2 * kKeysPerSplit - 1), 0);
  EXPECT_EQ(attention_key_splits(true, 1, 2 * kKeysPerSplit), 2);
  EXPECT_EQ(attention_key_splits(true, 1, 3 * kKeysPerSplit + 5), 3);
  EXPECT_EQ(attention_key_splits(true, 1, 1 << 20), kMaxKeySplits);
}

TEST(StepGraph, ChunkedTensorsStayWithinTheirChunk) {
  const ModelConfig c = tiny_dream();
  const ChunkConfig chunks{.qkv = 3, .attention = 4, .ffn = 5, .head = 2};
  const Graph g = instantiate_step_graph(c, StepShape{{37, 8, 1}, {20, 8, 1}}, chunks, {.head = HeadMode::stats});
  const int64_t T = 46, M = 29;
  const int32_t last = static_cast<int32_t>(c.layers) - 1;  // its queries and MLP: the M candidates
  for (int32_t t = 0; t < static_cast<int32_t>(g.tensors.size()); ++t) {
    const GraphTensor& tensor = g.tensors[t];
    const int64_t rows = tensor.layer == last ? M : T;
    switch (tensor.role) {
      case TensorRole::gate: case TensorRole::up:
        EXPECT_EQ(tensor.rows, (rows + 4) / 5) << g.tensor_name(t);
        break;
      case TensorRole::q: case TensorRole::attn_out:
        EXPECT_EQ(tensor.rows, (rows + 3) / 4) << g.tensor_name(t);
        break;
      case TensorRole::head_norm: EXPECT_EQ(tensor.rows, (M + 1) / 2); break;
      case TensorRole::head_stats: EXPECT_EQ(tensor.cols, kHeadStatsCols); break;
      case TensorRole::k: case TensorRole::v: EXPECT_EQ(tensor.rows, T); break;
      default: break;
    }
  }
  // Every residual row is added to exactly once by each layer's down projection, and attention segments
  // stay inside one sequence and cover every query row once.
  std::map<int32_t, std::vector<int>> ffn_rows, query_rows;
  const std::vector<int64_t> offsets = {0, 37, 45, 46};
  for (const GraphOp& op : g.ops) {
    if (op.kind == OpKind::linear) {  // exactly the o and down projections add into x
      const bool closes_block = op.weight == WeightRole::o || op.weight == WeightRole::down;
      EXPECT_EQ(op.accumulate, closes_block) << weight_role_name(op.weight);
      const TensorRole residual = op.layer == last ? TensorRole::candidate_residual : TensorRole::residual;
      EXPECT_EQ(g.tensors[op.out.tensor].role == residual, closes_block);
    }
    if (op.layer == last) continue;  // LastLayerQueriesAreTheCandidates... covers it
    if (op.kind == OpKind::linear && op.weight == WeightRole::down) {
      auto& covered = ffn_rows[op.layer];
      covered.resize(T);
      for (int64_t r = 0; r < op.rows; ++r) ++covered[op.out.row + r];
    }
    if (op.kind == OpKind::attention) {
      auto& covered = query_rows[op.layer];
      covered.resize(T);
      const int64_t chunk_begin = row_chunk(T, 4, g.tensors[op.out.tensor].chunk).begin;
      for (int32_t s = 0; s < op.segment_count; ++s) {
        const AttentionSegment& seg = g.segments[op.segment_begin + s];
        const int64_t first = chunk_begin + seg.q_begin;
        const auto seq = std::upper_bound(offsets.begin(), offsets.end(), first) - offsets.begin() - 1;
        EXPECT_EQ(seg.kv_begin, offsets[seq]);
        EXPECT_EQ(seg.kv_count, offsets[seq + 1] - offsets[seq]);
        EXPECT_LE(first + seg.q_count, offsets[seq + 1]);
        for (int64_t r = 0; r < seg.q_count; ++r) ++covered[first + r];
      }
    }
  }
  ASSERT_EQ(ffn_rows.size(), static_cast<size_t>(c.layers - 1));
  for (const auto& [layer, covered] : ffn_rows)
    for (int count : covered) EXPECT_EQ(count, 1) << "layer " << layer;
  for (const auto& [layer, covered] : query_rows)
    for (int count : covered) EXPECT_EQ(count, 1) << "layer " << layer;
}

TEST(StepGraph, MoreChunksThanRowsLeavesEmptyChunks) {
  const Graph g = instantiate_step_graph(tiny_dream(), StepShape{{3}, {1}}, {.ffn = 8}, {});
  int nonempty = 0, empty = 0;
  for (const GraphOp& op : g.ops)
    if (op.kind == OpKind::swiglu) (op.rows > 0 ? nonempty : empty)++;
  EXPECT_EQ(nonempty, 3 + 1);  // one row per chunk: 3 tokens, then 1 candidate in the last layer
  EXPECT_EQ(empty, 5 + 7);
}

TEST(StepGraph, Bf16ActivationsHalveTheBytes) {
  const ModelConfig c = test_model_preset(Family::llada, "tiny");
  const Graph f32 = instantiate_step_graph(c, StepShape{{64}, {32}}, {}, {});
  const Graph bf16 = instantiate_step_graph(c, StepShape{{64}, {32}}, {}, {.activations = DType::bf16});
  const auto x = [](const Graph& g) { return g.tensors[g.ops[0].out.tensor].bytes(); };
  EXPECT_EQ(x(f32), 64u * 256 * 4);
  EXPECT_EQ(x(bf16), 64u * 256 * 2);
}

TEST(StepGraph, RejectsImpossibleShapes) {
  const ModelConfig c = tiny_dream();
  auto error_of = [&](StepShape shape, ChunkConfig chunks = {}) -> std::string {
    try {
      instantiate_step_graph(c, shape, chunks, {});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(error_of({{}, {}}), HasSubstr("no sequences"));
  EXPECT_THAT(error_of({{0}, {0}}), HasSubstr("sequence 0 has length 0"));
  EXPECT_THAT(error_of({{4, 5}, {1, 6}}), HasSubstr("sequence 1: 6 candidate rows for 5 tokens"));
  EXPECT_THAT(error_of({{4}, {1}}, {.ffn = 0}), HasSubstr("chunk counts must be between 1 and 4096"));
  EXPECT_THAT(error_of({{4}, {1}}, {.ffn = 4097}), HasSubstr("chunk counts must be between 1 and 4096"));
  // Sizes that would overflow 64-bit byte counts are refused before any is computed.
  EXPECT_THAT(error_of({{int64_t{1} << 62}, {1}}), HasSubstr("more than 2147483647 positions"));
  EXPECT_THAT(error_of({{int64_t{1} << 30, int64_t{1} << 30}, {1, 1}}), HasSubstr("more than 2147483647 positions"));
  EXPECT_EQ(error_of({{4}, {1}}, {.ffn = 4096}), "");
}

}  // namespace
}  // namespace mosaic
