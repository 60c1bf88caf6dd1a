#include "model/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config_json.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// The released LLaDA-8B-Instruct config.json, as published (field values from models.md).
const char* kLlada8B = R"({
  "activation_type": "silu", "alibi": false, "alibi_bias_max": 8.0,
  "architectures": ["LLaDAModelLM"], "attention_dropout": 0.0, "attention_layer_norm": false,
  "attention_layer_norm_with_affine": true, "bias_for_layer_norm": false, "block_group_size": 1,
  "block_type": "llama", "d_model": 4096, "embedding_dropout": 0.0, "embedding_size": 126464,
  "eos_token_id": 126081, "flash_attention": false, "include_bias": false,
  "include_qkv_bias": false, "init_cutoff_factor": null, "init_device": "meta",
  "init_fn": "mitchell", "init_std": 0.02, "input_emb_norm": false, "layer_norm_type": "rms",
  "layer_norm_with_affine": true, "mask_token_id": 126336, "max_sequence_length": 4096,
  "mlp_hidden_size": 12288, "mlp_ratio": 4, "model_type": "llada", "multi_query_attention": null,
  "n_heads": 32, "n_kv_heads": 32, "n_layers": 32, "pad_token_id": 126081,
  "precision": "amp_bf16", "residual_dropout": 0.0, "rms_norm_eps": 1e-05, "rope": true,
  "rope_full_precision": true, "rope_theta": 500000.0, "scale_logits": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.46.3", "use_cache": false,
  "vocab_size": 126464, "weight_tying": false})";

const char* kDream7B = R"({
  "architectures": ["DreamModel"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
  "intermediate_size": 18944, "mask_token_id": 151666, "max_position_embeddings": 131072,
  "max_window_layers": 28, "model_type": "Dream", "num_attention_heads": 28,
  "num_hidden_layers": 28, "num_key_value_heads": 4, "pad_token_id": 151643,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000.0, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.46.2",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 152064})";

std::string error_of(const std::string& text) {
  try {
    parse_model_config(text, "config.json");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

std::string with(const char* base, const char* key, json value) {
  json j = json::parse(base);
  j[key] = std::move(value);
  return j.dump();
}

std::string without(const char* base, const char* key) {
  json j = json::parse(base);
  j.erase(key);
  return j.dump();
}

TEST(Config, ParsesLlada8B) {
  const ModelConfig c = parse_model_config(kLlada8B, "config.json");
  EXPECT_EQ(c.family, Family::llada);
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.layers, 32);
  EXPECT_EQ(c.heads, 32);
  EXPECT_EQ(c.kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.ffn, 12288);  // mlp_hidden_size wins over mlp_ratio
  EXPECT_EQ(c.vocab, 126464);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_eps, 1e-5);
  EXPECT_EQ(c.mask_token_id, 126336);
  EXPECT_EQ(c.eos_token_id, 126081);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_FALSE(c.shifted_logits());
}

TEST(Config, ParsesDream7B) {
  const ModelConfig c = parse_model_config(kDream7B, "config.json");
  EXPECT_EQ(c.family, Family::dream);
  EXPECT_EQ(c.hidden, 3584);
  EXPECT_EQ(c.heads, 28);
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.ffn, 18944);
  EXPECT_EQ(c.vocab, 152064);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_EQ(c.mask_token_id, 151666);
  EXPECT_DOUBLE_EQ(c.rms_eps, 1e-6);
  EXPECT_TRUE(c.shifted_logits());
}

TEST(Config, PresetsReproduceTheReleasedConfigs) {
  for (auto [family, preset, released] :
       {std::tuple{Family::llada, "llada-8b", kLlada8B}, {Family::dream, "dream-7b", kDream7B}}) {
    const json written = model_config_to_json(test_model_preset(family, preset));
    const json expected = json::parse(released);
    for (const auto& [key, value] : expected.items())
      EXPECT_EQ(written.at(key), value) << preset << " field " << key;
  }
}

TEST(Config, MlpRatioWhenHiddenSizeAbsent) {
  const ModelConfig c =
      parse_model_config(with(without(kLlada8B, "mlp_hidden_size").c_str(), "mlp_ratio", 3),
                         "config.json");
  EXPECT_EQ(c.ffn, 3 * 4096);
}

TEST(Config, MissingFieldIsNamed) {
  EXPECT_THAT(error_of(without(kLlada8B, "d_model")),
              HasSubstr("config.json: missing field 'd_model'"));
  EXPECT_THAT(error_of(without(kDream7B, "intermediate_size")),
              HasSubstr("missing field 'intermediate_size'"));
}

