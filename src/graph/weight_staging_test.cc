#include "graph/weight_staging.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "graph/step_graph.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

using ::testing::HasSubstr;

ModelConfig tiny(Family family) {
  ModelConfig config = test_model_preset(family, "tiny");
  config.layers = 3;
  return config;
}

Graph dense_step(const ModelConfig& config, std::vector<int32_t> streamed = {}, ChunkConfig chunks = {}) {
  GraphOptions options{.activations = DType::bf16, .head = HeadMode::stats};
  options.head_scratch_per_row = 64;
  options.streamed_layers = std::move(streamed);
  return instantiate_step_graph(config, StepShape{{40}, {10}}, chunks, options);
}

int32_t first_op_of(const Graph& graph, int32_t layer, OpKind kind) {
  for (int32_t i = 0; i < graph.op_count(); ++i)
    if (graph.ops[i].layer == layer && graph.ops[i].kind == kind) return i;
  return -1;
}

TEST(WeightStaging, ALayersProductsReadItsStagedTensorWrittenOneLayerAhead) {
  const ModelConfig config = tiny(Family::llada);
  const Graph resident = dense_step(config);
  const Graph streamed = dense_step(config, {2});
  const int32_t stage = first_op_of(streamed, 2, OpKind::stage_weights);
  ASSERT_GE(stage, 0);
  // Before layer 1's first op (its attention norm), so it arrives while layer 1 computes.
  EXPECT_EQ(streamed.ops[stage + 1].layer, 1);
  EXPECT_EQ(stage, first_op_of(resident, 1, OpKind::rms_norm));
  EXPECT_EQ(streamed.op_count(), resident.op_count() + 1);
  const int32_t staged = streamed.ops[stage].out.tensor;
  const GraphTensor& tensor = streamed.tensors[staged];
  EXPECT_EQ(tensor.category, TensorCategory::weights);
  EXPECT_EQ(tensor.first_op, stage);
  int32_t last_reader = -1;
  for (int32_t i = 0; i < streamed.op_count(); ++i) {
    const GraphOp& op = streamed.ops[i];
    const bool product = op.kind == OpKind::linear && op.layer == 2;
    EXPECT_EQ(op.staged.valid(), product) << "op " << i;
    if (product) {
      last_reader = i;
      EXPECT_EQ(op.staged.tensor, staged);
    }
  }
  EXPECT_EQ(tensor.last_op, last_reader);
  // q, k, v, o, gate, up, down of the tiny model, each at an aligned offset, 2 bytes an element.
  const StagedLayer layer = staged_layers(config, 2)[2];
  ASSERT_EQ(layer.weights.size(), 7u);
  uint64_t bytes = 0;
  for (const StagedWeight& w : layer.weights) {
    EXPECT_EQ(w.offset, bytes);
    EXPECT_EQ(w.offset % kStagedWeightAlign, 0u);
    bytes += (static_cast<uint64_t>(w.n * w.k) * 2 + kStagedWeightAlign - 1) / kStagedWeightAlign * kStagedWeightAlign;
  }
  EXPECT_EQ(tensor.bytes(), bytes);
  EXPECT_EQ(layer.find(WeightRole::q).n, config.q_dim());
  EXPECT_EQ(layer.find(WeightRole::down).k, config.ffn);
  EXPECT_EQ(streamed.staged_weight_bytes, 2u);
  EXPECT_THROW(layer.find(WeightRole::router), Error);
}

TEST(WeightStaging, AtMostTwoLayersAreStagedAtOnce) {
  const ModelConfig config = tiny(Family::llada);
  for (const ChunkConfig& chunks : {ChunkConfig{}, ChunkConfig{2, 3, 4, 2}}) {
    const Graph streamed = dense_step(config, {0, 1, 2}, chunks);
    for (int32_t i = 0; i < streamed.op_count(); ++i) {
      int live = 0;
      for (const GraphTensor& t : streamed.tensors)
        if (t.category == TensorCategory::weights && t.first_op <= i && i <= t.last_op) ++live;
      EXPECT_LE(live, 2) << "op " << i << ", " << chunks.to_string();
    }
  }
}

TEST(WeightStaging, ExpertsAreStagedOnePerExpert) {
  const ModelConfig config = tiny(Family::llada_moe);
  const Graph streamed = dense_step(config, {1});
  const StagedLayer layer = staged_layers(config, 2)[1];
  int64_t experts = 0;
  for (const StagedWeight& w : layer.weights) experts += w.expert >= 0;
  EXPECT_EQ(experts, 3 * config.experts);  // gate, up, down of each
  EXPECT_EQ(layer.find(WeightRole::expert_down, static_cast<int32_t>(config.experts - 1)).n, config.hidden);
  for (const GraphOp& op : streamed.ops)
    if (op.kind == OpKind::expert_linear) {
      EXPECT_EQ(op.staged.valid(), op.layer == 1);
    }
}

// One layout per model, whatever graph stages it: LLaDA 2.x's fused qkv whole, q, k and v its
// row blocks, then the output projection at the next aligned offset.
TEST(WeightStaging, FusedQkvIsStagedWholeWithItsRowBlocks) {
  const ModelConfig config = tiny(Family::llada2);
  const StagedLayer layer = staged_layers(config, 2)[0];
  const uint64_t row = static_cast<uint64_t>(config.hidden) * 2;
  EXPECT_EQ(layer.find(WeightRole::q).offset, 0u);
  EXPECT_EQ(layer.find(WeightRole::k).offset, static_cast<uint64_t>(config.q_dim()) * row);
  EXPECT_EQ(layer.find(WeightRole::v).offset, static_cast<uint64_t>(config.q_dim() + config.kv_dim()) * row);
  const uint64_t qkv = static_cast<uint64_t>(config.q_dim() + 2 * config.kv_dim()) * row;
  EXPECT_EQ(layer.find(WeightRole::o).offset, (qkv + kStagedWeightAlign - 1) / kStagedWeightAlign * kStagedWeightAlign);
  // Chunked or not, a streamed graph's staged tensor has the layout's size.
  for (const ChunkConfig& chunks : {ChunkConfig{}, ChunkConfig{3, 2, 2, 1}}) {
    const Graph streamed = dense_step(config, {0}, chunks);
    for (const GraphTensor& t : streamed.tensors)
      if (t.category == TensorCategory::weights) {
        EXPECT_EQ(t.bytes(), layer.bytes) << chunks.to_string();
      }
  }
}

TEST(WeightStaging, RefusesALayerTheModelLacks) {
  const ModelConfig config = tiny(Family::llada);
  try {
    dense_step(config, {3});
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("layer 3 cannot be streamed: the model has 3"));
  }
}

}  // namespace
}  // namespace mosaic
