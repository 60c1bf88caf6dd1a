// mosaic bench: measured step latency and memory (`bench step`) and the longest sequence a budget
// really runs (`bench lmax`), in the shape ARCHITECTURE.md's "Measuring" defines: prompt L/2, the
// rest masked in one block, every masked position a candidate row (`--masked N`: the last N
// positions instead, e.g. one semi-autoregressive block of 32).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "core/json_dump.h"
#include "cli/bench_generate.h"
#include "cli/byte_size.h"
#include "cli/commands.h"
#include "cli/list_parse.h"
#include "cli/streamed_layers_flag.h"
#include "core/error.h"
#include "mosaic/bench.h"
#include "mosaic/device.h"
#include "mosaic/plan.h"

namespace mosaic::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct BenchOptions {
  std::string model, seq_len = "4096", budget, device = "auto", json_out, cache = "none";
  double temperature = 0;
  int warmup = 2, repeats = 5;
  int64_t length = 0;  // lmax: run this L instead of the planned L_max
  int64_t masked = 0;  // step: masked candidate rows at the end (0: L/2)
  int64_t streamed_layers = kAutoStreamedLayers;  // step: the last N layers' weights in pinned host memory
  bool json = false;
};

EngineOptions engine_options(const BenchOptions& o) {
  EngineOptions options;
  options.device = o.device;
  if (!o.budget.empty()) options.budget = parse_byte_size(o.budget, "--budget");
  options.streamed_layers = o.streamed_layers;
  return options;
}

nlohmann::ordered_json to_json(const StepBenchmark& b) {
  return {{"length", b.length}, {"masked", b.masked}, {"cached", b.cached}, {"temperature", b.temperature},
          {"median_ms", b.median_ms}, {"median_host_ms", b.median_host_ms}, {"step_ms", b.step_ms},
          {"host_ms", b.host_ms}, {"graph_replayed", b.graph_replayed}, {"device_ms", b.device_ms},
          {"median_exposed_host_ms", b.median_exposed_host_ms}, {"flops", b.flops},
          {"last_layer_candidates_only", b.last_layer_candidates_only}, {"chunks", b.chunks},
          {"planned_peak_bytes", b.planned_peak}, {"lower_bound_bytes", b.lower_bound},
          {"average_live_bytes", b.average_live}, {"arena_bytes", b.arena_bytes}, {"cache_bytes", b.cache_bytes},
          {"weight_bytes", b.weight_bytes},
          {"streamed_weight_bytes", b.streamed_weight_bytes}, {"par", b.par()}, {"inflation", b.inflation()}};
}

void write_json_file(const std::string& path, const nlohmann::ordered_json& report) {
  if (path.empty()) return;
  std::ofstream file(path);
  file << dump_json(report, 2) << "\n";
  if (!file) fail("{}: cannot write the JSON report", path);
}

void print_header() {
  fmt::print("{:>8} {:>10} {:>9} {:>8} {:>9} {:>9} {:>10} {:>10} {:>6} {:>9}  {}\n", "L", "step ms", "host ms",
             "host %", "exposed", "TFLOP/s", "peak GiB", "mapped GiB", "PAR", "inflation", "chunks");
}

void print_row(const StepBenchmark& b) {
  fmt::print("{:>8} {:>10.2f} {:>9.2f} {:>7.1f}% {:>8.2f}% {:>9.1f} {:>10.3f} {:>10.3f} {:>6.2f} {:>9.3f}  {}\n", b.length,
             b.median_ms, b.median_host_ms, 100.0 * b.median_host_ms / b.median_ms,
             100.0 * b.median_exposed_host_ms / b.median_ms,
             b.flops / (b.median_ms * 1e-3) / 1e12, b.planned_peak / kGiB, (b.arena_bytes + b.cache_bytes) / kGiB, b.par(),
             b.inflation(), b.chunks);
  std::fflush(stdout);
}

int run_step(const BenchOptions& o) {
  std::vector<int64_t> lengths;
  for (const int32_t length : parse_int_list(o.seq_len, "--seq-len")) {
    if (length < 2) fail("--seq-len {}: a step needs at least 2 tokens", length);
    if (o.masked >= length) fail("--masked {} leaves no prompt in a sequence of {} tokens", o.masked, length);
    lengths.push_back(length);
  }
  if (o.masked < 0) fail("--masked must be positive (got {})", o.masked);
  const bool cached = o.cache == "dual";
  if (cached && o.masked == 0) fail("bench step --cache dual needs --masked N: the block computed against the cache");
  EngineOptions options = engine_options(o);
  // Auto streaming sizes the device's weights for the longest step benched (not a 4k default).
  if (!cached) options.auto_stream_tokens = *std::max_element(lengths.begin(), lengths.end());
  const auto bench = StepBench::open(o.model, options);
  nlohmann::ordered_json report = {{"model", o.model}, {"family", bench->family()}, {"device", bench->device()},
                                   {"temperature", o.temperature}, {"warmup", o.warmup}, {"repeats", o.repeats}};
  if (options.budget) report["budget_bytes"] = *options.budget;
  report["streamed_layers"] = bench->streamed_layers();
  if (!o.json) {
    std::string shape = o.masked > 0 ? fmt::format("the last {} positions masked", o.masked)
                                     : std::string("prompt L/2, L/2 masked");
    if (cached) shape += ", each step computing only them against the dual KV cache of the rest";
    fmt::print("mosaic bench step: {} ({}, {}), {}, temperature {}, median of {} after {} warm-up\n", o.model,
               bench->family(), bench->device(), shape, o.temperature, o.repeats, o.warmup);
    if (bench->streamed_layers() > 0)
      fmt::print("the last {} layers' weights streamed from pinned host memory{}\n", bench->streamed_layers(),
                 o.streamed_layers == kAutoStreamedLayers ? " (auto)" : "");
    print_header();
  }
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const int64_t length : lengths) {
    const int64_t masked = o.masked > 0 ? o.masked : length - length / 2;
    const StepBenchmark b = cached ? bench->run_cached(length, masked, o.temperature, o.warmup, o.repeats)
                                   : bench->run(length, masked, o.temperature, o.warmup, o.repeats);
    rows.push_back(to_json(b));
    if (!o.json) print_row(b);
  }
  report["steps"] = rows;
  if (o.json) std::puts(dump_json(report, 2).c_str());
  write_json_file(o.json_out, report);
  return 0;
}

