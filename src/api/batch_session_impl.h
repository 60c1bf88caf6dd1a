// What a BatchSession holds of its Engine (internal to the api module: Engine::start_batch
// builds it from the engine's own pieces).
#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "api/step_memory_model.h"
#include "exec/step_runner.h"
#include "gen/batch_stepper.h"
#include "gen/step_bound.h"
#include "mosaic/batch_session.h"

namespace mosaic {

struct BatchSession::Impl {
  Impl(const Engine& engine, const ModelConfig& config, StepRunner& runner, std::mutex& engine_mutex,
       const StepMemoryModel& memory)
      : engine(engine), config(config), engine_mutex(engine_mutex), memory(memory), runner(runner),
        stepper(config, runner) {}

  struct Request {
    GenerationOptions options;            // resolved
    StepBound bound;                      // its largest step
    std::vector<int32_t> committed;       // offsets in the generated region unmasked by the last step
  };

  const Engine& engine;
  const ModelConfig& config;
  std::mutex& engine_mutex;               // steps take turns with Engine::generate and forward
  const StepMemoryModel& memory;
  StepRunner& runner;
  BatchStepper stepper;
  std::map<int64_t, Request> requests;    // by id
};

}  // namespace mosaic
