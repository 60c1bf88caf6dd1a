// A model's architecture as read from its Hugging Face config.json, in one family-neutral form.
//
// Dispatch is on `architectures` (LLaDA and LLaDA-MoE share model_type "llada"). Each family's
// own field names are read by its parser; everything downstream sees only ModelConfig.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/block_attention.h"

namespace mosaic {

enum class Family { llada, dream, llada_moe, llada2 };

// How a mixture-of-experts router picks a row's experts and weighs them.
enum class RouterKind : uint8_t {
  // LLaDA-MoE: the top k of softmax(logits), weights not renormalised.
  softmax_top_k,
  // LLaDA 2.x: s = sigmoid(logits) in fp32; the experts are chosen by s + expert_bias inside the
  // router_top_groups best of router_groups equal groups (a group scores the sum of its two best);
  // weights s / sum(s) * routed_scaling over the chosen ones.
  sigmoid_grouped,
};

std::string_view family_name(Family family);

struct ModelConfig {
  Family family = Family::llada;
  std::string architecture;        // the config's architectures[0]
  int64_t hidden = 0;              // d_model / hidden_size
  int64_t layers = 0;
  int64_t heads = 0;               // query heads
  int64_t kv_heads = 0;            // key/value heads (GQA when < heads)
  int64_t head_dim = 0;            // hidden / heads
  int64_t ffn = 0;                 // SwiGLU width (dense layers)
  int64_t vocab = 0;               // rows of the embedding and of the LM head
  double rope_theta = 10000.0;
  double rms_eps = 1e-5;
  bool qkv_bias = false;           // q/k/v projections carry a bias (always for Dream)
  bool tied_embeddings = false;    // LM head is the embedding matrix
  int64_t mask_token_id = -1;
  int64_t eos_token_id = -1;
  int64_t pad_token_id = -1;
  // Whether the mask / eos id is the family's default because config.json has none (LLaDA-MoE's
  // released config has no mask id), as `mosaic info` states.
  struct { bool mask = false, eos = false; } token_ids_from_family;
  int64_t max_position = 0;        // trained context length, informational (0 = unknown)
  std::string torch_dtype;         // as declared, informational
  // Block-causal attention (config.json "block_attention": "prompt" | "absolute"; absent: full
  // attention). The block is the generation's block length (docs/design/cached-decoding.md).
  BlockAttention block_attention = BlockAttention::none;
  // Per-head RMSNorm of q and k before RoPE, with one [head_dim] weight each (LLaDA-MoE).
  bool qk_norm = false;
  // Mixture of experts (LLaDA-MoE): every layer's FFN is `experts` SwiGLU experts of width
  // expert_ffn, of which each row takes the experts_per_token most probable (router softmax, no
  // renormalisation). experts == 0: dense FFNs.
  int64_t experts = 0, experts_per_token = 0, expert_ffn = 0;
  RouterKind router = RouterKind::softmax_top_k;
  int64_t router_groups = 1, router_top_groups = 1;  // sigmoid_grouped: groups of experts / kept
  double routed_scaling = 1.0;                        // sigmoid_grouped: multiplies the weights
  // LLaDA 2.x: the first dense_layers layers have a dense SwiGLU FFN of width ffn, the rest the
  // experts; every expert layer also runs a shared expert of width shared_expert_ffn (0: none)
  // on the same normalised input.
  int64_t dense_layers = 0;
  int64_t shared_expert_ffn = 0;
  // Partial rotary embeddings: RoPE turns the first rotary() = head_dim x partial_rotary of each
  // head's values (half-split inside them), the rest pass through (LLaDA 2.x: 0.5).
  double partial_rotary = 1.0;

  int64_t q_dim() const { return heads * head_dim; }
  int64_t kv_dim() const { return kv_heads * head_dim; }
  // Whether decoder layer `layer`'s FFN is the mixture of experts (else the dense SwiGLU).
  bool moe_layer(int64_t layer) const { return experts > 0 && layer >= dense_layers; }
  int64_t rotary() const { return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary); }
  // Dream predicts position p from hidden row p - 1 (it was adapted from an AR model).
  bool shifted_logits() const { return family == Family::dream; }
};

// Parses config.json text; `source` names the file in error messages. Throws mosaic::Error with
// one line naming the field on anything missing, mistyped, inconsistent or not supported.
ModelConfig parse_model_config(std::string_view json_text, std::string_view source);

// Reads DIR/config.json.
ModelConfig load_model_config(const std::filesystem::path& model_dir);

}  // namespace mosaic
