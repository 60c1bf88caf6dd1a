// mosaic info: what a model folder holds, after full validation.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>

#include "core/json_dump.h"
#include "cli/commands.h"
#include "core/printable.h"
#include "mosaic/engine.h"

namespace mosaic::cli {
namespace {

struct InfoOptions {
  std::string model;
  bool json = false;
};

int run_info(const InfoOptions& options) {
  const auto engine = Engine::open(options.model);
  const ModelInfo& info = engine->info();
  nlohmann::ordered_json report = {
      {"path", printable(options.model)},       {"family", info.family},     {"architecture", info.architecture},
      {"layers", info.layers},       {"hidden", info.hidden},     {"heads", info.heads},
      {"kv_heads", info.kv_heads},   {"head_dim", info.head_dim}, {"ffn", info.ffn},
      {"vocab", info.vocab},         {"rope_theta", info.rope_theta},
      {"attention", info.attention},
      {"mask_token_id", info.mask_token_id}, {"mask_token_source", info.mask_token_source},
      {"eos_token_id", info.eos_token_id},   {"eos_token_source", info.eos_token_source},
      {"weight_bytes", info.weight_bytes},   {"weight_dtype", info.weight_dtype}};
  if (info.experts > 0) {  // after ffn (a MoE model's FFNs are its experts)
    report["experts"] = info.experts;
    report["experts_per_token"] = info.experts_per_token;
    report["expert_ffn"] = info.expert_ffn;
    report["router"] = info.router;
    if (info.shared_expert_ffn > 0) report["shared_expert_ffn"] = info.shared_expert_ffn;
    if (info.dense_layers > 0) report["dense_layers"] = info.dense_layers;
  }
  if (info.rotary_dim != info.head_dim) report["rotary_dim"] = info.rotary_dim;
  if (options.json) {
    std::puts(dump_json(report, 2).c_str());
    return 0;
  }
  for (const auto& [key, value] : report.items()) fmt::print("{:>17}: {}\n", key, dump_json(value));
  return 0;
}

}  // namespace

Action register_info(CLI::App& app) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* command = app.add_subcommand("info", "Validate a model folder and print its shape");
  command->add_option("--model", options->model, "Hugging Face model folder")->required();
  command->add_flag("--json", options->json, "Print JSON");
  return [options] { return run_info(*options); };
}

}  // namespace mosaic::cli