TEST(Config, WrongTypesAreNamed) {
  EXPECT_THAT(error_of(with(kLlada8B, "n_heads", "32")), HasSubstr("'n_heads' must be an integer"));
  EXPECT_THAT(error_of(with(kLlada8B, "n_heads", 32.5)), HasSubstr("'n_heads' must be an integer"));
  EXPECT_THAT(error_of(with(kLlada8B, "rope_theta", "big")), HasSubstr("'rope_theta' must be a number"));
  EXPECT_THAT(error_of(with(kLlada8B, "weight_tying", 1)), HasSubstr("'weight_tying' must be true or false"));
  EXPECT_THAT(error_of(with(kLlada8B, "n_layers", -3)), HasSubstr("'n_layers' = -3 is out of range"));
  EXPECT_THAT(error_of(with(kLlada8B, "d_model", json(uint64_t{1} << 63))), HasSubstr("out of range"));
}

TEST(Config, InconsistentShapes) {
  EXPECT_THAT(error_of(with(kLlada8B, "n_heads", 31)), HasSubstr("not divisible by 'n_heads'"));
  EXPECT_THAT(error_of(with(kDream7B, "num_key_value_heads", 5)),
              HasSubstr("not divisible by 'num_key_value_heads'"));
  EXPECT_THAT(error_of(with(kLlada8B, "mask_token_id", 200000)),
              HasSubstr("mask_token_id 200000 is outside the vocabulary"));
  EXPECT_THAT(error_of(with(kLlada8B, "embedding_size", 1000)),
              HasSubstr("embedding_size 1000 is smaller than vocab_size"));
}

TEST(Config, SpecialTokenIdsMustBeInTheVocabulary) {
  // LLaDA-8B: vocab_size 126464, embedding_size 126464.
  EXPECT_EQ(error_of(with(kLlada8B, "eos_token_id", 126464)),
            "config.json: eos_token_id 126464 is outside the vocabulary of 126464 tokens");
  EXPECT_EQ(error_of(with(kDream7B, "pad_token_id", 152064)),
            "config.json: pad_token_id 152064 is outside the vocabulary of 152064 tokens");
  EXPECT_NO_THROW(parse_model_config(with(kLlada8B, "eos_token_id", 126463), "config.json"));
  // A default the config leaves in place is named as one (LLaDA's eos default is 126081).
  json small = json::parse(kLlada8B);
  small.erase("eos_token_id"), small.erase("pad_token_id");
  small["vocab_size"] = small["embedding_size"] = 1024;
  small["mask_token_id"] = 1000;
  EXPECT_EQ(error_of(small.dump()),
            "config.json: eos_token_id 126081 is outside the vocabulary of 1024 tokens (the family's default: "
            "config.json has no 'eos_token_id')");
}

TEST(Config, DeepNestingIsRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string text = kLlada8B;
  text.insert(1, "\"alibi\": " + deep + ", ");
  EXPECT_EQ(error_of(text), "config.json: nested deeper than 64 levels, the limit for JSON that Mosaic reads");
}

TEST(Config, UnsupportedFeaturesAreRefused) {
  EXPECT_THAT(error_of(with(kLlada8B, "alibi", true)), HasSubstr("'alibi' = true is not supported"));
  EXPECT_THAT(error_of(with(kLlada8B, "block_type", "sequential")), HasSubstr("'block_type'"));
  EXPECT_THAT(error_of(with(kLlada8B, "clip_qkv", 8.0)), HasSubstr("'clip_qkv'"));
  EXPECT_THAT(error_of(with(kDream7B, "use_sliding_window", true)), HasSubstr("'use_sliding_window'"));
  EXPECT_THAT(error_of(with(kDream7B, "rope_scaling", json{{"type", "yarn"}})),
              HasSubstr("'rope_scaling'"));
}

// LLaDA-MoE-7B-A1B's fields (moe-models.md 1.2); the released file has no mask id.
constexpr const char* kLladaMoe = R"({"architectures": ["LLaDAMoEModelLM"], "model_type": "llada",
  "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16,
  "num_experts": 64, "num_experts_per_tok": 8, "expert_intermediate_size": 1024,
  "dense_intermediate_size": 8192, "shared_expert_intermediate_size": null,
  "moe_layer_freq": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], "norm_topk_prob": true,
  "moe_router_enable_expert_bias": false, "qk_layernorm": true, "rope_theta": 50000,
  "partial_rotary_factor": 1.0, "rope_scaling": null, "max_position_embeddings": 8192,
  "rms_norm_eps": 1e-05, "attention_bias": false, "clip_qkv": null, "tie_word_embeddings": false,
  "hidden_act": "silu", "eos_token_id": 156892, "pad_token_id": 156892, "vocab_size": 157184})";

