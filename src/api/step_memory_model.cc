#include "api/step_memory_model.h"

#include <algorithm>

#include "core/error.h"

namespace mosaic {

StepMemoryModel::StepMemoryModel(const ModelConfig& config, DeviceMemorySetup setup)
    : config_(config), setup_(setup) {}

MemoryFit StepMemoryModel::fit(const StepBound& bound, int64_t cache_pages) const {
  MemoryFit fit;
  if (!setup_.budget) return fit;
  fit.budget = *setup_.budget;
  // The cache the requests hold beside weights and workspace: what the arena's share must leave.
  const uint64_t fixed = setup_.runner.fixed_bytes + kv_cache_bytes(setup_.runner, config_.layers, cache_pages);
  if (fixed >= *setup_.budget) {
    fit.fits = false;
    fit.bytes_needed = fixed;
    return fit;
  }
  // The runners search chunks for the bucket's single-sequence shape: do exactly the same (a
  // cached step of the bound's rows bounds the full steps of the requests without a cache too).
  const int64_t tokens = bucket_rows(std::max<int64_t>(bound.tokens, 1));
  const int64_t candidates = std::min(bucket_rows(std::max<int64_t>(bound.candidates, 1)), tokens);
  const auto key = std::make_tuple(tokens, candidates, bound.logits, bound.cached, fixed);
  std::lock_guard lock(mutex_);
  if (const auto found = fits_.find(key); found != fits_.end()) return found->second;
  ChunkSearchRequest request;
  request.shape = bucket_shape(tokens, candidates, bound.cached, std::max<int64_t>(setup_.runner.cache_page_rows, 1));
  request.options = bound.logits ? setup_.runner.logits_options : setup_.runner.stats_options;
  request.activation_budget = *setup_.budget - fixed;
  request.granule = setup_.runner.granule;
  request.residual = setup_.runner.residual_may_stream ? ResidualPlacement::fit : ResidualPlacement::device;
  const ChunkSearchResult result = search_chunks(config_, request);
  fit.fits = result.fits;
  const uint64_t activations = result.fits ? (result.planned_peak + setup_.runner.granule - 1) / setup_.runner.granule * setup_.runner.granule
                                           : result.floor;
  fit.bytes_needed = fixed + activations;
  if (fits_.size() > 4096) fits_.clear();  // the cache's size varies: keep the memo bounded
  return fits_.emplace(key, fit).first->second;
}

}  // namespace mosaic
