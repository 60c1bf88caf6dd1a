// How long lazy chunking takes to fit a step into a budget (target: typically <= 5 ms).
#include <benchmark/benchmark.h>

#include "chunk/chunk_search.h"
#include "model/test_model.h"

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Args: family (0 LLaDA-8B, 1 Dream-7B), L, activation budget in MiB.
void SearchChunks(benchmark::State& state) {
  const bool dream = state.range(0) == 1;
  const mosaic::ModelConfig config =
      mosaic::test_model_preset(dream ? mosaic::Family::dream : mosaic::Family::llada,
                                dream ? "dream-7b" : "llada-8b");
  const int64_t L = state.range(1);
  mosaic::ChunkSearchRequest request;
  request.shape = mosaic::StepShape{{L}, {L / 2}};
  request.options = {mosaic::DType::bf16, mosaic::HeadMode::stats};
  request.activation_budget = static_cast<uint64_t>(state.range(2)) << 20;
  request.granule = 2u << 20;
  mosaic::ChunkSearchResult result;
  for (auto _ : state) {
    result = mosaic::search_chunks(config, request);
    benchmark::DoNotOptimize(result.planned_peak);
  }
  state.counters["fits"] = result.fits;
  state.counters["probes"] = result.probes;
  state.counters["extra_chunks"] = static_cast<double>(result.chunks.extra_chunks());
  state.SetLabel(result.chunks.to_string());
}

BENCHMARK(SearchChunks)
    ->Args({0, 32768, 1024})      // LLaDA-8B, 32k tokens, 1 GiB of activations
    ->Args({0, 131072, 4096})     // 128k tokens, 4 GiB
    ->Args({0, 262144, 9150})     // 256k tokens, what 24 GiB leaves beside the weights
    ->Args({1, 65536, 2048})      // Dream-7B, 64k tokens, 2 GiB
    ->Args({1, 262144, 9900})     // Dream-7B, 256k tokens, what 24 GiB leaves
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
