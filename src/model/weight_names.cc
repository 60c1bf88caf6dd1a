#include "model/weight_names.h"

#include <fmt/format.h>

#include "core/error.h"

namespace mosaic {
namespace {

// LLaDA-8B (OLMo naming). Note the two different `ff_out`s: per block it is the MLP down
// projection, at the top it is the LM head.
void llada_specs(const ModelConfig& c, std::vector<WeightSpec>& out) {
  out.push_back({"model.transformer.wte.weight", {c.vocab, c.hidden}, WeightRole::embedding});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("model.transformer.blocks.{}.", i);
    out.push_back({p + "attn_norm.weight", {c.hidden}, WeightRole::attn_norm, i});
    out.push_back({p + "q_proj.weight", {c.q_dim(), c.hidden}, WeightRole::q, i});
    out.push_back({p + "k_proj.weight", {c.kv_dim(), c.hidden}, WeightRole::k, i});
    out.push_back({p + "v_proj.weight", {c.kv_dim(), c.hidden}, WeightRole::v, i});
    if (c.qkv_bias) {
      out.push_back({p + "q_proj.bias", {c.q_dim()}, WeightRole::q_bias, i});
      out.push_back({p + "k_proj.bias", {c.kv_dim()}, WeightRole::k_bias, i});
      out.push_back({p + "v_proj.bias", {c.kv_dim()}, WeightRole::v_bias, i});
    }
    out.push_back({p + "attn_out.weight", {c.hidden, c.q_dim()}, WeightRole::o, i});
    out.push_back({p + "ff_norm.weight", {c.hidden}, WeightRole::ffn_norm, i});
    out.push_back({p + "ff_proj.weight", {c.ffn, c.hidden}, WeightRole::gate, i});
    out.push_back({p + "up_proj.weight", {c.ffn, c.hidden}, WeightRole::up, i});
    out.push_back({p + "ff_out.weight", {c.hidden, c.ffn}, WeightRole::down, i});
  }
  out.push_back({"model.transformer.ln_f.weight", {c.hidden}, WeightRole::final_norm});
  if (!c.tied_embeddings)
    out.push_back({"model.transformer.ff_out.weight", {c.vocab, c.hidden}, WeightRole::lm_head});
}

// Dream-v0 (Qwen2 naming): q/k/v carry biases, o_proj and the MLP do not.
void dream_specs(const ModelConfig& c, std::vector<WeightSpec>& out) {
  out.push_back({"model.embed_tokens.weight", {c.vocab, c.hidden}, WeightRole::embedding});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    out.push_back({p + "input_layernorm.weight", {c.hidden}, WeightRole::attn_norm, i});
    out.push_back({p + "self_attn.q_proj.weight", {c.q_dim(), c.hidden}, WeightRole::q, i});
    out.push_back({p + "self_attn.q_proj.bias", {c.q_dim()}, WeightRole::q_bias, i});
    out.push_back({p + "self_attn.k_proj.weight", {c.kv_dim(), c.hidden}, WeightRole::k, i});
    out.push_back({p + "self_attn.k_proj.bias", {c.kv_dim()}, WeightRole::k_bias, i});
    out.push_back({p + "self_attn.v_proj.weight", {c.kv_dim(), c.hidden}, WeightRole::v, i});
    out.push_back({p + "self_attn.v_proj.bias", {c.kv_dim()}, WeightRole::v_bias, i});
    out.push_back({p + "self_attn.o_proj.weight", {c.hidden, c.q_dim()}, WeightRole::o, i});
    out.push_back({p + "post_attention_layernorm.weight", {c.hidden}, WeightRole::ffn_norm, i});
    out.push_back({p + "mlp.gate_proj.weight", {c.ffn, c.hidden}, WeightRole::gate, i});
    out.push_back({p + "mlp.up_proj.weight", {c.ffn, c.hidden}, WeightRole::up, i});
    out.push_back({p + "mlp.down_proj.weight", {c.hidden, c.ffn}, WeightRole::down, i});
  }
  out.push_back({"model.norm.weight", {c.hidden}, WeightRole::final_norm});
  if (!c.tied_embeddings)
    out.push_back({"lm_head.weight", {c.vocab, c.hidden}, WeightRole::lm_head});
}

