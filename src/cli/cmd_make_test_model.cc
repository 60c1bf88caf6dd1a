// mosaic make-test-model: a random checkpoint in the real Hugging Face layout.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "mosaic/test_model.h"

namespace mosaic::cli {
namespace {

struct MakeTestModelOptions {
  TestModelRequest request;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
  int64_t experts = 0, experts_per_token = 0, expert_ffn = 0;
  int64_t groups = 0, top_groups = 0, shared_experts = -1, dense_layers = -1;
  bool quiet = false;
};

int run_make_test_model(MakeTestModelOptions& options) {
  TestModelRequest& request = options.request;
  auto set = [](std::optional<int64_t>& field, int64_t value) {
    if (value > 0) field = value;
  };
  set(request.layers, options.layers);
  set(request.hidden, options.hidden);
  set(request.heads, options.heads);
  set(request.kv_heads, options.kv_heads);
  set(request.ffn, options.ffn);
  set(request.vocab, options.vocab);
  set(request.experts, options.experts);
  set(request.experts_per_token, options.experts_per_token);
  set(request.expert_ffn, options.expert_ffn);
  set(request.groups, options.groups);
  set(request.top_groups, options.top_groups);
  if (options.shared_experts >= 0) request.shared_experts = options.shared_experts;
  if (options.dense_layers >= 0) request.dense_layers = options.dense_layers;
  const bool terminal = isatty(fileno(stderr));
  int last_percent = -1;
  if (!options.quiet)
    request.progress = [&](uint64_t written, uint64_t total) {
      if (total < (uint64_t{256} << 20)) return;  // small models finish before anyone looks
      const int percent = total == 0 ? 100 : static_cast<int>(100 * written / total);
      if (percent == last_percent || (!terminal && percent % 10 != 0 && percent != 100)) return;
      last_percent = percent;
      fmt::print(stderr, "{}writing weights: {:3d}% ({:.2f} of {:.2f} GiB){}",
                 terminal ? "\r" : "", percent, written / 1073741824.0, total / 1073741824.0,
                 terminal && percent < 100 ? "" : "\n");
    };
  make_test_model(request);
  if (!options.quiet) fmt::print(stderr, "wrote {}\n", request.out.string());
  return 0;
}

}  // namespace

Action register_make_test_model(CLI::App& app) {
  auto options = std::make_shared<MakeTestModelOptions>();
  TestModelRequest& request = options->request;
  CLI::App* command = app.add_subcommand(
      "make-test-model", "Write a random checkpoint with the real naming scheme and config.json");
  command->add_option("--family", request.family, "llada | dream | llada-moe | llada2")
      ->required()
      ->check(CLI::IsMember({"llada", "dream", "llada-moe", "llada2"}));
  command->add_option("--preset", request.preset, "tiny | llada-8b | dream-7b | llada-moe-7b | llada2-mini | llada2-flash")
      ->default_val("tiny");
  command->add_option("--layers", options->layers, "Override: decoder layers");
  command->add_option("--hidden", options->hidden, "Override: hidden size");
  command->add_option("--heads", options->heads, "Override: query heads");
  command->add_option("--kv-heads", options->kv_heads, "Override: key/value heads");
  command->add_option("--ffn", options->ffn, "Override: MLP width");
  command->add_option("--vocab", options->vocab, "Override: vocabulary size");
  command->add_option("--experts", options->experts, "Override (llada-moe, llada2): experts per layer");
  command->add_option("--experts-per-token", options->experts_per_token,
                      "Override (llada-moe, llada2): experts each token takes");
  command->add_option("--expert-ffn", options->expert_ffn, "Override (llada-moe, llada2): an expert's MLP width");
  command->add_option("--groups", options->groups, "Override (llada2): router groups (n_group)");
  command->add_option("--topk-groups", options->top_groups, "Override (llada2): router groups kept (topk_group)");
  command->add_option("--shared-experts", options->shared_experts, "Override (llada2): shared experts (0: none)")
      ->check(CLI::Range(0, 64));
  command->add_option("--dense-layers", options->dense_layers, "Override (llada2): leading dense layers")
      ->check(CLI::Range(0, 4096));
  command->add_option("--rope-theta", request.rope_theta, "Override: RoPE base");
  command->add_flag("--tied", request.tied_embeddings, "Tie the LM head to the embedding");
  command->add_flag("--qkv-bias", request.qkv_bias, "LLaDA only: q/k/v projections with biases");
  command->add_option("--block-attention", request.block_attention,
                      "Block-causal attention: prompt (the prompt one block, D2F) | absolute (LLaDA 2.x)")
      ->check(CLI::IsMember({"prompt", "absolute"}));
  command->add_option("--tokenizer", request.tokenizer,
                      "tokenizer.json to include (vocabulary and mask id follow it)");
  command->add_option("--dtype", request.dtype, "bf16 | fp16 | fp32")->default_val("bf16");
  command->add_option("--shards", request.shards, "Number of safetensors shards")
      ->default_val(1)
      ->check(CLI::Range(1, 10000));
  command->add_option("--seed", request.seed, "Random seed")->required();
  command->add_option("--out", request.out, "Output folder")->required();
  command->add_flag("--quiet", options->quiet, "No progress output");
  return [options] { return run_make_test_model(*options); };
}

}  // namespace mosaic::cli
