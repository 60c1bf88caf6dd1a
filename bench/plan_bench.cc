// How long planning a step takes: instantiate the family graph and assign offsets (greedy by
// size, verified). Target: under 1 ms for LLaDA-8B at any L (the plan cache makes it rarer still).
#include <benchmark/benchmark.h>

#include "graph/step_graph.h"
#include "model/test_model.h"
#include "plan/step_planner.h"

namespace {

void PlanLlada8B(benchmark::State& state) {
  const mosaic::ModelConfig config = mosaic::test_model_preset(mosaic::Family::llada, "llada-8b");
  const int64_t L = state.range(0);
  const mosaic::ChunkConfig chunks{state.range(1), state.range(2), state.range(3), state.range(4)};
  const mosaic::GraphOptions options{mosaic::DType::bf16, mosaic::HeadMode::stats};
  for (auto _ : state) {
    mosaic::PlannedStep step = mosaic::plan_graph(
        mosaic::instantiate_step_graph(config, mosaic::StepShape{{L}, {L / 2}}, chunks, options));
    benchmark::DoNotOptimize(step.plan.peak_bytes);
  }
  state.counters["tensors"] = static_cast<double>(
      mosaic::instantiate_step_graph(config, mosaic::StepShape{{L}, {L / 2}}, chunks, options).tensors.size());
}

// Args: L, then chunk counts qkv, attention, ffn, head.
BENCHMARK(PlanLlada8B)
    ->Args({4096, 1, 1, 1, 1})
    ->Args({32768, 1, 1, 1, 1})
    ->Args({131072, 1, 1, 1, 1})
    ->Args({262144, 1, 1, 1, 1})
    ->Args({262144, 4, 8, 16, 4})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