// Layer i's experts under its prefix p ("model.layers.{i}."), as LLaDA-MoE and LLaDA 2.x name
// them: mlp.experts.{e}.gate_proj / up_proj / down_proj.
void expert_specs(const ModelConfig& c, const std::string& p, int64_t i, std::vector<WeightSpec>& out) {
  for (int64_t e = 0; e < c.experts; ++e) {
    const std::string x = fmt::format("{}mlp.experts.{}.", p, e);
    out.push_back({x + "gate_proj.weight", {c.expert_ffn, c.hidden}, WeightRole::expert_gate, i, e});
    out.push_back({x + "up_proj.weight", {c.expert_ffn, c.hidden}, WeightRole::expert_up, i, e});
    out.push_back({x + "down_proj.weight", {c.hidden, c.expert_ffn}, WeightRole::expert_down, i, e});
  }
}

// LLaDA-MoE-7B-A1B (Qwen2-MoE / OLMoE naming, moe-models.md 1.3): per-head q/k norms, a router
// and `experts` SwiGLU experts per layer, no biases.
void llada_moe_specs(const ModelConfig& c, std::vector<WeightSpec>& out) {
  out.push_back({"model.embed_tokens.weight", {c.vocab, c.hidden}, WeightRole::embedding});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    out.push_back({p + "input_layernorm.weight", {c.hidden}, WeightRole::attn_norm, i});
    out.push_back({p + "self_attn.q_proj.weight", {c.q_dim(), c.hidden}, WeightRole::q, i});
    out.push_back({p + "self_attn.k_proj.weight", {c.kv_dim(), c.hidden}, WeightRole::k, i});
    out.push_back({p + "self_attn.v_proj.weight", {c.kv_dim(), c.hidden}, WeightRole::v, i});
    out.push_back({p + "self_attn.o_proj.weight", {c.hidden, c.q_dim()}, WeightRole::o, i});
    out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, WeightRole::q_norm, i});
    out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, WeightRole::k_norm, i});
    out.push_back({p + "post_attention_layernorm.weight", {c.hidden}, WeightRole::ffn_norm, i});
    out.push_back({p + "mlp.gate.weight", {c.experts, c.hidden}, WeightRole::router, i});
    expert_specs(c, p, i, out);
  }
  out.push_back({"model.norm.weight", {c.hidden}, WeightRole::final_norm});
  if (!c.tied_embeddings)
    out.push_back({"lm_head.weight", {c.vocab, c.hidden}, WeightRole::lm_head});
}

