// A continuous batch over one Engine: requests join and leave between denoising steps, each with
// its own GenerationOptions; every step() runs one packed forward for all unfinished requests.
// Requests never influence each other's results: a request's tokens are those Engine::generate
// gives it alone, whenever it joins and whoever shares its steps.
//
//   auto session = engine->start_batch();
//   if (session->fit(prompt.size(), options).fits) {
//     const int64_t id = session->add(prompt, options);     // throws mosaic::Error if invalid
//     while (!session->finished(id)) session->step();       // other requests may come and go
//     GenerateResult result = session->remove(id);
//   }
//
// A session is driven by one thread; Engine::fit and the Engine's other const methods may be
// called from any thread meanwhile. Steps of several sessions (and Engine::generate) take turns.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "mosaic/engine.h"

namespace mosaic {

// One step of a session: an event per unfinished request (its `request` field is the id add()
// returned; the spans stay valid until the next call on the session) and the packed forward.
struct BatchStep {
  std::vector<GenerateEvent> events;
  int64_t sequences = 0, tokens = 0, candidates = 0;  // the forward (0 sequences: none was needed)
  int64_t committed = 0;                              // positions unmasked by this step, all requests
  // The step's memory by the plan: planned arena peak, lower bound (most bytes live at once),
  // PAR (peak / average live bytes), and the bytes the arena holds after it.
  uint64_t planned_peak = 0, lower_bound = 0, arena_bytes = 0;
  double par = 0;
  double seconds = 0;
  // The KV cache after the step (docs/design/kv-cache.md): pages held by requests, pages a new
  // request could still take under the budget (-1: no budget), and the bytes it holds.
  int64_t cache_pages_used = 0, cache_pages_free = -1;
  uint64_t cache_bytes = 0;
};

class BatchSession {
 public:
  ~BatchSession();
  BatchSession(const BatchSession&) = delete;
  BatchSession& operator=(const BatchSession&) = delete;

  // Whether the session's unfinished requests plus this one still fit the memory budget at their
  // largest steps, by the plan (as Engine::fit does for a request alone). Throws mosaic::Error
  // for invalid options.
  MemoryFit fit(int64_t prompt_tokens, const GenerationOptions& options) const;

  // Joins at the next step. Throws mosaic::Error for invalid options, an empty prompt or a token
  // id outside the vocabulary (the session is unchanged then). Returns the request's id.
  int64_t add(std::vector<int32_t> prompt_ids, const GenerationOptions& options);
  // The same with an infilling suffix after the generated region (docs/design/infilling.md); fit()
  // such a request with prompt_tokens = prompt + suffix. Throws OptionError ("suffix") where the
  // model or the options cannot infill.
  int64_t add(std::vector<int32_t> prompt_ids, const GenerationOptions& options, std::vector<int32_t> suffix_ids);

  // One denoising step for every unfinished request. A failure of the step (mosaic::Error)
  // propagates and leaves every request where it was: step() again, or remove them.
  BatchStep step();

  bool finished(int64_t id) const;  // id must be in the session
  int64_t unfinished() const;
  int64_t size() const;             // requests in the session, finished or not
  // Takes a request out: its result once finished, or what it decoded so far (cancelled = true).
  GenerateResult remove(int64_t id);

  struct Impl;

 private:
  friend class Engine;
  explicit BatchSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mosaic
