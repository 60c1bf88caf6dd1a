// The backend a model's steps run on, as EngineOptions choose it: the GPU for "auto" when Mosaic
// was built with CUDA and a device is visible, else the CPU; "cuda" without a device is an error.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "exec/step_runner.h"
#include "model/model_weights.h"
#include "mosaic/engine.h"

namespace mosaic {

struct BackendChoice {
  std::unique_ptr<StepRunner> runner;
  std::string device;  // "cpu" | "cuda"
  StepMemorySetup memory;  // what the runner plans with (admission, PAR)
  // The budget in force: the user's, or without one the machine's memory (CPU: RAM or the cgroup
  // limit; CUDA: the device memory free when the engine opens), so that a step larger than the
  // machine is chunked or refused by the plan, never killed for memory or failing to map.
  std::optional<uint64_t> budget;
  // Weight bytes the backend holds in its memory, and of the streamed layers in pinned host memory.
  uint64_t weight_bytes = 0, streamed_weight_bytes = 0;
  int64_t streamed_layers = 0;  // EngineOptions::streamed_layers resolved (auto: as chosen)
};

// Throws mosaic::Error for an unknown device, "cuda" with no usable GPU, or a budget the weights
// (and workspaces) alone exceed.
BackendChoice make_step_runner(const Model& model, const EngineOptions& options);

}  // namespace mosaic
