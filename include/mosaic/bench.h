// Measuring one denoising step as ARCHITECTURE.md ("Measuring") defines it: prompt = L - M
// tokens, M masked positions in one block, every masked position a candidate row of the fused
// head (greedy at temperature 0, Gumbel-max otherwise). Used by `mosaic bench`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mosaic/engine.h"

namespace mosaic {

struct StepBenchmark {
  int64_t length = 0, masked = 0;
  bool cached = false;                  // a dual-cache step: only the masked rows computed
  double temperature = 0;
  std::vector<double> step_ms;          // each timed step, wall clock, in order
  std::vector<double> host_ms;          // of which the host was busy (pack, plan, launch)
  std::vector<bool> graph_replayed;     // per timed step: its forward replayed a CUDA graph
  // CUDA: per timed step, the device's span from the step's first upload to its last copy back;
  // the host's exposed time is step_ms less it (the host's launches that overlap the device's
  // work, or wait for a full launch queue, are not exposed). Empty on the CPU.
  std::vector<double> device_ms;
  double median_ms = 0, median_host_ms = 0, median_exposed_host_ms = 0;
  double flops = 0;                     // of one step (matmuls + attention + LM head rows)
  bool last_layer_candidates_only = true;  // the last layer's query side ran on the candidates only
  std::string chunks;                   // chunk counts the budget led to ("1,1,1,1": none)
  uint64_t planned_peak = 0, lower_bound = 0, average_live = 0, arena_bytes = 0;
  uint64_t cache_bytes = 0;             // the KV cache of the step's sequence (in the figures above)
  uint64_t weight_bytes = 0;            // device bytes of the weights
  uint64_t streamed_weight_bytes = 0;   // of the streamed layers, in pinned host memory
  double par() const { return average_live ? double(planned_peak) / double(average_live) : 0; }
  // Mapped memory (arena and the step's cache) over the lower bound, which counts the cache too.
  double inflation() const { return lower_bound ? double(arena_bytes + cache_bytes) / double(lower_bound) : 0; }
};

// FLOPs of one step of `config` at total length `length` with `candidates` head rows: 2 per
// multiply-add of every projection and of Q K^T and P V over all heads, plus the head's GEMM.
// With `last_layer_candidates_only` (the engine's default), the last layer's query side (q and o
// projections, attention, MLP) counts only the candidate rows, as the engine computes it.
double step_flops(int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads, int64_t head_dim,
                  int64_t ffn, int64_t vocab, int64_t length, int64_t candidates,
                  bool last_layer_candidates_only = true);
// The same for a cached step that computes `rows` rows (every one a candidate) against `keys`
// keys: every layer's projections and MLP over the rows, attention of the rows over the keys.
double cached_step_flops(int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads, int64_t head_dim,
                         int64_t ffn, int64_t vocab, int64_t keys, int64_t rows);

// A model loaded for timing steps on the backend EngineOptions choose (the GPU when visible).
//
//   auto bench = mosaic::StepBench::open("/models/llada-8b", {.budget = 24ull << 30});
//   mosaic::StepBenchmark b = bench->run(4096, 2048, 0.0, /*warmup=*/2, /*repeats=*/5);
class StepBench {
 public:
  static std::unique_ptr<StepBench> open(const std::filesystem::path& model_dir,
                                         const EngineOptions& options = {});
  ~StepBench();

  std::string device() const;   // "cpu" | "cuda"
  int64_t streamed_layers() const;  // layers whose weights are in pinned host memory (auto: as chosen)
  std::string family() const;   // "llada" | "dream"
  // Times `warmup` + `repeats` steps of one sequence of `length` tokens whose last `masked`
  // positions hold the mask id; prompt ids are random, fixed by `seed`. Throws mosaic::Error
  // when the step does not fit the budget.
  StepBenchmark run(int64_t length, int64_t masked, double temperature, int warmup, int repeats,
                    uint64_t seed = 0);
  // The same canvas, but each timed step is a dual-cache step (docs/design/cached-decoding.md):
  // one untimed full step fills the KV cache, then every step computes only the `masked` rows
  // at the end against it (a semi-autoregressive block against its context).
  StepBenchmark run_cached(int64_t length, int64_t masked, double temperature, int warmup, int repeats,
                           uint64_t seed = 0);

 private:
  struct Impl;
  explicit StepBench(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mosaic
