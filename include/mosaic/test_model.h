// Random checkpoints in the real Hugging Face layout (what `mosaic make-test-model` writes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace mosaic {

struct TestModelRequest {
  std::string family = "llada";   // "llada" | "dream" | "llada-moe" | "llada2"
  std::string preset = "tiny";    // "tiny" | "llada-8b" | "dream-7b" | "llada-moe-7b" | "llada2-mini" | "llada2-flash"
  // Overrides of the preset's dimensions; the expert ones for llada-moe and llada2 only, the
  // router groups, shared experts and dense layers for llada2 only.
  std::optional<int64_t> layers, hidden, heads, kv_heads, ffn, vocab;
  std::optional<int64_t> experts, experts_per_token, expert_ffn;
  std::optional<int64_t> groups, top_groups, shared_experts, dense_layers;
  std::optional<double> rope_theta;
  bool tied_embeddings = false;   // LM head = embedding (LLaDA weight_tying, Dream tie_word_embeddings)
  bool qkv_bias = false;          // LLaDA include_qkv_bias (Dream always has q/k/v biases)
  std::string block_attention;    // "" (full attention) | "prompt" | "absolute" (config.json block_attention)
  std::string dtype = "bf16";     // "bf16" | "fp16" | "fp32"
  int shards = 1;
  // A tokenizer.json to copy into the folder; the vocabulary grows to cover it and the mask id
  // becomes its mask token (<|mdm_mask|> or <|mask|>) when it has one.
  std::filesystem::path tokenizer;
  uint64_t seed = 0;
  std::filesystem::path out;
  std::function<void(uint64_t written, uint64_t total)> progress;
};

// Throws mosaic::Error for unknown names or inconsistent dimensions.
void make_test_model(const TestModelRequest& request);

}  // namespace mosaic
