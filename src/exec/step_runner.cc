#include "exec/step_runner.h"

#include "core/error.h"
#include "core/format_bytes.h"

namespace mosaic {

CpuStepRunner::CpuStepRunner(const Model& model, std::optional<uint64_t> activation_budget)
    : model_(model),
      budget_(activation_budget),
      logits_planner_(model.config(), {DType::f32, HeadMode::logits}),
      stats_planner_(model.config(), {DType::f32, HeadMode::stats}),
      executor_(model) {}

ChunkConfig CpuStepRunner::chunks_for(const StepShape& shape, HeadMode head) {
  if (!budget_) return {};
  // One search per bucket: the bucket's shape bounds every step that falls in it.
  const int64_t tokens = bucket_rows(shape.tokens());
  const int64_t candidates = std::min(bucket_rows(shape.total_candidates()), tokens);
  const auto key = std::make_tuple(tokens, candidates, static_cast<int>(head));
  if (const auto found = chunk_cache_.find(key); found != chunk_cache_.end()) return found->second;
  ChunkSearchRequest request;
  request.shape = StepShape{{tokens}, {candidates}};
  request.options = {DType::f32, head};
  request.activation_budget = *budget_;
  request.granule = 64 * 1024;
  const ChunkSearchResult result = search_chunks(model_.config(), request);
  if (!result.fits)
    fail("a step of {} tokens and {} candidate rows needs at least {} of activations; the budget "
         "leaves {}",
         shape.tokens(), shape.total_candidates(), format_bytes(result.floor), format_bytes(*budget_));
  return chunk_cache_.emplace(key, result.chunks).first->second;
}

StepOutput CpuStepRunner::run(const StepInput& input) {
  const PackedBatch packed = pack_batch(model_.config(), input.sequences);
  StepShape shape;
  for (const SequenceRows& sequence : input.sequences) {
    shape.lengths.push_back(static_cast<int64_t>(sequence.ids.size()));
    shape.candidates.push_back(static_cast<int64_t>(sequence.rows.size()));
  }
  const HeadMode head = input.keep_logits ? HeadMode::logits : HeadMode::stats;
  std::lock_guard lock(mutex_);
  StepOutput out;
  out.chunks = chunks_for(shape, head);
  StepPlanner& planner = input.keep_logits ? logits_planner_ : stats_planner_;
  const Graph graph = planner.instantiate(shape, out.chunks);
  const auto planned = planner.plan(graph);
  out.values = executor_.run(graph, *planned, arena_, packed,
                             input.keep_logits ? std::span<const HeadRowSampling>() : input.sampling);
  out.cols = input.keep_logits ? model_.config().vocab : int64_t{kHeadStatCount};
  out.planned_peak = planned->memory.planned_peak;
  out.lower_bound = planned->memory.lower_bound;
  out.arena_bytes = arena_.size();
  return out;
}

}  // namespace mosaic
