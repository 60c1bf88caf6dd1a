#include "model/model_weights.h"

#include <fmt/ranges.h>

#include <cstring>
#include <unordered_set>

#include "core/error.h"
#include "core/printable.h"
#include "model/lora_adapter.h"
#include "model/lora_merge.h"
#include "model/weight_names.h"

namespace mosaic {
namespace {

// The one role -> tensor table; `Weights` is ModelWeights or const ModelWeights.
template <class Weights>
auto& role_slot(Weights& weights, int32_t layer_index, WeightRole role) {
  if (layer_index < 0) {
    switch (role) {
      case WeightRole::embedding: return weights.embedding;
      case WeightRole::final_norm: return weights.final_norm;
      case WeightRole::lm_head: return weights.lm_head;
      default: break;
    }
  } else {
    auto& layer = weights.layers.at(static_cast<size_t>(layer_index));
    switch (role) {
      case WeightRole::attn_norm: return layer.attn_norm;
      case WeightRole::q: return layer.q;
      case WeightRole::k: return layer.k;
      case WeightRole::v: return layer.v;
      case WeightRole::q_bias: return layer.q_bias;
      case WeightRole::k_bias: return layer.k_bias;
      case WeightRole::v_bias: return layer.v_bias;
      case WeightRole::o: return layer.o;
      case WeightRole::ffn_norm: return layer.ffn_norm;
      case WeightRole::gate: return layer.gate;
      case WeightRole::up: return layer.up;
      case WeightRole::down: return layer.down;
      case WeightRole::q_norm: return layer.q_norm;
      case WeightRole::k_norm: return layer.k_norm;
      case WeightRole::router: return layer.router;
      case WeightRole::router_bias: return layer.router_bias;
      case WeightRole::qkv: return layer.qkv;
      default: break;
    }
  }
  MOSAIC_ASSERT(false, "no weight for role {} in layer {}", static_cast<int>(role), layer_index);
  std::abort();
}

template <class Weights>
auto& expert_slot(Weights& weights, int32_t layer_index, WeightRole role, int64_t expert) {
  auto& one = weights.layers.at(static_cast<size_t>(layer_index)).experts.at(static_cast<size_t>(expert));
  switch (role) {
    case WeightRole::expert_gate: return one.gate;
    case WeightRole::expert_up: return one.up;
    case WeightRole::expert_down: return one.down;
    default: break;
  }
  MOSAIC_ASSERT(false, "role {} is not an expert's", static_cast<int>(role));
  std::abort();
}

WeightView& slot(ModelWeights& weights, const WeightSpec& spec) {
  if (spec.expert >= 0) return expert_slot(weights, static_cast<int32_t>(spec.layer), spec.role, spec.expert);
  return role_slot(weights, static_cast<int32_t>(spec.layer), spec.role);
}

// Rows [first, first + rows) of a [*, cols] weight as a view of their own.
WeightView row_range(const WeightView& whole, int64_t first, int64_t rows, std::string_view part) {
  const int64_t cols = whole.shape.at(1);
  const auto* bytes = static_cast<const std::byte*>(whole.data);
  return WeightView{bytes + static_cast<size_t>(first * cols) * dtype_size(whole.dtype), whole.dtype, {rows, cols},
                    fmt::format("{}[{} rows]", whole.name, part)};
}

// A fused QKV projection's rows, bound as the q, k and v views the step graph uses: every query
// head's rows, then the keys', then the values' (moe-models.md 2.2).
void split_fused_qkv(const ModelConfig& config, ModelWeights& weights) {
  for (LayerWeights& layer : weights.layers) {
    if (!layer.qkv) continue;
    layer.q = row_range(layer.qkv, 0, config.q_dim(), "q");
    layer.k = row_range(layer.qkv, config.q_dim(), config.kv_dim(), "k");
    layer.v = row_range(layer.qkv, config.q_dim() + config.kv_dim(), config.kv_dim(), "v");
  }
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::filesystem::path& dir, const std::optional<std::filesystem::path>& adapter) {
  std::unique_ptr<Model> model(new Model(Checkpoint::open(dir)));
  const Checkpoint& checkpoint = model->checkpoint_;
  const ModelConfig& config = checkpoint.config();
  const std::string family(family_name(config.family));
  ModelWeights& weights = model->weights_;
  weights.layers.resize(static_cast<size_t>(config.layers));
  for (int64_t l = 0; l < config.layers; ++l)
    if (config.moe_layer(l)) weights.layers[static_cast<size_t>(l)].experts.resize(static_cast<size_t>(config.experts));

  std::unordered_set<std::string> expected;
  const std::vector<WeightSpec> specs = family_weight_specs(config);
  for (const WeightSpec& spec : specs) {
    expected.insert(spec.name);
    const CheckpointTensor* tensor = checkpoint.find(spec.name);
    if (tensor == nullptr)
      fail("{}: missing tensor '{}' (a {} checkpoint with this config.json needs shape [{}])",
           printable_path(dir), spec.name, family, fmt::join(spec.shape, ", "));
    const std::string file = printable_path(checkpoint.file_path(tensor->file));
    if (tensor->shape != spec.shape)
      fail("{}: tensor '{}' has shape [{}] but config.json implies [{}]", file, spec.name,
           fmt::join(tensor->shape, ", "), fmt::join(spec.shape, ", "));
    if (!dtype_is_weight_float(tensor->dtype))
      fail("{}: tensor '{}' has dtype {}; weights must be F32, F16 or BF16", file, spec.name,
           dtype_name(tensor->dtype));

    const void* data = tensor->data;
    if (reinterpret_cast<uintptr_t>(data) % dtype_size(tensor->dtype) != 0) {
      // The format does not promise alignment; a typed read of a misaligned pointer is undefined.
      auto copy = std::make_unique<std::byte[]>(tensor->bytes);
      std::memcpy(copy.get(), tensor->data, tensor->bytes);
      data = copy.get();
      model->realigned_.push_back(std::move(copy));
    }
    slot(weights, spec) = WeightView{data, tensor->dtype, tensor->shape, spec.name};
    weights.bytes += tensor->bytes;
  }
  for (const CheckpointTensor& tensor : checkpoint.tensors())
    if (!expected.contains(tensor.name))
      fail("{}: unexpected tensor '{}' (not part of a {} checkpoint with this config.json)",
           printable_path(checkpoint.file_path(tensor.file)), tensor.name, family);
  if (config.tied_embeddings) weights.lm_head = weights.embedding;
  if (adapter) model->merge_adapter(*adapter, specs);
  split_fused_qkv(config, weights);
  return model;
}

void Model::merge_adapter(const std::filesystem::path& dir, std::span<const WeightSpec> specs) {
  const LoraAdapter adapter = LoraAdapter::open(dir);
  const ModelConfig& config = checkpoint_.config();
  const std::vector<LoraTarget> targets =
      bind_lora(adapter, specs, family_name(config.family), config.tied_embeddings);
  for (const LoraTarget& target : targets) {
    WeightView& view = slot(weights_, *target.base);
    const CheckpointTensor* base = checkpoint_.find(target.base->name);
    std::vector<float> merged = merge_lora(view, *target.module, adapter.config().scaling);
    weights_.bytes = weights_.bytes - base->bytes + merged.size() * sizeof(float);
    view = WeightView{merged.data(), DType::f32, view.shape, view.name};
    merged_.push_back(std::move(merged));
  }
  adapter_ = dir;
}

const WeightView& weight_of(const ModelWeights& weights, int32_t layer, WeightRole role) {
  return role_slot(weights, layer, role);
}

const WeightView& expert_weight_of(const ModelWeights& weights, int32_t layer, WeightRole role, int64_t expert) {
  return expert_slot(weights, layer, role, expert);
}

WeightRole bias_role_of(WeightRole weight) {
  switch (weight) {
    case WeightRole::q: return WeightRole::q_bias;
    case WeightRole::k: return WeightRole::k_bias;
    case WeightRole::v: return WeightRole::v_bias;
    default: MOSAIC_ASSERT(false, "role {} has no bias", static_cast<int>(weight));
  }
  std::abort();
}

}  // namespace mosaic
