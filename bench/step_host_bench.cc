// The host's share of a small cached step, without the GPU: what CudaStepRunner::run does before
// its kernels are enqueued — padding for replays, packing, the step's shape and cache views, the
// chunk choice, the graph of the step and its plan (a cache hit after the first) — for D2F's
// characterization shape on LLaDA-8B (64 computed rows after a 256-token prompt, 20 masked,
// block-causal). docs/PERFORMANCE.md, "Replay padding".
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

}  // namespace

BENCHMARK_MAIN();
