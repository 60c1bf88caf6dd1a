// StepBench: one step of the "Measuring" shape (ARCHITECTURE.md), timed on the chosen backend.
#include "mosaic/bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "api/step_runner_factory.h"
#include "core/error.h"
#include "model/model_weights.h"

namespace mosaic {
namespace {

// The MLP width a token's FFN computes: the dense SwiGLU's, or its k experts' together (the
// router's E x hidden product is left out: 1/16 of that at LLaDA-MoE's shape).
int64_t active_ffn(const ModelConfig& c) { return c.experts > 0 ? c.experts_per_token * c.expert_ffn : c.ffn; }

}  // namespace

double step_flops(int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads, int64_t head_dim,
                  int64_t ffn, int64_t vocab, int64_t length, int64_t candidates,
                  bool last_layer_candidates_only) {
  const double d = double(hidden), L = double(length), M = double(candidates);
  const double q = double(heads * head_dim), kv = double(kv_heads * head_dim);
  // Per token and layer: the k and v projections (every row: they are keys), and the query side:
  // the q and o projections and the gated MLP (gate, up, down).
  const double keys = 2.0 * d * 2 * kv;
  const double queries = 2.0 * (d * q + q * d + 3.0 * d * double(ffn));
  // Q K^T and P V over every head: 2 * rows * L * head_dim each.
  const double attention_per_query = 4.0 * L * double(head_dim) * double(heads);
  const double full_layer = L * (keys + queries + attention_per_query);
  const double last_layer = last_layer_candidates_only ? L * keys + M * (queries + attention_per_query) : full_layer;
  return double(layers - 1) * full_layer + last_layer + 2.0 * M * d * double(vocab);
}

double cached_step_flops(int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads, int64_t head_dim,
                         int64_t ffn, int64_t vocab, int64_t keys, int64_t rows) {
  const double d = double(hidden), R = double(rows);
  const double q = double(heads * head_dim), kv = double(kv_heads * head_dim);
  const double projections = 2.0 * (2 * d * kv + d * q + q * d + 3.0 * d * double(ffn));
  const double attention_per_query = 4.0 * double(keys) * double(head_dim) * double(heads);
  return double(layers) * R * (projections + attention_per_query) + 2.0 * R * d * double(vocab);
}

namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

struct StepBench::Impl {
  std::unique_ptr<Model> model;
  BackendChoice backend;
};

StepBench::StepBench(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StepBench::~StepBench() = default;

std::unique_ptr<StepBench> StepBench::open(const std::filesystem::path& model_dir, const EngineOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->model = Model::load(model_dir);
  impl->backend = make_step_runner(*impl->model, options);
  return std::unique_ptr<StepBench>(new StepBench(std::move(impl)));
}

std::string StepBench::device() const { return impl_->backend.device; }
int64_t StepBench::streamed_layers() const { return impl_->backend.streamed_layers; }
std::string StepBench::family() const { return std::string(family_name(impl_->model->config().family)); }

namespace {

// One canvas of the measuring shape: `length` - `masked` random prompt ids, then `masked` masks,
// every mask a candidate row.
struct BenchCanvas {
  std::vector<int32_t> ids, rows;
  std::vector<HeadRowSampling> sampling;
};

BenchCanvas bench_canvas(const ModelConfig& c, int64_t length, int64_t masked, double temperature, uint64_t seed) {
  if (length <= 0 || masked <= 0 || masked > length)
    fail("a benchmark step needs 0 < masked ({}) <= length ({})", masked, length);
  if (temperature < 0) fail("--temperature must be >= 0 (got {})", temperature);
  BenchCanvas canvas;
  canvas.ids.resize(static_cast<size_t>(length));
  std::mt19937_64 rng(seed);
  for (int64_t p = 0; p < length - masked; ++p) {
    int32_t id;
    do id = static_cast<int32_t>(rng() % static_cast<uint64_t>(c.vocab));
    while (id == c.mask_token_id);
    canvas.ids[p] = id;
  }
  for (int64_t p = length - masked; p < length; ++p) {
    canvas.ids[p] = static_cast<int32_t>(c.mask_token_id);
    canvas.rows.push_back(static_cast<int32_t>(p));
  }
  for (const int32_t row : canvas.rows) {
    HeadRowSampling how;
    how.seed = seed;
    how.position = static_cast<uint32_t>(row);
    how.choice_inv_temperature = temperature > 0 ? 1.0 / temperature : 0.0;
    how.choice_bans[0] = static_cast<int32_t>(c.mask_token_id);
    canvas.sampling.push_back(how);
  }
  return canvas;
}

// Times warmup + repeats runs of `input`, keeping the last run's figures.
void time_steps(StepRunner& runner, const StepInput& input, int warmup, int repeats, StepBenchmark& b) {
  if (warmup < 0 || repeats <= 0) fail("--warmup must be >= 0 and --repeats > 0");
  for (int i = 0; i < warmup + repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const StepOutput out = runner.run(input);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i < warmup) continue;
    b.step_ms.push_back(ms);
    b.host_ms.push_back(out.host_seconds * 1e3);
    b.graph_replayed.push_back(out.graph_replayed);
    if (out.device_seconds > 0) b.device_ms.push_back(out.device_seconds * 1e3);
    b.chunks = out.chunks.to_string();
    b.last_layer_candidates_only = out.last_layer_over_candidates;
    b.planned_peak = out.planned_peak, b.lower_bound = out.lower_bound;
    b.average_live = out.average_live, b.arena_bytes = out.arena_bytes;
    b.cache_bytes = out.resident;
  }
  b.median_ms = median(b.step_ms);
  b.median_host_ms = median(b.host_ms);
  if (b.device_ms.size() == b.step_ms.size()) {
    std::vector<double> exposed;
    for (size_t i = 0; i < b.step_ms.size(); ++i) exposed.push_back(std::max(0.0, b.step_ms[i] - b.device_ms[i]));
    b.median_exposed_host_ms = median(exposed);
  } else {  // the CPU: the host is the device
    b.median_exposed_host_ms = b.median_ms;
  }
}

}  // namespace

StepBenchmark StepBench::run(int64_t length, int64_t masked, double temperature, int warmup, int repeats,
                             uint64_t seed) {
  const ModelConfig& c = impl_->model->config();
  const BenchCanvas canvas = bench_canvas(c, length, masked, temperature, seed);
  StepInput input;
  input.sequences.push_back({canvas.ids, canvas.rows});
  input.sampling = canvas.sampling;
  StepBenchmark b;
  b.length = length, b.masked = masked, b.temperature = temperature;
  b.weight_bytes = impl_->backend.weight_bytes, b.streamed_weight_bytes = impl_->backend.streamed_weight_bytes;
  time_steps(*impl_->backend.runner, input, warmup, repeats, b);
  // The FLOPs the steps did: their last layer ran over the candidates only unless switched off or
  // the budget's chunking chose every row.
  b.flops = step_flops(c.hidden, c.layers, c.heads, c.kv_heads, c.head_dim, active_ffn(c), c.vocab, length, masked,
                       b.last_layer_candidates_only);
  return b;
}

StepBenchmark StepBench::run_cached(int64_t length, int64_t masked, double temperature, int warmup, int repeats,
                                    uint64_t seed) {
  const ModelConfig& c = impl_->model->config();
  StepRunner& runner = *impl_->backend.runner;
  const BenchCanvas canvas = bench_canvas(c, length, masked, temperature, seed);
  StepInput input;
  SequenceRows sequence{canvas.ids, canvas.rows};
  sequence.cache_id = runner.reserve_cache(length);
  sequence.begin = 0, sequence.end = length;  // the refresh: every row, filling the cache
  input.sequences.push_back(sequence);
  input.sampling = canvas.sampling;
  StepBenchmark b;
  try {
    runner.run(input);
    input.sequences[0].begin = length - masked;  // then the block against the cached context
    b.length = length, b.masked = masked, b.temperature = temperature, b.cached = true;
    b.weight_bytes = impl_->backend.weight_bytes, b.streamed_weight_bytes = impl_->backend.streamed_weight_bytes;
    time_steps(runner, input, warmup, repeats, b);
  } catch (...) {
    runner.release_cache(sequence.cache_id);
    throw;
  }
  runner.release_cache(sequence.cache_id);
  b.flops = cached_step_flops(c.hidden, c.layers, c.heads, c.kv_heads, c.head_dim, active_ffn(c), c.vocab, length,
                              masked);
  return b;
}

}  // namespace mosaic
