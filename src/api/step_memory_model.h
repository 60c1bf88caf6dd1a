// The engine's memory by the plan, for admission and reporting: whether a step of a given bound
// fits the budget (the same bucketed chunk search the step runners do, so "fits" here means the
// runner will not refuse the step), and the PAR of a step as planned. Thread-safe; results are
// cached per shape bucket.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "chunk/chunk_search.h"
#include "exec/step_runner.h"
#include "gen/step_bound.h"
#include "mosaic/engine.h"
#include "plan/step_planner.h"

namespace mosaic {

// What the backend plans a step with (its runner's StepMemorySetup) and the engine's budget.
struct DeviceMemorySetup {
  StepMemorySetup runner;
  std::optional<uint64_t> budget;  // all bytes the engine may use; unset: no limit
};

class StepMemoryModel {
 public:
  StepMemoryModel(const ModelConfig& config, DeviceMemorySetup setup);

  // Whether a step no larger than `bound` fits, beside a KV cache of `cache_pages` pages (the
  // pages the cache maps once the bound's requests hold theirs; by default the bound's own).
  // bytes_needed: fixed bytes + the cache + the planned arena (when it fits) or + the floor with
  // every op chunked as far as it goes (when it does not).
  MemoryFit fit(const StepBound& bound) const { return fit(bound, bound.cache_pages); }
  MemoryFit fit(const StepBound& bound, int64_t cache_pages) const;

  int64_t cache_page_rows() const { return setup_.runner.cache_page_rows; }

  // Peak / average live bytes of the plan the runner used for a step of this shape and chunking.
  double par(int64_t tokens, int64_t candidates, bool logits, const ChunkConfig& chunks) const;

 private:
  const ModelConfig& config_;
  DeviceMemorySetup setup_;
  mutable std::mutex mutex_;
  mutable std::map<std::tuple<int64_t, int64_t, bool, bool, uint64_t>, MemoryFit> fits_;
  mutable std::map<std::tuple<int64_t, int64_t, bool, int64_t, int64_t, int64_t, int64_t>, double> pars_;
};

}  // namespace mosaic
