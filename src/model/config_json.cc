#include "model/config_json.h"

#include "core/error.h"

namespace mosaic {
namespace {

using nlohmann::ordered_json;

// Field set and order of GSAI-ML/LLaDA-8B-Instruct's config.json.
ordered_json llada_json(const ModelConfig& c) {
  ordered_json j;
  j["activation_type"] = "silu";
  j["alibi"] = false;
  j["alibi_bias_max"] = 8.0;
  j["architectures"] = {"LLaDAModelLM"};
  j["attention_dropout"] = 0.0;
  j["attention_layer_norm"] = false;
  j["attention_layer_norm_with_affine"] = true;
  j["auto_map"] = {{"AutoConfig", "configuration_llada.LLaDAConfig"},
                   {"AutoModel", "modeling_llada.LLaDAModelLM"},
                   {"AutoModelForCausalLM", "modeling_llada.LLaDAModelLM"}};
  j["bias_for_layer_norm"] = false;
  j["block_group_size"] = 1;
  j["block_type"] = "llama";
  j["d_model"] = c.hidden;
  j["embedding_dropout"] = 0.0;
  j["embedding_size"] = c.vocab;
  j["eos_token_id"] = c.eos_token_id;
  j["flash_attention"] = false;
  j["include_bias"] = false;
  j["include_qkv_bias"] = c.qkv_bias;
  j["init_cutoff_factor"] = nullptr;
  j["init_device"] = "meta";
  j["init_fn"] = "mitchell";
  j["init_std"] = 0.02;
  j["input_emb_norm"] = false;
  j["layer_norm_type"] = "rms";
  j["layer_norm_with_affine"] = true;
  j["mask_token_id"] = c.mask_token_id;
  j["max_sequence_length"] = c.max_position;
  j["mlp_hidden_size"] = c.ffn;
  j["mlp_ratio"] = 4;
  j["model_type"] = "llada";
  j["multi_query_attention"] = nullptr;
  j["n_heads"] = c.heads;
  j["n_kv_heads"] = c.kv_heads;
  j["n_layers"] = c.layers;
  j["pad_token_id"] = c.pad_token_id;
  j["precision"] = "amp_bf16";
  j["residual_dropout"] = 0.0;
  j["rms_norm_eps"] = c.rms_eps;
  j["rope"] = true;
  j["rope_full_precision"] = true;
  j["rope_theta"] = c.rope_theta;
  j["scale_logits"] = false;
  j["torch_dtype"] = c.torch_dtype;
  j["transformers_version"] = "4.46.3";
  j["use_cache"] = false;
  j["vocab_size"] = c.vocab;
  j["weight_tying"] = c.tied_embeddings;
  return j;
}

// Field set and order of Dream-org/Dream-v0-Instruct-7B's config.json.
ordered_json dream_json(const ModelConfig& c) {
  ordered_json j;
  j["architectures"] = {"DreamModel"};
  j["attention_dropout"] = 0.0;
  j["auto_map"] = {{"AutoConfig", "configuration_dream.DreamConfig"},
                   {"AutoModel", "modeling_dream.DreamModel"}};
  j["bos_token_id"] = c.eos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.ffn;
  j["mask_token_id"] = c.mask_token_id;
  j["max_position_embeddings"] = c.max_position;
  j["max_window_layers"] = c.layers;
  j["model_type"] = "Dream";
  j["num_attention_heads"] = c.heads;
  j["num_hidden_layers"] = c.layers;
  j["num_key_value_heads"] = c.kv_heads;
  j["pad_token_id"] = c.pad_token_id;
  j["rms_norm_eps"] = c.rms_eps;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = c.rope_theta;
  j["sliding_window"] = nullptr;
  j["tie_word_embeddings"] = c.tied_embeddings;
  j["torch_dtype"] = c.torch_dtype;
  j["transformers_version"] = "4.46.2";
  j["use_cache"] = true;
  j["use_sliding_window"] = false;
  j["vocab_size"] = c.vocab;
  return j;
}

// Field set and order of inclusionAI/LLaDA-MoE-7B-A1B's config.json (moe-models.md 1.2), with
// Mosaic's mask_token_id, which the released file lacks (its mask id is the family default).
ordered_json llada_moe_json(const ModelConfig& c) {
  ordered_json j;
  j["architectures"] = {"LLaDAMoEModelLM"};
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["auto_map"] = {{"AutoConfig", "configuration_lladamoe.LLaDAConfig"},
                   {"AutoModel", "modeling_lladamoe.LLaDAMoEModelLM"},
                   {"AutoModelForCausalLM", "modeling_lladamoe.LLaDAMoEModelLM"}};
  j["clip_qkv"] = nullptr;
  j["dense_intermediate_size"] = c.ffn;
  j["eos_token_id"] = c.eos_token_id;
  j["expert_intermediate_size"] = c.expert_ffn;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden;
  j["initializer_range"] = 0.02;
  j["mask_token_id"] = c.mask_token_id;
  j["max_position_embeddings"] = c.max_position;
  j["model_type"] = "llada";
  j["moe_layer_freq"] = std::vector<int64_t>(static_cast<size_t>(c.layers), 1);
  j["moe_router_enable_expert_bias"] = false;
  j["norm_topk_prob"] = false;
  j["num_attention_heads"] = c.heads;
  j["num_experts"] = c.experts;
  j["num_experts_per_tok"] = c.experts_per_token;
  j["num_hidden_layers"] = c.layers;
  j["num_key_value_heads"] = c.kv_heads;
  j["pad_token_id"] = c.pad_token_id;
  j["partial_rotary_factor"] = 1.0;
  j["qk_layernorm"] = c.qk_norm;
  j["rms_norm_eps"] = c.rms_eps;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = c.rope_theta;
  j["shared_expert_intermediate_size"] = nullptr;
  j["tie_word_embeddings"] = c.tied_embeddings;
  j["torch_dtype"] = c.torch_dtype;
  j["transformers_version"] = "4.52.4";
  j["use_cache"] = false;
  j["vocab_size"] = c.vocab;
  return j;
}

// Field set of inclusionAI's LLaDA2.0-mini / LLaDA2.1-mini config.json (moe-models.md 2.1), with
// Mosaic's mask_token_id and eos_token_id, which the released files lack (the family defaults),
// and without use_qk_norm, as released (its class default, true, is what a loader must assume).
ordered_json llada2_json(const ModelConfig& c) {
  ordered_json j;
  j["architectures"] = {"LLaDA2MoeModelLM"};
  j["attention_dropout"] = 0.0;
  j["auto_map"] = {{"AutoConfig", "configuration_llada2_moe.LLaDA2MoeConfig"},
                   {"AutoModel", "modeling_llada2_moe.LLaDA2MoeModel"},
                   {"AutoModelForCausalLM", "modeling_llada2_moe.LLaDA2MoeModelLM"}};
  j["embedding_dropout"] = 0.0;
  j["eos_token_id"] = c.eos_token_id;
  j["first_k_dense_replace"] = c.dense_layers;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.ffn;
  j["mask_token_id"] = c.mask_token_id;
  j["max_position_embeddings"] = c.max_position;
  j["max_window_layers"] = c.layers;
  j["model_type"] = "llada2_moe";
  j["moe_intermediate_size"] = c.expert_ffn;
  j["moe_router_enable_expert_bias"] = true;
  j["n_group"] = c.router_groups;
  j["norm_head"] = false;
  j["norm_topk_prob"] = true;
  j["num_attention_heads"] = c.heads;
  j["num_experts"] = c.experts;
  j["num_experts_per_tok"] = c.experts_per_token;
  j["num_hidden_layers"] = c.layers;
  j["num_key_value_heads"] = c.kv_heads;
  j["num_shared_experts"] = c.expert_ffn > 0 ? c.shared_expert_ffn / c.expert_ffn : 0;
  j["output_router_logits"] = false;
  j["pad_token_id"] = c.pad_token_id;
  j["partial_rotary_factor"] = c.partial_rotary;
  j["rms_norm_eps"] = c.rms_eps;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = c.rope_theta;
  j["rotary_dim"] = c.rotary();
  j["routed_scaling_factor"] = c.routed_scaling;
  j["router_dtype"] = "fp32";
  j["score_function"] = "sigmoid";
  j["sliding_window"] = 4096;
  j["tie_word_embeddings"] = c.tied_embeddings;
  j["topk_group"] = c.router_top_groups;
  j["torch_dtype"] = c.torch_dtype;
  j["transformers_version"] = "4.52.3";
  j["use_bias"] = false;
  j["use_cache"] = false;
  j["use_qkv_bias"] = false;
  j["use_sliding_window"] = false;
  j["vocab_size"] = c.vocab;
  return j;
}

}  // namespace

ordered_json model_config_to_json(const ModelConfig& config) {
  ordered_json j;
  switch (config.family) {
    case Family::llada: j = llada_json(config); break;
    case Family::dream: j = dream_json(config); break;
    case Family::llada_moe: j = llada_moe_json(config); break;
    case Family::llada2: return llada2_json(config);  // block-causal by architecture
  }
  if (config.block_attention != BlockAttention::none) j["block_attention"] = block_attention_name(config.block_attention);
  return j;
}

}  // namespace mosaic
