// Lazy chunking: fit a step into a memory budget with the fewest chunks, only where the peak is.
//
// Chunking costs latency (more, smaller kernels), so nothing is chunked by default. When the
// planned step does not fit the budget:
//  1. Find the op where live bytes peak and the chunk group it belongs to (qkv, attention, ffn,
//     head). If none (the embedding) or the group is at its maximum, the step cannot fit.
//  2. Raise that group's chunk count to the smallest value at which the group's own peak (the
//     most bytes live during any of its ops) fits the budget (doubling, then bisection).
//  3. Repeat until the step fits; then plan the full graph and confirm; if offset placement
//     overshoots the live-bytes bound, tighten the target by the overshoot and go on.
// The peak of a step is the maximum over groups of a peak that falls as that group's count
// rises, so each group ends at the smallest count that brings its own peak under the budget:
// the total is minimal (tests compare with brute force). Raising a group only until the peak
// moves elsewhere would reach the same counts, but near the floor (x, K, V) the bottleneck
// alternates between the K/V pass and the query pass by a few bytes per step, costing thousands
// of probes; raising straight to the budget takes a handful.
//
// Probes are cheap: they instantiate the step graph with two decoder layers (every layer but the
// last is the same, and no per-layer tensor outlives its layer, so the peak is the same) and take
// the live-bytes lower bound in one pass. Only the final configuration is planned in full.
//
// The last layer runs over the candidate rows only (GraphOptions::last_layer_candidates_only),
// which saves time but keeps the candidates' gathered residual rows beside x, K and V for a
// moment. When the step needs chunks, the search also runs with the last layer over every row
// (ChunkConfig::last_layer_all_rows: the same results, the floor of x, K and V alone) and takes
// whichever fits with fewer chunks; a tie goes to candidates only.
//
// Where the request allows it (ResidualPlacement::fit: a CUDA engine) and no chunking fits with
// the residual stream on the device, the search runs again with x in host memory, staged by rows
// (ChunkConfig::residual_in_host, graph/residual_staging.h). It runs too where keeping x on the
// device fits only with chunks of fewer than kMinRowsPerChunk rows: such chunks leave the GPU idle
// (measured: LLaDA-8B at L = 393,216 under 24 GiB needs 1,653 query chunks of 238 rows with x on
// the device and ran past 200 s; at 557,056 with x in host memory, 40 chunks, 266 s at 641
// TFLOP/s), while x's copies hide under compute at such lengths. Then the fewer chunks win, and a
// tie keeps x on the device: no byte moves where moving buys nothing.
// docs/design/residual-staging.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/step_graph.h"
#include "plan/step_planner.h"

namespace mosaic {

// Below this many rows a chunk of the K/V pass, query pass or FFN no longer fills the GPU.
inline constexpr int64_t kMinRowsPerChunk = 8192;

// Whether every chunk of `chunks` keeps at least kMinRowsPerChunk rows (all of the step's rows
// where it has fewer): chunks that fill the GPU.
bool chunks_fill_the_gpu(const StepShape& shape, const ChunkConfig& chunks);

// Where the residual stream x lives (graph/residual_staging.h).
enum class ResidualPlacement : uint8_t {
  device,  // on the device (the CPU backend: its only memory)
  host,    // in pinned host memory, staged by rows
  fit,     // on the device where the step fits so, else in host memory (a CUDA engine)
};

struct ChunkSearchRequest {
  StepShape shape;
  GraphOptions options;
  uint64_t activation_budget = 0;   // bytes the arena may use
  uint64_t granule = 1;             // the arena maps whole granules (2 MiB pages on CUDA)
  int64_t max_chunks = kMaxChunksPerGroup;  // per group; chunks never hold fewer than one row
  ResidualPlacement residual = ResidualPlacement::device;
};

struct ChunkSearchStep {
  ChunkGroup bottleneck;
  int64_t chunks;          // the group's new count
  uint64_t peak_before;    // live-bytes peak before the raise
};

struct ChunkSearchResult {
  bool fits = false;
  ChunkConfig chunks;                 // the configuration chosen (or the last one tried)
  uint64_t planned_peak = 0;          // planned arena bytes of that configuration (full graph)
  uint64_t lower_bound = 0;
  uint64_t floor = 0;                 // live-bytes peak with every group at its maximum
  int probes = 0;                     // graphs evaluated
  std::vector<ChunkSearchStep> steps;
  std::optional<PlannedStep> planned; // the full plan of `chunks` when it fits
};

ChunkSearchResult search_chunks(const ModelConfig& config, const ChunkSearchRequest& request);

// The live-bytes peak of a configuration, the group at the peak, and each group's own peak,
// from a one-layer graph.
struct ChunkProbe {
  uint64_t peak = 0;
  ChunkGroup group = ChunkGroup::none;
  uint64_t group_peak[kChunkGroups + 1] = {};  // indexed by ChunkGroup (none last)
};
ChunkProbe probe_chunks(const ModelConfig& config, const StepShape& shape, const GraphOptions& options,
                        const ChunkConfig& chunks);

}  // namespace mosaic
