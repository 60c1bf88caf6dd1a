// Step-level batching, one step at a time: requests join (add) and leave (remove) between steps;
// each step() runs one packed forward for every unfinished request and lets each unmask what its
// algorithm chooses. Requests never influence each other's results, so neither when a request
// joins nor which others share its steps changes its tokens. generate() is this loop run until
// every request has finished; the serving scheduler drives it step by step. On a runner that
// commits on the device, each request's canvas stays there and the steps whose rule the device
// can apply are committed there (docs/design/device-commit.md); the results are the same.
//
//   BatchStepper stepper(config, runner);
//   const int64_t id = stepper.add({prompt, options});   // validates; throws mosaic::Error
//   while (!stepper.finished(id)) stepper.step(observe);  // observe(StepEvent) per request
//   GenerationResult result = stepper.result(id);
//   stepper.remove(id);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "exec/step_runner.h"
#include "gen/generation_options.h"
#include "gen/request_decoder.h"

namespace mosaic {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  GenerationOptions options;  // validated (and completed) when added
  std::vector<int32_t> suffix;  // infilling: context after the generated region (validate_suffix)
};

struct StepEvent {
  int64_t request = 0;                     // the id add() returned (generate(): the index)
  int64_t step = 0;                        // steps taken by this request so far
  std::span<const int32_t> canvas;         // prompt + generation region (+ suffix)
  int64_t prompt_length = 0;
  int64_t gen_length = 0;                  // the generation region: canvas[prompt_length, + gen_length)
  std::span<const int32_t> committed;      // positions unmasked by this step
  std::span<const float> confidence;       // the confidence each was ranked by, same order
  int64_t masked_left = 0;
  bool finished = false;
  // The batched forward of this step (shared by all requests in it).
  int64_t batch_sequences = 0, batch_tokens = 0, batch_candidates = 0;
  uint64_t planned_peak = 0;
};

struct GenerationResult {
  std::vector<int32_t> canvas;  // prompt + generated region (mask ids where nothing was decoded) + suffix
  int64_t prompt_length = 0;
  int64_t gen_length = 0;       // the generated region: canvas[prompt_length, prompt_length + gen_length)
  int64_t steps = 0;            // steps taken
  int64_t forwards = 0;         // steps that needed a forward (NFE)
  bool stopped_at_eos = false;
  bool cancelled = false;
  std::vector<int64_t> tokens_per_step;
  CacheMode cache = CacheMode::none;  // the KV cache it decoded with
  std::vector<TokenLogprob> logprobs;  // options.logprobs: the committed tokens', by position
  // Over the forwards it took part in: their wall time (runner calls, from the host's view) and
  // the part of it the host spent before waiting for the device (packing, planning, launches;
  // StepOutput::host_seconds). The host's share of a generation is bounded by
  // (wall - forward_seconds + forward_host_seconds) / wall.
  double forward_seconds = 0, forward_host_seconds = 0;
};

// What one step() ran: the packed forwards' shape (zero sequences when no request needed one)
// and the runner's memory figures for them (a step runs the requests without a KV cache and
// those with one in two forwards: the figures are those of the one with the larger peak).
struct BatchStepSummary {
  int64_t requests = 0;            // unfinished requests that took the step
  int64_t sequences = 0, tokens = 0, candidates = 0;
  int64_t committed = 0;           // positions unmasked, over all requests
  bool kept_logits = false;
  ChunkConfig chunks;
  // Of the forward with the larger planned peak; a cached step's include its sequences' KV cache.
  uint64_t planned_peak = 0, lower_bound = 0, average_live = 0, arena_bytes = 0;
};

// Called once per unfinished request after its step, in id order. The spans are valid during
// the call only.
using StepObserver = std::function<void(const StepEvent&)>;

class BatchStepper {
 public:
  BatchStepper(const ModelConfig& config, StepRunner& runner);
  ~BatchStepper();

  // Validates the options (completing the model-dependent ones) and the prompt's ids; throws
  // mosaic::Error naming what is wrong. Returns the request's id: 0, 1, 2, ... in order.
  int64_t add(GenerationRequest request);

  // One denoising step for every unfinished request. A runner failure (mosaic::Error, e.g. a
  // step that no chunking fits) propagates and leaves every request where it was: step() may be
  // called again, or the requests removed.
  BatchStepSummary step(const StepObserver& observe = {});

  bool contains(int64_t id) const { return members_.count(id) != 0; }
  bool finished(int64_t id) const;
  int64_t unfinished() const;
  int64_t size() const { return static_cast<int64_t>(members_.size()); }
  // The request's state so far (its result once finished). `cancelled` is left false.
  GenerationResult result(int64_t id) const;
  const RequestDecoder& decoder(int64_t id) const;
  void remove(int64_t id);

 private:
  struct Member {
    std::unique_ptr<RequestDecoder> decoder;
    std::vector<int64_t> tokens_per_step;
    double forward_seconds = 0, forward_host_seconds = 0;
    uint64_t canvas_id = 0;  // its canvas on the runner (SequenceRows::canvas_id)
    // Its KV caches on the runner (SequenceRows::cache_id; 0: none): the canvas's, and under CFG
    // the unconditional canvas's. Held from add() until the request finishes or leaves.
    uint64_t cache_id = 0, unconditional_cache_id = 0;
  };
  const Member& member(int64_t id) const;
  void release(Member& member);  // its canvas and caches on the runner

  const ModelConfig& config_;
  StepRunner& runner_;
  std::map<int64_t, Member> members_;  // by id: the batch's order
  int64_t next_id_ = 0;
};

}  // namespace mosaic
