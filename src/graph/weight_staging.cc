#include "graph/weight_staging.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "graph/graph_builder.h"
#include "model/weight_names.h"

namespace mosaic {
namespace {

bool reads_product_weight(const GraphOp& op) {
  return op.kind == OpKind::linear || op.kind == OpKind::expert_linear;
}

uint64_t aligned(uint64_t bytes) { return (bytes + kStagedWeightAlign - 1) / kStagedWeightAlign * kStagedWeightAlign; }

}  // namespace

const StagedWeight& StagedLayer::find(WeightRole role, int32_t expert) const {
  for (const StagedWeight& w : weights)
    if (w.role == role && w.expert == expert) return w;
  fail("layer {} stages no {} weight{}", layer, weight_role_name(role),
       expert >= 0 ? fmt::format(" of expert {}", expert) : std::string());
}

std::vector<StagedLayer> staged_layers(const ModelConfig& config, size_t element_bytes) {
  std::vector<StagedLayer> layers(static_cast<size_t>(config.layers));
  for (size_t l = 0; l < layers.size(); ++l) layers[l].layer = static_cast<int32_t>(l);
  for (const WeightSpec& spec : family_weight_specs(config)) {
    if (spec.layer < 0 || !is_product_weight(spec.role)) continue;
    StagedLayer& staged = layers[static_cast<size_t>(spec.layer)];
    const uint64_t start = staged.bytes;
    const int64_t k = spec.shape[1];
    if (spec.role == WeightRole::qkv) {
      int64_t row = 0;
      for (const auto& [role, rows] : {std::pair{WeightRole::q, config.q_dim()}, std::pair{WeightRole::k, config.kv_dim()},
                                       std::pair{WeightRole::v, config.kv_dim()}}) {
        staged.weights.push_back({role, -1, rows, k, start + static_cast<uint64_t>(row * k) * element_bytes});
        row += rows;
      }
    } else {
      staged.weights.push_back({spec.role, static_cast<int32_t>(spec.expert), spec.shape[0], k, start});
    }
    staged.bytes = start + aligned(static_cast<uint64_t>(spec.shape[0] * k) * element_bytes);
  }
  return layers;
}

std::vector<int32_t> last_layers(const ModelConfig& config, int64_t count) {
  if (count < 0 || count > config.layers)
    fail("streamed layers {}: the model has {} decoder layers (expected 0 to {})", count, config.layers,
         config.layers);
  std::vector<int32_t> layers;
  for (int64_t l = config.layers - count; l < config.layers; ++l) layers.push_back(static_cast<int32_t>(l));
  return layers;
}

Graph stage_layer_weights(const Graph& graph, const ModelConfig& config, std::span<const int32_t> layers,
                          size_t element_bytes, int32_t prefetch) {
  if (layers.empty()) return graph;
  MOSAIC_ASSERT(prefetch >= 0, "a negative prefetch distance");
  // Where each layer's ops begin; a layer without ops stages nothing.
  std::map<int32_t, int32_t> first_op;
  for (int32_t i = 0; i < graph.op_count(); ++i) {
    const int32_t layer = graph.ops[static_cast<size_t>(i)].layer;
    if (layer >= 0) first_op.try_emplace(layer, i);
  }
  // The graph as it is, less its ops: the builder derives every lifetime again as they are replayed.
  GraphBuilder builder;
  Graph& out = builder.graph();
  out = graph;
  out.ops.clear();
  for (GraphTensor& t : out.tensors) t.first_op = t.last_op = -1;
  const std::vector<StagedLayer> layouts = staged_layers(config, element_bytes);
  std::map<int32_t, int32_t> staged_tensor;           // layer -> its staged_weights tensor
  std::multimap<int32_t, int32_t> stage_before;       // op index -> layers staged just before it
  for (const int32_t layer : layers) {
    if (layer < 0 || layer >= config.layers) fail("layer {} cannot be streamed: the model has {}", layer, config.layers);
    if (staged_tensor.contains(layer) || !first_op.contains(layer)) continue;
    const StagedLayer& staged = layouts[static_cast<size_t>(layer)];
    if (staged.weights.empty()) continue;
    staged_tensor[layer] = builder.tensor(TensorRole::staged_weights, TensorCategory::weights, DType::u8, 1,
                                          static_cast<int64_t>(staged.bytes), layer);
    const int32_t ahead = layer - prefetch;  // staged while this layer computes
    stage_before.emplace(ahead >= 0 && first_op.contains(ahead) ? first_op.at(ahead) : 0, layer);
  }
  for (int32_t i = 0; i < graph.op_count(); ++i) {
    for (auto [at, end] = stage_before.equal_range(i); at != end; ++at) {
      GraphOp stage{.kind = OpKind::stage_weights};
      stage.layer = at->second, stage.rows = 1;
      stage.out = {staged_tensor.at(at->second), 0};
      builder.op(stage);
    }
    GraphOp op = graph.ops[static_cast<size_t>(i)];
    if (reads_product_weight(op))
      if (const auto staged = staged_tensor.find(op.layer); staged != staged_tensor.end()) op.staged = {staged->second, 0};
    builder.op(op);
  }
  out.staged_weight_bytes = staged_tensor.empty() ? 0 : element_bytes;
  return std::move(builder).finish(graph.output);
}

}  // namespace mosaic