TEST(Config, LladaMoeIsParsed) {
  const ModelConfig c = parse_model_config(kLladaMoe, "config.json");
  EXPECT_EQ(c.family, Family::llada_moe);
  EXPECT_EQ(c.hidden, 2048);
  EXPECT_EQ(c.layers, 16);
  EXPECT_EQ(c.heads, 16);
  EXPECT_EQ(c.kv_heads, 16);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.experts, 64);
  EXPECT_EQ(c.experts_per_token, 8);
  EXPECT_EQ(c.expert_ffn, 1024);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.moe_layer(0) && c.moe_layer(15));
  EXPECT_EQ(c.vocab, 157184);
  EXPECT_EQ(c.mask_token_id, 156895);  // the family default
  EXPECT_TRUE(c.token_ids_from_family.mask);
  EXPECT_FALSE(c.token_ids_from_family.eos);
  EXPECT_EQ(c.eos_token_id, 156892);
  EXPECT_DOUBLE_EQ(c.rope_theta, 50000.0);
  EXPECT_FALSE(c.shifted_logits());
  // model_type alone: "llada" with experts is the MoE.
  EXPECT_EQ(parse_model_config(without(kLladaMoe, "architectures"), "c").family, Family::llada_moe);
}

TEST(Config, LladaMoeFieldsThatChangeTheForwardAreRefused) {
  EXPECT_THAT(error_of(with(kLladaMoe, "moe_layer_freq", json::array({1, 0}))),
              HasSubstr("field 'moe_layer_freq' = [1,0] is not supported"));
  EXPECT_THAT(error_of(with(kLladaMoe, "shared_expert_intermediate_size", 1024)),
              HasSubstr("'shared_expert_intermediate_size' = 1024 is not supported"));
  EXPECT_THAT(error_of(with(kLladaMoe, "partial_rotary_factor", 0.5)),
              HasSubstr("'partial_rotary_factor' = 0.5 is not supported"));
  EXPECT_THAT(error_of(with(kLladaMoe, "moe_router_enable_expert_bias", true)),
              HasSubstr("'moe_router_enable_expert_bias' = true is not supported"));
  EXPECT_THAT(error_of(with(kLladaMoe, "qk_layernorm", false)), HasSubstr("'qk_layernorm' = false is not supported"));
  EXPECT_THAT(error_of(with(kLladaMoe, "num_experts_per_tok", 65)),
              HasSubstr("field 'num_experts_per_tok' = 65 is out of range [1, 64]"));
  EXPECT_THAT(error_of(without(kLladaMoe, "expert_intermediate_size")),
              HasSubstr("missing field 'expert_intermediate_size' (LLaDA-MoE config)"));
  EXPECT_THAT(error_of(with(kLladaMoe, "mask_token_id", 157184)),
              HasSubstr("mask_token_id 157184 is outside the vocabulary"));
}

// LLaDA2.0-mini's fields (moe-models.md 2.1, the order of the released file); no mask or eos id
// and no use_qk_norm, as released.
constexpr const char* kLlada2Mini = R"({"architectures": ["LLaDA2MoeModelLM"], "attention_dropout": 0.0,
  "embedding_dropout": 0.0, "first_k_dense_replace": 1, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 2048, "intermediate_size": 5120, "max_position_embeddings": 16384, "max_window_layers": 28,
  "model_type": "llada2_moe", "moe_intermediate_size": 512, "moe_router_enable_expert_bias": true,
  "n_group": 8, "norm_head": false, "norm_topk_prob": true, "num_attention_heads": 16, "num_experts": 256,
  "num_experts_per_tok": 8, "num_hidden_layers": 20, "num_key_value_heads": 4, "num_shared_experts": 1,
  "pad_token_id": 156892, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 600000, "rotary_dim": 64, "routed_scaling_factor": 2.5, "router_dtype": "fp32",
  "score_function": "sigmoid", "sliding_window": 4096, "tie_word_embeddings": false, "topk_group": 4,
  "torch_dtype": "bfloat16", "use_bias": false, "use_qkv_bias": false, "use_sliding_window": false,
  "vocab_size": 157184})";

