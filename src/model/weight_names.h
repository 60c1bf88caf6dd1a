// The tensors each family's Hugging Face checkpoints hold: names, shapes and roles. This table
// is the single description of a checkpoint's layout; the loader validates against it and
// make-test-model writes from it, so the two cannot drift.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace mosaic {

enum class WeightRole {
  embedding, attn_norm, q, k, v, q_bias, k_bias, v_bias, o, ffn_norm, gate, up, down,
  final_norm, lm_head,
  q_norm, k_norm,                         // per-head RMSNorm weights [head_dim] (LLaDA-MoE)
  router, expert_gate, expert_up, expert_down,  // a mixture-of-experts FFN: [experts, hidden], then per expert
  // LLaDA 2.x: q, k and v as one [q_dim + 2 kv_dim, hidden] tensor (its rows: every query head,
  // then the keys, then the values), which the loader binds as the q, k and v views; and the
  // router's expert bias [experts] (used to choose experts, not to weigh them). An expert layer's
  // shared expert binds to gate, up and down.
  qkv, router_bias,
};

struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  WeightRole role;
  int64_t layer = -1;   // -1 for tensors outside the decoder stack
  int64_t expert = -1;  // the expert of an expert_* weight, -1 otherwise
};

// Every tensor the checkpoint must contain, in a stable order (embedding, layers, final norm,
// LM head). Throws mosaic::Error for a family that has no table yet.
std::vector<WeightSpec> family_weight_specs(const ModelConfig& config);

// "q", "gate", "lm_head", ... for reports.
std::string_view weight_role_name(WeightRole role);

// Whether a decoder layer's products read the weight (q, k, v or the fused qkv, o, gate, up, down,
// the router, the experts'): what a streamed layer keeps in host memory (graph/weight_staging.h).
bool is_product_weight(WeightRole role);

// Fan-in of a weight (its last dimension), used for initialisation scales.
int64_t weight_fan_in(const WeightSpec& spec);

}  // namespace mosaic
