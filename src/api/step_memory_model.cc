#include "api/step_memory_model.h"

#include <algorithm>

#include "core/error.h"

namespace mosaic {

StepMemoryModel::StepMemoryModel(const ModelConfig& config, DeviceMemorySetup setup)
    : config_(config), setup_(setup) {}

MemoryFit StepMemoryModel::fit(const StepBound& bound) const {
  MemoryFit fit;
  if (!setup_.budget) return fit;
  fit.budget = *setup_.budget;
  if (setup_.runner.fixed_bytes >= *setup_.budget) {
    fit.fits = false;
    fit.bytes_needed = setup_.runner.fixed_bytes;
    return fit;
  }
  // The runners search chunks for the bucket's single-sequence shape: do exactly the same.
  const int64_t tokens = bucket_rows(std::max<int64_t>(bound.tokens, 1));
  const int64_t candidates = std::min(bucket_rows(std::max<int64_t>(bound.candidates, 1)), tokens);
  const auto key = std::make_tuple(tokens, candidates, bound.logits);
  std::lock_guard lock(mutex_);
  if (const auto found = fits_.find(key); found != fits_.end()) return found->second;
  ChunkSearchRequest request;
  request.shape = StepShape{{tokens}, {candidates}};
  request.options = bound.logits ? setup_.runner.logits_options : setup_.runner.stats_options;
  request.activation_budget = *setup_.budget - setup_.runner.fixed_bytes;
  request.granule = setup_.runner.granule;
  const ChunkSearchResult result = search_chunks(config_, request);
  fit.fits = result.fits;
  const uint64_t activations = result.fits ? (result.planned_peak + setup_.runner.granule - 1) / setup_.runner.granule * setup_.runner.granule
                                           : result.floor;
  fit.bytes_needed = setup_.runner.fixed_bytes + activations;
  return fits_.emplace(key, fit).first->second;
}

double StepMemoryModel::par(int64_t tokens, int64_t candidates, bool logits, const ChunkConfig& chunks) const {
  if (tokens <= 0) return 0;
  const int64_t tokens_bucket = bucket_rows(tokens);
  const int64_t candidates_bucket = std::min(bucket_rows(std::max<int64_t>(candidates, 1)), tokens_bucket);
  const auto key = std::make_tuple(tokens_bucket, candidates_bucket, logits, chunks.qkv, chunks.attention,
                                   chunks.ffn, chunks.head);
  std::lock_guard lock(mutex_);
  if (const auto found = pars_.find(key); found != pars_.end()) return found->second;
  // The plan the runner's planner made: the bucket's single-sequence shape.
  const StepShape bucket{{tokens_bucket}, {candidates_bucket}};
  const GraphOptions& options = logits ? setup_.runner.logits_options : setup_.runner.stats_options;
  const double par = plan_graph(instantiate_step_graph(config_, bucket, chunks, options)).memory.par();
  return pars_.emplace(key, par).first->second;
}

}  // namespace mosaic
