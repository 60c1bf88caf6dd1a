#include "mosaic/batch_session.h"

#include <chrono>

#include "api/batch_session_impl.h"
#include "core/error.h"
#include "gen/generation_options.h"

namespace mosaic {

BatchSession::BatchSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BatchSession::~BatchSession() = default;

MemoryFit BatchSession::fit(int64_t prompt_tokens, const GenerationOptions& options) const {
  const GenerationOptions resolved = impl_->engine.resolve_options(options);
  validate_for_prompt(impl_->config, prompt_tokens, resolved);
  const StepBound own = step_bound(impl_->config, prompt_tokens, resolved, impl_->memory.cache_page_rows());
  StepBound bound = own;
  for (const auto& [id, request] : impl_->requests)
    if (!impl_->stepper.finished(id)) bound += request.bound;
  // The cache as it will be mapped: the pages held now (finished requests have given theirs
  // back), the newcomer's taken from the free ones below the top first.
  return impl_->memory.fit(bound, impl_->runner.cache_stats().pages_mapped_after(own.cache_pages));
}

int64_t BatchSession::add(std::vector<int32_t> prompt_ids, const GenerationOptions& options) {
  return add(std::move(prompt_ids), options, {});
}

int64_t BatchSession::add(std::vector<int32_t> prompt_ids, const GenerationOptions& options,
                          std::vector<int32_t> suffix_ids) {
  if (prompt_ids.empty()) fail("the prompt is empty");
  Impl::Request request;
  request.options = impl_->engine.resolve_options(options);
  // The suffix's positions are computed like the prompt's: the bound of a longer prompt.
  request.bound = step_bound(impl_->config, static_cast<int64_t>(prompt_ids.size() + suffix_ids.size()),
                             request.options, impl_->memory.cache_page_rows());
  const int64_t id = impl_->stepper.add({std::move(prompt_ids), request.options, std::move(suffix_ids)});
  impl_->requests.emplace(id, std::move(request));
  return id;
}

BatchStep BatchSession::step() {
  BatchStep out;
  const auto start = std::chrono::steady_clock::now();
  std::vector<StepEvent> events;
  BatchStepSummary summary;
  {
    std::lock_guard lock(impl_->engine_mutex);
    summary = impl_->stepper.step([&](const StepEvent& event) {
      Impl::Request& request = impl_->requests.at(event.request);
      request.committed.clear();
      for (const int32_t p : event.committed)
        request.committed.push_back(static_cast<int32_t>(p - event.prompt_length));
      events.push_back(event);  // its spans stay valid until the stepper's next call
    });
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const StepEvent& event : events) {
    GenerateEvent e;
    e.request = event.request, e.step = event.step, e.masked_left = event.masked_left;
    e.finished = event.finished;
    e.output_ids = event.canvas.subspan(static_cast<size_t>(event.prompt_length), static_cast<size_t>(event.gen_length));
    e.committed = impl_->requests.at(event.request).committed;
    e.batch_sequences = event.batch_sequences, e.batch_tokens = event.batch_tokens;
    e.batch_candidates = event.batch_candidates, e.planned_peak = event.planned_peak;
    out.events.push_back(e);
  }
  out.sequences = summary.sequences, out.tokens = summary.tokens, out.candidates = summary.candidates;
  out.committed = summary.committed;
  out.planned_peak = summary.planned_peak, out.lower_bound = summary.lower_bound;
  out.arena_bytes = summary.arena_bytes;
  if (summary.average_live > 0) out.par = static_cast<double>(summary.planned_peak) / static_cast<double>(summary.average_live);
  const KvCacheStats cache = impl_->runner.cache_stats();
  out.cache_pages_used = cache.pages_used, out.cache_pages_free = cache.pages_free, out.cache_bytes = cache.bytes;
  return out;
}

bool BatchSession::finished(int64_t id) const {
  if (!impl_->stepper.contains(id)) fail("request {} is not in the session", id);
  return impl_->stepper.finished(id);
}

int64_t BatchSession::unfinished() const { return impl_->stepper.unfinished(); }

int64_t BatchSession::size() const { return impl_->stepper.size(); }

GenerateResult BatchSession::remove(int64_t id) {
  if (!impl_->stepper.contains(id)) fail("request {} is not in the session", id);
  const GenerationResult g = impl_->stepper.result(id);
  const bool finished = impl_->stepper.finished(id);
  const GenerationOptions options = impl_->requests.at(id).options;
  impl_->stepper.remove(id);
  impl_->requests.erase(id);
  GenerateResult out;
  out.prompt_ids.assign(g.canvas.begin(), g.canvas.begin() + g.prompt_length);
  out.output_ids.assign(g.canvas.begin() + g.prompt_length, g.canvas.begin() + g.prompt_length + g.gen_length);
  out.logprobs = g.logprobs;
  out.steps = g.steps, out.forwards = g.forwards, out.stopped_at_eos = g.stopped_at_eos;
  out.cancelled = !finished;
  out.tokens_per_step = g.tokens_per_step;
  out.forward_seconds = g.forward_seconds, out.forward_host_seconds = g.forward_host_seconds;
  out.cache = std::string(cache_mode_name(g.cache));
  out.text = impl_->engine.decode(impl_->engine.answer_ids(out.output_ids, options));
  return out;
}

}  // namespace mosaic
