// mosaic forward: logits of chosen rows for a batch of token-id sequences (mask-only: no other
// row's logits are computed).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

#include "core/json_dump.h"
#include "cli/commands.h"
#include "cli/list_parse.h"
#include "cli/logit_stats.h"
#include "cli/npy.h"
#include "cli/streamed_layers_flag.h"
#include "cli/parallel_flags.h"
#include "core/error.h"
#include "mosaic/engine.h"

namespace mosaic::cli {
namespace {

struct ForwardOptions {
  std::string model;
  std::vector<std::string> ids;
  std::vector<std::string> rows;
  int top = 5;
  bool json = false;
  std::string logits_out;
  std::string device = "auto";
  std::string adapter;
  int64_t streamed_layers = kAutoStreamedLayers;  // the last N layers' weights in pinned host memory (CUDA)
  int64_t tensor_parallel = 1;  // ranks splitting the model (docs/design/tensor-parallel.md)
  int64_t context_parallel = 1;  // ranks splitting a step's rows (docs/design/context-parallel.md)
  int64_t block_length = 0;
  std::vector<int64_t> prompt_lengths;
};

std::vector<SequenceInput> build_batch(const ForwardOptions& options, const ModelInfo& info) {
  if (!options.rows.empty() && options.rows.size() != options.ids.size())
    fail("--rows was given {} times but --ids {} times: give one --rows per --ids (or none to "
         "request every masked position)",
         options.rows.size(), options.ids.size());
  if (!options.prompt_lengths.empty() && options.prompt_lengths.size() != options.ids.size())
    fail("--prompt-length was given {} times but --ids {} times: give one per --ids", options.prompt_lengths.size(),
         options.ids.size());
  std::vector<SequenceInput> batch;
  for (size_t s = 0; s < options.ids.size(); ++s) {
    SequenceInput sequence;
    sequence.ids = parse_int_list(options.ids[s], "--ids");
    sequence.block_length = options.block_length;
    if (!options.prompt_lengths.empty()) sequence.prompt_length = options.prompt_lengths[s];
    if (!options.rows.empty()) {
      sequence.rows = parse_int_list(options.rows[s], "--rows");
    } else {
      for (size_t p = 0; p < sequence.ids.size(); ++p)
        if (sequence.ids[p] == info.mask_token_id) sequence.rows.push_back(static_cast<int32_t>(p));
      if (sequence.rows.empty())
        fail("sequence {} has no masked position (mask id {}) and no --rows was given", s,
             info.mask_token_id);
    }
    batch.push_back(std::move(sequence));
  }
  return batch;
}

int run_forward(const ForwardOptions& options) {
  EngineOptions engine_options;
  engine_options.device = options.device;
  if (!options.adapter.empty()) engine_options.adapter = options.adapter;
  engine_options.streamed_layers = options.streamed_layers;
  engine_options.tensor_parallel = options.tensor_parallel;
  engine_options.context_parallel = options.context_parallel;
  const auto engine = Engine::open(options.model, engine_options);
  const ModelInfo& info = engine->info();
  const std::vector<SequenceInput> batch = build_batch(options, info);

  const auto start = std::chrono::steady_clock::now();
  const ForwardOutput out = engine->forward(batch);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int64_t total_rows = static_cast<int64_t>(out.logits.size()) / std::max<int64_t>(out.vocab, 1);
  if (!options.logits_out.empty())
    write_npy_f32(options.logits_out, out.logits, {total_rows, out.vocab});

  nlohmann::ordered_json report;
  report["device"] = info.device;
  report["model"] = {{"path", options.model}, {"family", info.family}, {"layers", info.layers},
                     {"hidden", info.hidden}, {"vocab", info.vocab}, {"dtype", info.weight_dtype}};
  if (!info.adapter.empty())
    report["adapter"] = {{"path", info.adapter}, {"adapted_projections", info.adapted_projections}};
  report["seconds"] = seconds;
  report["memory"] = {{"planned_peak_bytes", out.planned_peak}, {"lower_bound_bytes", out.lower_bound},
                      {"arena_bytes", out.arena_bytes}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  int64_t r = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    for (const int32_t row : batch[s].rows) {
      const std::span<const float> logits(out.logits.data() + r * out.vocab,
                                          static_cast<size_t>(out.vocab));
      const LogitStats stats = logit_stats(logits, options.top);
      nlohmann::ordered_json top = nlohmann::ordered_json::array();
      for (const TopToken& token : stats.top)
        top.push_back({{"id", token.id}, {"logit", token.logit}, {"probability", token.probability}});
      rows.push_back({{"sequence", s}, {"row", row}, {"top", top}, {"max", stats.max},
                      {"mean", stats.mean}, {"std", stats.std}, {"logsumexp", stats.logsumexp},
                      {"entropy", stats.entropy}});
      ++r;
    }
  }
  report["rows"] = rows;
  if (options.json) {
    std::puts(dump_json(report, 2).c_str());
    return 0;
  }
  fmt::print("{} ({}, {} layers, hidden {}, vocab {}, {} weights) on {}: {} rows in {:.3f} s\n",
             options.model, info.family, info.layers, info.hidden, info.vocab, info.weight_dtype,
             info.device, total_rows, seconds);
  fmt::print("activations: planned peak {:.2f} MiB, lower bound {:.2f} MiB, arena {:.2f} MiB\n",
             out.planned_peak / 1048576.0, out.lower_bound / 1048576.0, out.arena_bytes / 1048576.0);
  for (const auto& row : report["rows"]) {
    std::string top;
    for (const auto& token : row["top"])
      top += fmt::format("  {:>6} {:8.3f} ({:5.1f}%)", token["id"].get<int>(),
                         token["logit"].get<float>(), 100 * token["probability"].get<double>());
    fmt::print("seq {} row {:>4}:{}\n", row["sequence"].get<int>(), row["row"].get<int>(), top);
    fmt::print("             max {:.3f}  mean {:.3f}  std {:.3f}  logsumexp {:.3f}  entropy {:.3f} nats\n",
               row["max"].get<double>(), row["mean"].get<double>(), row["std"].get<double>(),
               row["logsumexp"].get<double>(), row["entropy"].get<double>());
  }
  return 0;
}

}  // namespace

Action register_forward(CLI::App& app) {
  auto options = std::make_shared<ForwardOptions>();
  CLI::App* command = app.add_subcommand(
      "forward", "Logits of chosen rows for a batch of token-id sequences (mask-only)");
  command->add_option("--model", options->model, "Hugging Face model folder")->required();
  command->add_option("--adapter", options->adapter,
                      "PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors), merged at load");
  add_streamed_layers_flag(command, options->streamed_layers);
  add_tensor_parallel_flag(command, options->tensor_parallel);
  add_context_parallel_flag(command, options->context_parallel);
  command->add_option("--ids", options->ids,
                      "Token ids of one sequence, e.g. 1,2,3 (repeat for a batch)")
      ->required();
  command->add_option("--rows", options->rows,
                      "Positions whose logits to compute, one list per --ids "
                      "(default: the positions holding the mask id)");
  command->add_option("--top", options->top, "Top tokens to show per row")
      ->default_val(5)
      ->check(CLI::Range(0, 1000));
  command->add_option("--block-length", options->block_length,
                      "Block-causal models: the attention block length (a query sees its block and the earlier ones)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  command->add_option("--prompt-length", options->prompt_lengths,
                      "Block-causal models whose prompt is one block (D2F): the prompt length, one per --ids");
  command->add_flag("--json", options->json, "Print a JSON report");
  command->add_option("--device", options->device, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  command->add_option("--logits-out", options->logits_out,
                      "Write the logits as a float32 .npy array [rows, vocab]");
  return [options] { return run_forward(*options); };
}

}  // namespace mosaic::cli
