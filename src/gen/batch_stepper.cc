#include "gen/batch_stepper.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>

#include "core/error.h"
#include "exec/finite_predictions.h"

namespace mosaic {
namespace {

// Canvas ids are unique in the process: steppers that share a runner never collide.
uint64_t next_canvas_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

}  // namespace

BatchStepper::BatchStepper(const ModelConfig& config, StepRunner& runner) : config_(config), runner_(runner) {}

BatchStepper::~BatchStepper() {
  for (auto& [id, m] : members_) release(m);
}

void BatchStepper::release(Member& m) {
  runner_.release_canvas(m.canvas_id);
  for (uint64_t* cache : {&m.cache_id, &m.unconditional_cache_id}) {
    if (*cache != 0) runner_.release_cache(*cache);
    *cache = 0;
  }
}

int64_t BatchStepper::add(GenerationRequest request) {
  validate_generation_options(config_, request.options);
  validate_for_prompt(config_, static_cast<int64_t>(request.prompt.size()), request.options);
  validate_suffix(config_, request.options, static_cast<int64_t>(request.suffix.size()));
  for (const int32_t id : request.prompt)
    if (id < 0 || id >= config_.vocab)
      fail("prompt token id {} is outside the vocabulary [0, {})", id, config_.vocab);
  for (const int32_t id : request.suffix)
    if (id < 0 || id >= config_.vocab)
      throw OptionError("suffix", fmt::format("suffix token id {} is outside the vocabulary [0, {})", id, config_.vocab));
  Member member;
  member.decoder = make_request_decoder(config_, std::move(request.prompt), std::move(request.options),
                                        std::move(request.suffix));
  member.canvas_id = next_canvas_id();
  if (member.decoder->uses_cache()) {  // its pages to its end, now: no step can run out of them
    const int64_t positions = static_cast<int64_t>(member.decoder->canvas().size());
    member.cache_id = runner_.reserve_cache(positions);
    if (member.decoder->cfg_scale() > 0) {
      try {
        member.unconditional_cache_id = runner_.reserve_cache(positions);
      } catch (...) {
        runner_.release_cache(member.cache_id);
        throw;
      }
    }
  }
  const int64_t id = next_id_++;
  members_.emplace(id, std::move(member));
  return id;
}

const BatchStepper::Member& BatchStepper::member(int64_t id) const {
  const auto found = members_.find(id);
  MOSAIC_ASSERT(found != members_.end(), "request {} is not in the batch", id);
  return found->second;
}

bool BatchStepper::finished(int64_t id) const { return member(id).decoder->finished(); }

const RequestDecoder& BatchStepper::decoder(int64_t id) const { return *member(id).decoder; }

int64_t BatchStepper::unfinished() const {
  return std::count_if(members_.begin(), members_.end(),
                       [](const auto& entry) { return !entry.second.decoder->finished(); });
}

void BatchStepper::remove(int64_t id) {
  const auto found = members_.find(id);
  MOSAIC_ASSERT(found != members_.end(), "request {} is not in the batch", id);
  release(found->second);
  members_.erase(found);
}

GenerationResult BatchStepper::result(int64_t id) const {
  const Member& m = member(id);
  const RequestDecoder& d = *m.decoder;
  GenerationResult result;
  result.canvas = d.canvas();
  result.prompt_length = d.prompt_length();
  result.gen_length = d.generation_end() - d.prompt_length();
  result.steps = d.steps_taken();
  result.forwards = d.forwards();
  result.stopped_at_eos = d.stopped_at_eos();
  result.tokens_per_step = m.tokens_per_step;
  result.forward_seconds = m.forward_seconds, result.forward_host_seconds = m.forward_host_seconds;
  result.cache = d.cache_mode();
  result.logprobs = d.logprobs();
  std::sort(result.logprobs.begin(), result.logprobs.end(),
            [](const TokenLogprob& a, const TokenLogprob& b) { return a.position < b.position; });
  return result;
}

BatchStepSummary BatchStepper::step(const StepObserver& observe) {
  // Each unfinished request's next step; those with candidates join a forward: the full step, or
  // the cached step for requests that decode with a KV cache (a step is one form for all).
  struct Forward {
    StepInput input;
    std::vector<Member*> members;
    std::vector<std::vector<int32_t>> canvases;  // owners of the input's spans
    StepOutput output;
  };
  Forward forwards[2];  // [0] full, [1] cached
  std::vector<std::pair<int64_t, Member*>> stepping;  // every unfinished request, in id order
  for (auto& [id, m] : members_) {
    if (m.decoder->finished()) continue;
    stepping.emplace_back(id, &m);
    const DecoderStep& step = m.decoder->prepare();
    if (step.candidates.empty()) continue;
    Forward& forward = forwards[step.cached ? 1 : 0];
    forward.members.push_back(&m);
    forward.input.keep_logits = forward.input.keep_logits || step.needs_logits;
  }
  BatchStepSummary summary;
  summary.requests = static_cast<int64_t>(stepping.size());
  if (stepping.empty()) return summary;

  // The packed forwards. CFG requests add their unconditional canvas right after themselves.
  // Where the runner can, the requests whose step has a device rule are committed there.
  std::set<const Member*> committed_on_device;
  std::map<const Member*, std::pair<int, int64_t>> rows_of;  // forward and first row of each member
  for (int f = 0; f < 2; ++f) {
    Forward& forward = forwards[f];
    if (forward.members.empty()) continue;
    StepInput& input = forward.input;
    const bool device_commit = runner_.commits_on_device() && !input.keep_logits;
    forward.canvases.reserve(forward.members.size() * 2);
    int64_t row = 0;
    auto add_sequence = [&](std::span<const int32_t> canvas, const DecoderStep& step, uint64_t canvas_id,
                            uint64_t cache_id) {
      forward.canvases.emplace_back(canvas.begin(), canvas.end());
      SequenceRows rows{forward.canvases.back(), step.candidates, canvas_id};
      rows.layout = step.layout;
      if (step.cached) rows.cache_id = cache_id, rows.begin = step.begin, rows.end = step.end;
      input.sequences.push_back(rows);
      input.sampling.insert(input.sampling.end(), step.sampling.begin(), step.sampling.end());
      row += static_cast<int64_t>(step.candidates.size());
    };
    for (const Member* m : forward.members) {
      const RequestDecoder& d = *m->decoder;
      const DecoderStep& step = d.prepared();
      rows_of[m] = {f, row};
      add_sequence(d.canvas(), step, m->canvas_id, m->cache_id);
      input.device_commit.push_back(device_commit ? d.device_commit_rule() : std::nullopt);
      if (input.device_commit.back()) committed_on_device.insert(m);
      if (!step.unconditional_canvas.empty()) {
        add_sequence(step.unconditional_canvas, step, 0, m->unconditional_cache_id);
        input.device_commit.push_back(std::nullopt);
      }
    }
    const auto forward_start = std::chrono::steady_clock::now();
    forward.output = runner_.run(input);
    const double forward_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count();
    for (Member* m : forward.members) {
      m->forward_seconds += forward_seconds;
      m->forward_host_seconds += forward.output.host_seconds;
    }
    check_predictions_finite(input, forward.output, config_.vocab);  // a NaN is an error, never a token
    for (const SequenceRows& s : input.sequences) {
      summary.tokens += s.computed_rows();
      summary.candidates += static_cast<int64_t>(s.rows.size());
    }
    summary.sequences += static_cast<int64_t>(input.sequences.size());
    summary.kept_logits = summary.kept_logits || input.keep_logits;
    const StepOutput& out = forward.output;
    if (out.planned_peak >= summary.planned_peak) {
      summary.chunks = out.chunks;
      summary.planned_peak = out.planned_peak, summary.lower_bound = out.lower_bound;
      summary.average_live = out.average_live;
    }
    summary.arena_bytes = std::max(summary.arena_bytes, out.arena_bytes);
  }

  // Hand each request its rows (host-sampled when the logits were kept).
  std::vector<float> stats;
  for (const auto& [id, m] : stepping) {
    RequestDecoder& d = *m->decoder;
    const DecoderStep& step = d.prepared();
    const int64_t n = static_cast<int64_t>(step.candidates.size());
    if (n == 0) {
      d.commit(nullptr);
    } else {
      const auto [f, row] = rows_of.at(m);
      const StepOutput& output = forwards[f].output;
      if (committed_on_device.contains(m)) {
        d.commit_from_device(std::span<const CommittedRow>(output.committed).subspan(static_cast<size_t>(row),
                                                                                    static_cast<size_t>(n)));
      } else {
        stats.assign(static_cast<size_t>(n * kHeadStatCount), 0.0f);
        const bool cfg = !step.unconditional_canvas.empty();
        if (forwards[f].input.keep_logits) {
          const int64_t vocab = output.cols;
          std::vector<float> combined(static_cast<size_t>(vocab));
          for (int64_t i = 0; i < n; ++i) {
            const float* cond = output.values.data() + (row + i) * vocab;
            std::span<const float> logits(cond, static_cast<size_t>(vocab));
            if (cfg) {  // un + (scale + 1) (cond - un), as the reference combines them
              const float* un = output.values.data() + (row + n + i) * vocab;
              const double scale = d.cfg_scale();
              for (int64_t v = 0; v < vocab; ++v)
                combined[v] = static_cast<float>(un[v] + (scale + 1.0) * (double(cond[v]) - un[v]));
              logits = combined;
            }
            sample_logits_row(logits, step.sampling[i], step.filter, stats.data() + i * kHeadStatCount);
          }
        } else {
          std::copy(output.values.begin() + row * kHeadStatCount,
                    output.values.begin() + (row + n) * kHeadStatCount, stats.begin());
        }
        d.commit(stats.data());
      }
    }
    if (d.finished()) release(*m);
    m->tokens_per_step.push_back(static_cast<int64_t>(d.last_committed().size()));
    summary.committed += static_cast<int64_t>(d.last_committed().size());
    if (observe) {
      StepEvent event;
      event.request = id;
      event.step = d.steps_taken();
      event.canvas = d.canvas();
      event.prompt_length = d.prompt_length();
      event.gen_length = d.generation_end() - d.prompt_length();
      event.committed = d.last_committed();
      event.confidence = d.last_committed_confidence();
      event.masked_left = d.masked();
      event.finished = d.finished();
      event.batch_sequences = summary.sequences;
      event.batch_tokens = summary.tokens;
      event.batch_candidates = summary.candidates;
      event.planned_peak = summary.planned_peak;
      observe(event);
    }
  }
  return summary;
}

}  // namespace mosaic