int run_lmax(const BenchOptions& o) {
  if (o.budget.empty()) fail("bench lmax needs --budget (e.g. 24GiB: weights + workspace + activations)");
  const EngineOptions options = engine_options(o);
  PlanRequest request;
  request.model = o.model;
  request.budget = options.budget;
  request.temperature = o.temperature;
  request.device = o.device == "cpu" || (o.device == "auto" && !visible_gpu()) ? "cpu" : "cuda";
  const LmaxReport planned = find_lmax(request);
  const int64_t length = o.length > 0 ? o.length : planned.l_max;
  if (length <= 0) fail("no length fits the budget of {} by the plan", o.budget);
  if (!o.json)
    fmt::print("mosaic bench lmax: {} under {}: planned L_max {} tokens; running one step at L = {} ...\n", o.model,
               o.budget, planned.l_max, length);
  std::fflush(stdout);
  const auto bench = StepBench::open(o.model, options);
  const StepBenchmark b = bench->run(length, length - length / 2, o.temperature, 0, 1);
  const uint64_t used = b.weight_bytes + b.arena_bytes + planned.at_l_max.workspace_bytes;
  if (o.json || !o.json_out.empty()) {
    nlohmann::ordered_json report = {{"model", o.model}, {"device", bench->device()},
                                     {"budget_bytes", *request.budget}, {"temperature", o.temperature},
                                     {"planned_l_max", planned.l_max}, {"measured_length", length},
                                     {"ran", true}, {"bytes_used", used}, {"step", to_json(b)}};
    if (o.json) {
      std::puts(dump_json(report, 2).c_str());
      return 0;
    }
    write_json_file(o.json_out, report);
  }
  print_header();
  print_row(b);
  fmt::print("L = {} ran under the budget: weights {:.3f} GiB + workspace {:.3f} GiB + arena {:.3f} GiB = {:.3f} GiB <= {}\n",
             length, b.weight_bytes / kGiB, planned.at_l_max.workspace_bytes / kGiB, b.arena_bytes / kGiB, used / kGiB,
             o.budget);
  return 0;
}

void add_common(CLI::App* command, BenchOptions* o) {
  command->add_option("--model", o->model, "Hugging Face model folder (e.g. from make-test-model --preset llada-8b)")
      ->required();
  command->add_option("--budget", o->budget, "Memory for weights + workspace + activations, e.g. 24GiB");
  command->add_option("--temperature", o->temperature, "Sampling temperature (Gumbel-max in the fused head)")
      ->capture_default_str();
  command->add_option("--device", o->device, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  command->add_flag("--json", o->json, "Print JSON instead of the table");
  command->add_option("--json-out", o->json_out, "Also write the JSON report to this file");
}

}  // namespace

Action register_bench(CLI::App& app) {
  auto* command = app.add_subcommand("bench", "Measure denoising steps: latency, memory, L_max");
  command->require_subcommand(1);
  auto o = std::make_shared<BenchOptions>();
  auto* step = command->add_subcommand("step", "Median step latency and memory at each --seq-len");
  add_common(step, o.get());
  step->add_option("--seq-len", o->seq_len, "Total lengths, e.g. 4096,16384,32768")->capture_default_str();
  step->add_option("--warmup", o->warmup, "Untimed steps first")->capture_default_str();
  step->add_option("--repeats", o->repeats, "Timed steps")->capture_default_str();
  step->add_option("--masked", o->masked, "Masked candidate rows at the end of each sequence (default: L/2)");
  step->add_option("--cache", o->cache, "none | dual: time steps of the masked rows alone against a KV cache")
      ->check(CLI::IsMember({"none", "dual"}))
      ->capture_default_str();
  add_streamed_layers_flag(step, o->streamed_layers);
  const Action generate = register_bench_generate(*command);
  auto* lmax = command->add_subcommand("lmax", "Plan L_max under --budget, then run one full step there");
  add_common(lmax, o.get());
  lmax->add_option("--length", o->length, "Run this L instead of the planned L_max");
  return [o, step, lmax, generate]() {
    if (step->parsed()) return run_step(*o);
    if (lmax->parsed()) return run_lmax(*o);
    return generate();
  };
}

}  // namespace mosaic::cli
