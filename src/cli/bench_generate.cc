// mosaic bench generate: a batch of random prompts generated end to end with each cache mode in
// turn, the same prompts and options for each; prints a table (wall seconds, steps, forwards,
// generated tokens per second, speed-up over the first mode, the host's share at most) and
// JSON. --stop-after K ends every generation after K steps (a measured prefix of a generation
// too long to run in full; the table says so).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "core/json_dump.h"
#include "cli/bench_generate.h"
#include "cli/byte_size.h"
#include "cli/d2f_flags.h"
#include "cli/list_parse.h"
#include "core/error.h"
#include "mosaic/engine.h"

namespace mosaic::cli {
namespace {

struct BenchGenerateOptions {
  std::string model, adapter, budget, device = "auto", prompt_lengths = "512", caches = "none,dual", json_out;
  D2fFlags d2f;
  int64_t batch = 1, stop_after = 0;
  double threshold = -1;
  GenerationOptions gen;
  bool json = false;
};

CacheMode cache_mode(const std::string& name) {
  if (name == "none") return CacheMode::none;
  if (name == "prefix") return CacheMode::prefix;
  if (name == "dual") return CacheMode::dual;
  if (name == "auto") return CacheMode::automatic;
  fail("--cache: '{}' is not a cache mode (expected none, prefix, dual or auto)", name);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int run(BenchGenerateOptions& o) {
  if (o.batch < 1) fail("--batch must be at least 1 (got {})", o.batch);
  if (o.stop_after < 0) fail("--stop-after must be >= 0 (got {})", o.stop_after);
  if (o.threshold >= 0) o.gen.threshold = o.threshold;
  o.gen.d2f = o.d2f.resolve();
  EngineOptions options;
  if (!o.adapter.empty()) options.adapter = o.adapter;
  options.device = o.device;
  if (!o.budget.empty()) options.budget = parse_byte_size(o.budget, "--budget");
  const auto engine = Engine::open(o.model, options);
  const ModelInfo& info = engine->info();
  nlohmann::ordered_json report = {{"model", o.model},       {"family", info.family},
                                   {"device", info.device},  {"batch", o.batch},
                                   {"gen_length", o.gen.gen_length}, {"steps", o.gen.steps},
                                   {"block_length", o.gen.block_length}, {"stop_after", o.stop_after},
                                   {"adapter", o.adapter}, {"d2f", o.gen.d2f.has_value()}};
  if (o.gen.d2f)
    report["d2f_thresholds"] = {o.gen.d2f->block_add_threshold, o.gen.d2f->decoded_token_threshold,
                                o.gen.d2f->skip_threshold};
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  if (!o.json) {
    fmt::print("mosaic bench generate: {} ({}, {}), batch {}, {} tokens in {} steps, block {}{}\n", o.model,
               info.family, info.device, o.batch, o.gen.gen_length, o.gen.steps, o.gen.block_length,
               o.stop_after > 0 ? fmt::format(", each stopped after {} steps", o.stop_after) : "");
    fmt::print("{:>8} {:>7} {:>10} {:>7} {:>9} {:>11} {:>9} {:>8}\n", "prompt", "cache", "seconds", "steps", "forwards",
               "tokens/s", "speed-up", "host %");
  }
  for (const int32_t prompt_length : parse_int_list(o.prompt_lengths, "--prompt-len")) {
    if (prompt_length < 1) fail("--prompt-len {}: a prompt needs at least one token", prompt_length);
    std::vector<GenerateRequest> requests(static_cast<size_t>(o.batch));
    std::mt19937_64 rng(static_cast<uint64_t>(prompt_length));
    for (GenerateRequest& request : requests)
      for (int32_t p = 0; p < prompt_length; ++p) {
        int32_t id;
        do id = static_cast<int32_t>(rng() % static_cast<uint64_t>(info.vocab));
        while (id == info.mask_token_id || id == info.eos_token_id);
        request.prompt_ids.push_back(id);
      }
    double first_seconds = 0;
    for (const std::string& name : split(o.caches)) {
      GenerationOptions gen = o.gen;
      gen.cache = cache_mode(name);
      int64_t committed = 0;
      const auto on_step = [&](const GenerateEvent& event) {
        committed += static_cast<int64_t>(event.committed.size());
        return o.stop_after == 0 || event.step < o.stop_after;
      };
      const auto start = std::chrono::steady_clock::now();
      const std::vector<GenerateResult> results = engine->generate(requests, gen, on_step);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (first_seconds == 0) first_seconds = seconds;
      const GenerateResult& r = results.front();
      const double tokens_per_second = committed / seconds;
      // The host's time, at most: everything outside the forwards (the decoder's rules, commits,
      // this loop's callback) and the launch part of every forward. Of the request that took part
      // in the most forward time (every request's forwards are the batch's).
      const GenerateResult& longest = *std::max_element(
          results.begin(), results.end(),
          [](const GenerateResult& a, const GenerateResult& b) { return a.forward_seconds < b.forward_seconds; });
      const double host_seconds =
          std::max(0.0, seconds - longest.forward_seconds) + longest.forward_host_seconds;
      runs.push_back({{"prompt_length", prompt_length}, {"cache", r.cache}, {"seconds", seconds},
                      {"steps", r.steps}, {"forwards", r.forwards}, {"committed_tokens", committed},
                      {"tokens_per_second", tokens_per_second}, {"stopped", r.cancelled},
                      {"speedup_over_first", first_seconds / seconds},
                      {"forward_seconds", longest.forward_seconds},
                      {"forward_host_seconds", longest.forward_host_seconds},
                      {"host_seconds_at_most", host_seconds}, {"host_share_at_most", host_seconds / seconds}});
      if (!o.json)
        fmt::print("{:>8} {:>7} {:>10.3f} {:>7} {:>9} {:>11.1f} {:>8.2f}x {:>7.1f}{}\n", prompt_length, r.cache, seconds,
                   r.steps, r.forwards, tokens_per_second, first_seconds / seconds, 100.0 * host_seconds / seconds,
                   r.cancelled ? "  (stopped)" : "");
      std::fflush(stdout);
    }
  }
  report["runs"] = runs;
  if (o.json) std::puts(dump_json(report, 2).c_str());
  if (!o.json_out.empty()) {
    std::ofstream file(o.json_out);
    file << dump_json(report, 2) << "\n";
    if (!file) fail("{}: cannot write the JSON report", o.json_out);
  }
  return 0;
}

}  // namespace

Action register_bench_generate(CLI::App& bench) {
  auto o = std::make_shared<BenchGenerateOptions>();
  CLI::App* c = bench.add_subcommand("generate", "Whole generations timed end to end, per KV cache mode");
  c->add_option("--model", o->model, "Hugging Face model folder")->required();
  c->add_option("--prompt-len", o->prompt_lengths, "Random prompts of these lengths, e.g. 512,32768")
      ->capture_default_str();
  c->add_option("--cache", o->caches, "Cache modes to time in turn, e.g. none,prefix,dual")->capture_default_str();
  c->add_option("--batch", o->batch, "Prompts generated together")->capture_default_str();
  c->add_option("--gen-length", o->gen.gen_length, "Tokens to generate")->default_val(256);
  c->add_option("--steps", o->gen.steps, "Denoising steps")->default_val(256);
  c->add_option("--block-length", o->gen.block_length, "Semi-autoregressive block")->default_val(32);
  c->add_option("--threshold", o->threshold, "Fast-dLLM threshold rule (default: top-k by the step schedule)");
  c->add_option("--adapter", o->adapter, "PEFT LoRA adapter folder merged at load");
  o->d2f.add_to(c, "D2F pipelined block decoding (steps does not apply)", "D2F: ");
  c->add_option("--stop-after", o->stop_after, "End every generation after this many steps (0: run in full)");
  c->add_option("--budget", o->budget, "Memory for weights + cache + activations, e.g. 24GiB");
  c->add_option("--device", o->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  c->add_flag("--json", o->json, "Print JSON instead of the table");
  c->add_option("--json-out", o->json_out, "Also write the JSON report to this file");
  return [o] { return run(*o); };
}

}  // namespace mosaic::cli