TEST(Config, Llada2MiniIsParsed) {
  const ModelConfig c = parse_model_config(kLlada2Mini, "config.json");
  EXPECT_EQ(c.family, Family::llada2);
  EXPECT_EQ(c.hidden, 2048);
  EXPECT_EQ(c.layers, 20);
  EXPECT_EQ(c.heads, 16);
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rotary(), 64);
  EXPECT_EQ(c.ffn, 5120);
  EXPECT_EQ(c.experts, 256);
  EXPECT_EQ(c.experts_per_token, 8);
  EXPECT_EQ(c.expert_ffn, 512);
  EXPECT_EQ(c.shared_expert_ffn, 512);
  EXPECT_EQ(c.router, RouterKind::sigmoid_grouped);
  EXPECT_EQ(c.router_groups, 8);
  EXPECT_EQ(c.router_top_groups, 4);
  EXPECT_DOUBLE_EQ(c.routed_scaling, 2.5);
  EXPECT_FALSE(c.moe_layer(0));
  EXPECT_TRUE(c.moe_layer(1) && c.moe_layer(19));
  EXPECT_TRUE(c.qk_norm);  // the class default: the released file has no use_qk_norm
  EXPECT_EQ(c.block_attention, BlockAttention::absolute);
  EXPECT_EQ(c.mask_token_id, 156895);
  EXPECT_EQ(c.eos_token_id, 156892);
  EXPECT_TRUE(c.token_ids_from_family.mask && c.token_ids_from_family.eos);
  EXPECT_DOUBLE_EQ(c.rms_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 600000.0);
  EXPECT_FALSE(c.shifted_logits());
  EXPECT_EQ(parse_model_config(without(kLlada2Mini, "architectures"), "c").family, Family::llada2);
}

TEST(Config, Llada2FieldsThatChangeTheForwardAreRefused) {
  EXPECT_THAT(error_of(with(kLlada2Mini, "use_qk_norm", false)), HasSubstr("'use_qk_norm' = false is not supported"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "score_function", "softmax")), HasSubstr("'score_function'"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "use_qkv_bias", true)), HasSubstr("'use_qkv_bias' = true is not supported"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "norm_head", true)), HasSubstr("'norm_head' = true is not supported"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "rope_scaling", json{{"type", "yarn"}})), HasSubstr("'rope_scaling'"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "rotary_dim", 32)), HasSubstr("'rotary_dim' disagrees"));
  EXPECT_THAT(error_of(with(without(kLlada2Mini, "rotary_dim").c_str(), "partial_rotary_factor", 0.001)),
              HasSubstr("RoPE needs an even number"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "n_group", 7)), HasSubstr("num_experts 256 is not divisible by n_group 7"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "n_group", 256)), HasSubstr("needs at least 2"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "topk_group", 9)), HasSubstr("'topk_group' = 9 is out of range [1, 8]"));
  EXPECT_THAT(error_of(with(with(kLlada2Mini, "topk_group", 1).c_str(), "num_experts_per_tok", 33)),
              HasSubstr("more than the 32 experts"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "block_attention", "prompt")), HasSubstr("must be \"absolute\""));
  EXPECT_THAT(error_of(with(kLlada2Mini, "head_dim", 64)), HasSubstr("'head_dim' differs"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "expert_capacity", 64)), HasSubstr("block routing is not implemented"));
  EXPECT_THAT(error_of(with(kLlada2Mini, "first_k_dense_replace", 21)), HasSubstr("out of range [0, 20]"));
}

TEST(Config, BlockAttentionIsReadForBothFamilies) {
  EXPECT_EQ(parse_model_config(kLlada8B, "config.json").block_attention, BlockAttention::none);
  EXPECT_EQ(parse_model_config(with(kLlada8B, "block_attention", "prompt"), "c").block_attention,
            BlockAttention::prompt);
  EXPECT_EQ(parse_model_config(with(kDream7B, "block_attention", "absolute"), "c").block_attention,
            BlockAttention::absolute);
  EXPECT_EQ(parse_model_config(with(kDream7B, "block_attention", nullptr), "c").block_attention,
            BlockAttention::none);
  EXPECT_THAT(error_of(with(kLlada8B, "block_attention", "causal")),
              HasSubstr("field 'block_attention' = \"causal\" is not a block layout"));
  EXPECT_THAT(error_of(with(kLlada8B, "block_attention", 3)), HasSubstr("'block_attention' must be a string"));
}

TEST(Config, DispatchAndSyntax) {
  EXPECT_THAT(error_of("{\"architectures\": [\"LlamaForCausalLM\"]}"),
              HasSubstr("architecture 'LlamaForCausalLM' is not supported"));
  EXPECT_THAT(error_of("{\"d_model\": 4"), HasSubstr("config.json: not valid JSON"));
  EXPECT_THAT(error_of("[1, 2]"), HasSubstr("expected a JSON object"));
  // Found by the fuzzer: nlohmann reports number overflow as out_of_range, not parse_error.
  EXPECT_THAT(error_of("{\"rms_norm_eps\": 1e506}"), HasSubstr("config.json: not valid JSON"));
  EXPECT_THAT(error_of("{}"), HasSubstr("missing fields 'architectures' and 'model_type'"));
  EXPECT_THAT(error_of("{\"architectures\": []}"), HasSubstr("'architectures' must be a non-empty list"));
  // model_type alone is enough for older exports.
  EXPECT_EQ(parse_model_config(with(without(kDream7B, "architectures").c_str(), "model_type", "Dream"),
                               "config.json").family,
            Family::dream);
}

}  // namespace
}  // namespace mosaic
