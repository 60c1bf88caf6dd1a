// A checkpoint's tensors bound to the roles of a pre-norm decoder, validated against the family's
// table (weight_names.h): every tensor present, no tensor unexpected, shapes as config.json
// implies, a float dtype. Views point into the mapped files; nothing is copied unless a tensor is
// misaligned for its element type.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/checkpoint.h"
#include "model/weight_names.h"

namespace mosaic {

struct WeightView {
  const void* data = nullptr;  // nullptr: absent (e.g. no q/k/v bias in LLaDA)
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::string name;

  explicit operator bool() const { return data != nullptr; }
};

// One expert of a mixture-of-experts FFN: a SwiGLU of width expert_ffn.
struct ExpertWeights {
  WeightView gate, up, down;  // gate/up: [expert_ffn, hidden]; down: [hidden, expert_ffn]
};

struct LayerWeights {
  WeightView attn_norm, q, k, v, q_bias, k_bias, v_bias, o;  // o: [hidden, q_dim]
  WeightView q_norm, k_norm;                                 // [head_dim], per-head norms (LLaDA-MoE)
  WeightView ffn_norm, gate, up, down;                       // gate/up: [ffn, hidden]
  WeightView router;                                         // [experts, hidden]
  WeightView router_bias;                                    // [experts] (LLaDA 2.x)
  std::vector<ExpertWeights> experts;                        // empty for a dense FFN
  // A fused [q_dim + 2 kv_dim, hidden] projection (LLaDA 2.x); q, k and v are then views of its
  // row ranges.
  WeightView qkv;
};

struct ModelWeights {
  WeightView embedding;   // [vocab, hidden]
  std::vector<LayerWeights> layers;
  WeightView final_norm;  // [hidden]
  WeightView lm_head;     // [vocab, hidden]; the embedding when tied
  uint64_t bytes = 0;     // stored bytes of all distinct tensors
};

// The tensor of `role` in decoder layer `layer`, or of a whole-model role (embedding, final_norm,
// lm_head) when layer < 0. Asserts on a role that has no tensor there.
const WeightView& weight_of(const ModelWeights& weights, int32_t layer, WeightRole role);
// Expert `expert`'s tensor of `role` (expert_gate, expert_up, expert_down) in decoder layer `layer`.
const WeightView& expert_weight_of(const ModelWeights& weights, int32_t layer, WeightRole role, int64_t expert);
// The bias role of a projection with a bias (q, k, v). Asserts for any other role.
WeightRole bias_role_of(WeightRole projection);

// The whole loaded model: config, mapped checkpoint, bound weights, and optionally a PEFT LoRA
// adapter merged into them at load (model/lora_merge.h): the adapted projections are then fp32
// copies owned by the Model, and `bytes` counts them instead of the base tensors they replace.
class Model {
 public:
  static std::unique_ptr<Model> load(const std::filesystem::path& dir,
                                     const std::optional<std::filesystem::path>& adapter = std::nullopt);

  const ModelConfig& config() const { return checkpoint_.config(); }
  const ModelWeights& weights() const { return weights_; }
  const Checkpoint& checkpoint() const { return checkpoint_; }
  // The adapter folder merged into the weights, if any; and how many projections it changed.
  const std::optional<std::filesystem::path>& adapter() const { return adapter_; }
  size_t adapted_projections() const { return merged_.size(); }

 private:
  explicit Model(Checkpoint checkpoint) : checkpoint_(std::move(checkpoint)) {}
  void merge_adapter(const std::filesystem::path& dir, std::span<const WeightSpec> specs);

  Checkpoint checkpoint_;
  ModelWeights weights_;
  std::vector<std::unique_ptr<std::byte[]>> realigned_;  // copies of misaligned tensors
  std::optional<std::filesystem::path> adapter_;
  std::vector<std::vector<float>> merged_;  // fp32 [out, in] per adapted projection
};

}  // namespace mosaic
