// The host's part of a step, without the GPU: what CudaStepRunner::run does before its kernels
// are enqueued — padding for replays, packing, the step's shape and cache views, the chunk
// choice, the graph of the step and its plan (a cache hit after the first). For D2F's
// characterization shape on LLaDA-8B (64 computed rows after a 256-token prompt, 19 masked,
// block-causal), and for chunked full steps at 32k. docs/PERFORMANCE.md, "Small steps padded".
#include <benchmark/benchmark.h>

#include <numeric>

#include "core/block_attention.h"
#include "exec/forward_batch.h"
#include "exec/kv_cache_views.h"
#include "exec/replay_padding.h"
#include "exec/step_chunker.h"
#include "model/test_model.h"
#include "plan/step_planner.h"

namespace {

using namespace mosaic;

struct D2fStep {
  ModelConfig config = test_model_preset(Family::llada, "llada-8b");
  KvPagePool pool{128};
  std::vector<int32_t> canvas = std::vector<int32_t>(768, 5), rows;
  StepInput input;
  D2fStep() {
    const uint64_t cache = pool.reserve(pool.pages_for(768));
    for (int32_t p = 320; p < 352; p += 3) rows.push_back(p);  // 11 masks left in one block
    for (int32_t p = 352; p < 384; p += 4) rows.push_back(p);  // 8 in the next
    SequenceRows s{canvas, rows};
    s.cache_id = cache, s.begin = 320, s.end = 384;
    s.layout = BlockLayout{BlockAttention::prompt, 256, 32, 768};
    input.sequences = {s};
    input.sampling.resize(rows.size());
  }
};

void HostPathOfASmallCachedStep(benchmark::State& state) {
  D2fStep step;
  const bool pad = state.range(0) != 0;
  GraphOptions options{DType::bf16, HeadMode::stats};
  options.head_scratch_per_row = 4096;
  StepPlanner planner(step.config, options);
  StepChunker chunker(step.config, 2 << 20);
  for (auto _ : state) {
    std::optional<PaddedStep> padded;
    if (pad) padded = pad_candidates_for_replay(step.config, step.input);
    const StepInput& input = padded ? padded->input : step.input;
    PackedBatch packed = pack_batch(step.config, input.sequences);
    StepShape shape = step_shape_of(step.config, input.sequences);
    add_cache_views(step.pool, input.sequences, shape, packed);
    const ChunkConfig chunks = chunker.chunks_for(shape, options, std::nullopt);
    const Graph graph = planner.instantiate(shape, chunks);
    const auto planned = planner.plan(graph);
    benchmark::DoNotOptimize(planned->plan.peak_bytes);
  }
  state.counters["plan_hits"] = static_cast<double>(planner.hits());
}

// Arg: 1 = padded for replays (the CUDA runner's default), 0 = mask-only rows.
BENCHMARK(HostPathOfASmallCachedStep)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// A full step of L rows (L / 8 candidates) chunked as the tightest budget chunks LLaDA-8B at
// 32k, the graph instantiated and its plan found in the cache, as every step after the first.
void HostPathOfAChunkedFullStep(benchmark::State& state) {
  const ModelConfig config = test_model_preset(Family::llada, "llada-8b");
  const int64_t L = state.range(0);
  const ChunkConfig chunks{state.range(1), state.range(2), state.range(3), state.range(4)};
  GraphOptions options{DType::bf16, HeadMode::stats};
  options.head_scratch_per_row = 4096;
  StepPlanner planner(config, options);
  const StepShape shape{{L}, {L / 8}};
  for (auto _ : state) {
    const Graph graph = planner.instantiate(shape, chunks);
    const auto planned = planner.plan(graph);
    benchmark::DoNotOptimize(planned->plan.peak_bytes);
  }
  state.counters["ops"] = static_cast<double>(planner.instantiate(shape, chunks).ops.size());
}

// Args: L, then chunk counts qkv, attention, ffn, head.
BENCHMARK(HostPathOfAChunkedFullStep)
    ->Args({32768, 1, 1, 1, 1})
    ->Args({32768, 17, 34, 8, 2})
    ->Args({32768, 32, 64, 64, 8})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
