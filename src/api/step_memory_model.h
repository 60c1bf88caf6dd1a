// The engine's memory by the plan, for admission: whether a step of a given bound fits the budget
// (the same bucketed chunk search the step runners do, so "fits" here means the runner will not
// refuse the step). Thread-safe; results are cached per shape bucket.
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


 private:
  const ModelConfig& config_;
  DeviceMemorySetup setup_;
  mutable std::mutex mutex_;
  mutable std::map<std::tuple<int64_t, int64_t, bool, bool, uint64_t>, MemoryFit> fits_;
};

}  // namespace mosaic
