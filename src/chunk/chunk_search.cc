#include "chunk/chunk_search.h"

#include <algorithm>

#include "core/error.h"
#include "plan/live_bytes.h"

namespace mosaic {
namespace {

uint64_t round_up(uint64_t bytes, uint64_t granule) { return (bytes + granule - 1) / granule * granule; }

// The fewest rows a chunk of the row groups (K/V pass, query pass, FFN) holds.
int64_t fewest_rows_per_chunk(const StepShape& shape, const ChunkConfig& chunks) {
  const int64_t rows = shape.tokens();
  const int64_t most = std::max({chunks.qkv, chunks.attention, chunks.ffn});
  return (rows + most - 1) / most;
}

int64_t group_limit(const ChunkSearchRequest& request, ChunkGroup group) {
  const int64_t rows = group == ChunkGroup::head ? request.shape.total_candidates() : request.shape.tokens();
  return std::max<int64_t>(1, std::min(request.max_chunks, rows));
}

}  // namespace

bool chunks_fill_the_gpu(const StepShape& shape, const ChunkConfig& chunks) {
  return fewest_rows_per_chunk(shape, chunks) >= std::min(kMinRowsPerChunk, shape.tokens());
}

ChunkProbe probe_chunks(const ModelConfig& config, const StepShape& shape, const GraphOptions& options,
                        const ChunkConfig& chunks) {
  // Two layers: one as every layer but the last, and the last (which may differ: candidates only).
  ModelConfig two_layers = config;
  two_layers.layers = std::min<int64_t>(config.layers, 2);
  // Streamed weights (graph/weight_staging.h): the last layer's stay the last's, any other's
  // become the first's, so that the probe's first layer sees as many staged layers live as the
  // model's layers do (its own and the next one's).
  GraphOptions probe_options = options;
  probe_options.streamed_layers.clear();
  for (const int32_t layer : options.streamed_layers) {
    const int32_t as = layer == config.layers - 1 ? static_cast<int32_t>(two_layers.layers) - 1 : 0;
    if (std::ranges::find(probe_options.streamed_layers, as) == probe_options.streamed_layers.end())
      probe_options.streamed_layers.push_back(as);
  }
  const Graph graph = instantiate_step_graph(two_layers, shape, chunks, probe_options);
  const std::vector<uint64_t> live = live_bytes_per_op(usages_of(graph), graph.op_count());
  ChunkProbe probe;
  for (size_t op = 0; op < live.size(); ++op) {
    const ChunkGroup group = graph.ops[op].group;
    uint64_t& group_peak = probe.group_peak[static_cast<size_t>(group)];
    group_peak = std::max(group_peak, live[op]);
    if (live[op] > probe.peak) probe.peak = live[op], probe.group = group;
  }
  return probe;
}

namespace {

// The search with the structural choices of `structure` (its counts are ignored).
ChunkSearchResult search_with(const ModelConfig& config, const ChunkSearchRequest& request, ChunkConfig structure) {
  ChunkSearchResult result;
  auto probe = [&](const ChunkConfig& chunks) {
    ++result.probes;
    return probe_chunks(config, request.shape, request.options, chunks);
  };
  structure.qkv = structure.attention = structure.ffn = structure.head = 1;
  ChunkConfig floor_config = structure;
  for (int g = 0; g < kChunkGroups; ++g)
    floor_config.count(ChunkGroup(g)) = group_limit(request, ChunkGroup(g));

  uint64_t target = request.activation_budget;  // live-bytes target; lowered if placement overshoots
  ChunkConfig chunks = structure;
  for (;;) {
    const ChunkProbe current = probe(chunks);
    if (current.peak <= target) {
      PlannedStep planned =
          plan_graph(instantiate_step_graph(config, request.shape, chunks, request.options));
      result.chunks = chunks;
      result.planned_peak = planned.memory.planned_peak;
      result.lower_bound = planned.memory.lower_bound;
      const uint64_t mapped = round_up(planned.memory.planned_peak, request.granule);
      if (mapped <= request.activation_budget) {
        result.fits = true;
        result.planned = std::move(planned);
        return result;
      }
      const uint64_t overshoot = mapped - request.activation_budget;
      if (overshoot >= target) break;
      target -= overshoot;
      continue;
    }
    const ChunkGroup group = current.group;
    const int64_t limit = group == ChunkGroup::none ? 1 : group_limit(request, group);
    if (group == ChunkGroup::none || chunks.count(group) >= limit) break;

    // Smallest count of `group` at which the group's own peak fits the target.
    auto fits = [&](int64_t count) {
      ChunkConfig trial = chunks;
      trial.count(group) = count;
      return probe(trial).group_peak[static_cast<size_t>(group)] <= target;
    };
    int64_t low = chunks.count(group), high = std::min(limit, low * 2);
    while (high < limit && !fits(high)) low = high, high = std::min(limit, high * 2);
    if (high == limit && !fits(high)) {
      chunks.count(group) = limit;  // cannot fit; the next round reports the floor
      result.steps.push_back({group, limit, current.peak});
      continue;
    }
    while (high - low > 1) {  // fits(high) holds, fits(low) does not
      const int64_t middle = low + (high - low) / 2;
      (fits(middle) ? high : low) = middle;
    }
    chunks.count(group) = high;
    result.steps.push_back({group, high, current.peak});
  }
  result.chunks = chunks;
  result.floor = probe(floor_config).peak;
  return result;
}

// The search with x where `residual_in_host` says, over both forms of the last layer.
ChunkSearchResult search_placed(const ModelConfig& config, const ChunkSearchRequest& request, bool residual_in_host) {
  ChunkConfig structure;
  structure.residual_in_host = residual_in_host;
  ChunkSearchResult candidates = search_with(config, request, structure);
  // The last layer over candidates only keeps their gathered rows beside x, K and V. When the
  // step needs chunks anyway, the last layer over every row (the same results) may fit with
  // fewer, or be the only way to fit: the fewer chunks win, a tie goes to candidates only.
  if (!request.options.last_layer_candidates_only || (candidates.fits && candidates.chunks.extra_chunks() == 0))
    return candidates;
  structure.last_layer_all_rows = true;
  ChunkSearchResult all_rows = search_with(config, request, structure);
  const int probes = candidates.probes + all_rows.probes;
  const bool all_rows_wins =
      all_rows.fits && (!candidates.fits || all_rows.chunks.extra_chunks() < candidates.chunks.extra_chunks());
  if (all_rows_wins) {
    // The greedy search over candidates only can miss a configuration the other one found: the
    // same counts may fit with candidates only as well.
    ChunkConfig same = all_rows.chunks;
    same.last_layer_all_rows = false;
    PlannedStep planned = plan_graph(instantiate_step_graph(config, request.shape, same, request.options));
    if (round_up(planned.memory.planned_peak, request.granule) <= request.activation_budget) {
      all_rows.chunks = same;
      all_rows.planned_peak = planned.memory.planned_peak;
      all_rows.lower_bound = planned.memory.lower_bound;
      all_rows.planned = std::move(planned);
    }
  }
  // Neither fits: report the lower floor (every row).
  ChunkSearchResult& chosen = all_rows_wins || !candidates.fits ? all_rows : candidates;
  chosen.probes = probes;
  return std::move(chosen);
}

}  // namespace

ChunkSearchResult search_chunks(const ModelConfig& config, const ChunkSearchRequest& request) {
  if (request.residual == ResidualPlacement::host) return search_placed(config, request, true);
  // The residual stream stays on the device wherever the step fits so with chunks of a useful
  // size: nothing to move.
  ChunkSearchResult device = search_placed(config, request, false);
  if (request.residual == ResidualPlacement::device ||
      (device.fits && fewest_rows_per_chunk(request.shape, device.chunks) >= kMinRowsPerChunk))
    return device;
  ChunkSearchResult host = search_placed(config, request, true);
  host.probes += device.probes;
  // Both fit: x's copies hide under compute at such lengths, smaller chunks do not (they leave
  // the GPU idle), so the fewer chunks win; a tie keeps x on the device.
  if (device.fits && (!host.fits || host.chunks.extra_chunks() >= device.chunks.extra_chunks())) {
    device.probes = host.probes;
    return device;
  }
  return host;  // fits, or the lower floor (x's rows off the device)
}

}  // namespace mosaic
