#include "mosaic/test_model.h"

#include "core/error.h"
#include "model/test_model.h"
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

namespace mosaic {

void make_test_model(const TestModelRequest& request) {
  Family family;
  if (request.family == "llada") family = Family::llada;
  else if (request.family == "dream") family = Family::dream;
  else if (request.family == "llada-moe") family = Family::llada_moe;
  else if (request.family == "llada2") family = Family::llada2;
  else fail("unknown family '{}' (expected llada, dream, llada-moe or llada2)", request.family);

  ModelConfig config = test_model_preset(family, request.preset);
  if (request.layers) config.layers = *request.layers;
  if (request.hidden) config.hidden = *request.hidden;
  if (request.heads) config.heads = *request.heads;
  if (request.kv_heads) config.kv_heads = *request.kv_heads;
  else if (request.heads && family != Family::dream) config.kv_heads = *request.heads;
  if (request.ffn) config.ffn = *request.ffn;
  const bool moe = family == Family::llada_moe || family == Family::llada2;
  if (!moe && (request.experts || request.experts_per_token || request.expert_ffn))
    fail("--experts, --experts-per-token and --expert-ffn apply to the llada-moe and llada2 families");
  if (family != Family::llada2 && (request.groups || request.top_groups || request.shared_experts || request.dense_layers))
    fail("--groups, --topk-groups, --shared-experts and --dense-layers apply to the llada2 family");
  if (request.experts) config.experts = *request.experts;
  if (request.experts_per_token) config.experts_per_token = *request.experts_per_token;
  if (request.expert_ffn) config.expert_ffn = *request.expert_ffn;
  if (family == Family::llada2) {
    if (request.groups) config.router_groups = *request.groups;
    config.router_top_groups = request.top_groups.value_or(std::min(config.router_top_groups, config.router_groups));
    if (request.dense_layers) config.dense_layers = *request.dense_layers;
    // Width follows the experts' (the released models have one shared expert of their width).
    config.shared_expert_ffn = request.shared_experts.value_or(config.shared_expert_ffn > 0 ? 1 : 0) * config.expert_ffn;
  }
  if (request.vocab) {
    config.vocab = *request.vocab;
    // Keep the special ids inside a smaller vocabulary, in the same relative places.
    if (config.mask_token_id >= config.vocab) {
      config.mask_token_id = config.vocab - 1;
      config.eos_token_id = config.pad_token_id = config.vocab - 2;
    }
  }
  std::optional<Tokenizer> tokenizer;
  if (!request.tokenizer.empty()) {
    tokenizer = Tokenizer::load(request.tokenizer);
    config.vocab = std::max<int64_t>(config.vocab, tokenizer->vocab_size());
    for (const char* mask : {"<|mdm_mask|>", "<|mask|>"})
      if (const auto id = tokenizer->token_id(mask)) config.mask_token_id = *id;
    for (const char* eos : {"<|endoftext|>", "<|end_of_text|>"})
      if (const auto id = tokenizer->token_id(eos)) config.eos_token_id = config.pad_token_id = *id;
  }
  if (request.rope_theta) config.rope_theta = *request.rope_theta;
  config.tied_embeddings = request.tied_embeddings;
  if (request.qkv_bias) {
    if (family != Family::llada) fail("--qkv-bias applies to the llada family (Dream always has q/k/v biases)");
    config.qkv_bias = true;
  }
  if (!request.block_attention.empty()) {
    if (family == Family::llada2 && request.block_attention != "absolute")
      fail("--block-attention {}: LLaDA 2.x attends block-causally on the absolute grid", request.block_attention);
    if (request.block_attention == "prompt") config.block_attention = BlockAttention::prompt;
    else if (request.block_attention == "absolute") config.block_attention = BlockAttention::absolute;
    else fail("--block-attention '{}' is not a block layout (expected prompt or absolute)", request.block_attention);
  }
  if (config.heads <= 0 || config.hidden <= 0 || config.hidden % config.heads != 0)
    fail("--hidden {} must be a positive multiple of --heads {}", config.hidden, config.heads);
  config.head_dim = config.hidden / config.heads;

  const auto dtype = dtype_from_user(request.dtype);
  if (!dtype || !dtype_is_weight_float(*dtype))
    fail("unknown dtype '{}' (expected bf16, fp16 or fp32)", request.dtype);
  if (request.out.empty()) fail("no output folder given (--out DIR)");
  TestModelOptions options;
  options.dtype = *dtype;
  options.shards = request.shards;
  options.seed = request.seed;
  options.progress = request.progress;
  write_test_model(config, options, request.out);
  if (tokenizer) {
    std::error_code error;
    std::filesystem::copy_file(request.tokenizer, request.out / "tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing, error);
    if (error) fail("{}: cannot copy the tokenizer: {}", request.tokenizer.string(), error.message());
  }
}

}  // namespace mosaic