// LLaDA 2.x (Ling-2.0 / BailingMoeV2 naming, moe-models.md 2.2): a fused QKV projection, per-head
// q/k norms named query/key_layernorm, the output projection named dense; the first dense_layers
// layers a dense SwiGLU, the others a router with an expert bias, the experts and a shared expert.
void llada2_specs(const ModelConfig& c, std::vector<WeightSpec>& out) {
  out.push_back({"model.word_embeddings.weight", {c.vocab, c.hidden}, WeightRole::embedding});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    out.push_back({p + "input_layernorm.weight", {c.hidden}, WeightRole::attn_norm, i});
    out.push_back({p + "attention.query_key_value.weight", {c.q_dim() + 2 * c.kv_dim(), c.hidden}, WeightRole::qkv, i});
    out.push_back({p + "attention.query_layernorm.weight", {c.head_dim}, WeightRole::q_norm, i});
    out.push_back({p + "attention.key_layernorm.weight", {c.head_dim}, WeightRole::k_norm, i});
    out.push_back({p + "attention.dense.weight", {c.hidden, c.q_dim()}, WeightRole::o, i});
    out.push_back({p + "post_attention_layernorm.weight", {c.hidden}, WeightRole::ffn_norm, i});
    if (!c.moe_layer(i)) {
      out.push_back({p + "mlp.gate_proj.weight", {c.ffn, c.hidden}, WeightRole::gate, i});
      out.push_back({p + "mlp.up_proj.weight", {c.ffn, c.hidden}, WeightRole::up, i});
      out.push_back({p + "mlp.down_proj.weight", {c.hidden, c.ffn}, WeightRole::down, i});
      continue;
    }
    out.push_back({p + "mlp.gate.weight", {c.experts, c.hidden}, WeightRole::router, i});
    out.push_back({p + "mlp.gate.expert_bias", {c.experts}, WeightRole::router_bias, i});
    expert_specs(c, p, i, out);
    if (c.shared_expert_ffn > 0) {
      out.push_back({p + "mlp.shared_experts.gate_proj.weight", {c.shared_expert_ffn, c.hidden}, WeightRole::gate, i});
      out.push_back({p + "mlp.shared_experts.up_proj.weight", {c.shared_expert_ffn, c.hidden}, WeightRole::up, i});
      out.push_back({p + "mlp.shared_experts.down_proj.weight", {c.hidden, c.shared_expert_ffn}, WeightRole::down, i});
    }
  }
  out.push_back({"model.norm.weight", {c.hidden}, WeightRole::final_norm});
  if (!c.tied_embeddings)
    out.push_back({"lm_head.weight", {c.vocab, c.hidden}, WeightRole::lm_head});
}

}  // namespace

std::vector<WeightSpec> family_weight_specs(const ModelConfig& config) {
  std::vector<WeightSpec> specs;
  switch (config.family) {
    case Family::llada: llada_specs(config, specs); break;
    case Family::dream: dream_specs(config, specs); break;
    case Family::llada_moe: llada_moe_specs(config, specs); break;
    case Family::llada2: llada2_specs(config, specs); break;
  }
  return specs;
}

bool is_product_weight(WeightRole role) {
  switch (role) {
    case WeightRole::q: case WeightRole::k: case WeightRole::v: case WeightRole::qkv: case WeightRole::o:
    case WeightRole::gate: case WeightRole::up: case WeightRole::down: case WeightRole::router:
    case WeightRole::expert_gate: case WeightRole::expert_up: case WeightRole::expert_down:
      return true;
    default:
      return false;
  }
}

std::string_view weight_role_name(WeightRole role) {
  switch (role) {
    case WeightRole::embedding: return "embedding";
    case WeightRole::attn_norm: return "attn_norm";
    case WeightRole::q: return "q";
    case WeightRole::k: return "k";
    case WeightRole::v: return "v";
    case WeightRole::q_bias: return "q_bias";
    case WeightRole::k_bias: return "k_bias";
    case WeightRole::v_bias: return "v_bias";
    case WeightRole::o: return "o";
    case WeightRole::ffn_norm: return "ffn_norm";
    case WeightRole::gate: return "gate";
    case WeightRole::up: return "up";
    case WeightRole::down: return "down";
    case WeightRole::final_norm: return "final_norm";
    case WeightRole::lm_head: return "lm_head";
    case WeightRole::q_norm: return "q_norm";
    case WeightRole::k_norm: return "k_norm";
    case WeightRole::router: return "router";
    case WeightRole::expert_gate: return "expert_gate";
    case WeightRole::expert_up: return "expert_up";
    case WeightRole::expert_down: return "expert_down";
    case WeightRole::qkv: return "qkv";
    case WeightRole::router_bias: return "router_bias";
  }
  return "?";
}

int64_t weight_fan_in(const WeightSpec& spec) { return spec.shape.back(); }

}  // namespace mosaic
