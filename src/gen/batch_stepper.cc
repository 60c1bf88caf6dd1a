#include "gen/batch_stepper.h"

#include <algorithm>
#include <atomic>
#include <set>

#include "core/error.h"

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
  for (const auto& [id, m] : members_) runner_.release_canvas(m.canvas_id);
}

int64_t BatchStepper::add(GenerationRequest request) {
  validate_generation_options(config_, request.options);
  for (const int32_t id : request.prompt)
    if (id < 0 || id >= config_.vocab)
      fail("prompt token id {} is outside the vocabulary [0, {})", id, config_.vocab);
  Member member;
  member.decoder = std::make_unique<SequenceDecoder>(config_, std::move(request.prompt), std::move(request.options));
  member.canvas_id = next_canvas_id();
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

const SequenceDecoder& BatchStepper::decoder(int64_t id) const { return *member(id).decoder; }

int64_t BatchStepper::unfinished() const {
  return std::count_if(members_.begin(), members_.end(),
                       [](const auto& entry) { return !entry.second.decoder->finished(); });
}

void BatchStepper::remove(int64_t id) {
  const auto found = members_.find(id);
  MOSAIC_ASSERT(found != members_.end(), "request {} is not in the batch", id);
  runner_.release_canvas(found->second.canvas_id);
  members_.erase(found);
}

GenerationResult BatchStepper::result(int64_t id) const {
  const Member& m = member(id);
  const SequenceDecoder& d = *m.decoder;
  GenerationResult result;
  result.canvas = d.canvas();
  result.prompt_length = d.prompt_length();
  result.steps = d.steps_taken();
  result.forwards = d.forwards();
  result.stopped_at_eos = d.stopped_at_eos();
  result.tokens_per_step = m.tokens_per_step;
  return result;
}

BatchStepSummary BatchStepper::step(const StepObserver& observe) {
  // Each unfinished request's next step; those with candidates join the forward.
  StepInput input;
  std::vector<std::pair<int64_t, Member*>> stepping;  // every unfinished request, in id order
  std::vector<const Member*> members;                  // those in the forward
  for (auto& [id, m] : members_) {
    if (m.decoder->finished()) continue;
    stepping.emplace_back(id, &m);
    const DecoderStep& step = m.decoder->prepare();
    if (step.candidates.empty()) continue;
    members.push_back(&m);
    input.keep_logits = input.keep_logits || step.needs_logits;
  }
  BatchStepSummary summary;
  summary.requests = static_cast<int64_t>(stepping.size());
  if (stepping.empty()) return summary;

  // One packed forward. CFG requests add their unconditional canvas right after themselves.
  // Where the runner can, the requests whose step has a device rule are committed there.
  const bool device_commit = runner_.commits_on_device() && !input.keep_logits;
  std::set<const Member*> committed_on_device;
  std::vector<std::vector<int32_t>> canvases;  // owners of the spans below
  canvases.reserve(members.size() * 2);
  for (const Member* m : members) {
    const SequenceDecoder& d = *m->decoder;
    const DecoderStep& step = d.prepared();
    canvases.push_back(d.canvas());
    input.sequences.push_back({canvases.back(), step.candidates, m->canvas_id});
    input.device_commit.push_back(device_commit ? d.device_commit_rule() : std::nullopt);
    if (input.device_commit.back()) committed_on_device.insert(m);
    input.sampling.insert(input.sampling.end(), step.sampling.begin(), step.sampling.end());
    if (!step.unconditional_canvas.empty()) {
      canvases.push_back(step.unconditional_canvas);
      input.sequences.push_back({canvases.back(), step.candidates});
      input.sampling.insert(input.sampling.end(), step.sampling.begin(), step.sampling.end());
      input.device_commit.push_back(std::nullopt);
    }
  }
  StepOutput output;
  if (!members.empty()) output = runner_.run(input);
  summary.sequences = static_cast<int64_t>(input.sequences.size());
  for (const SequenceRows& s : input.sequences) {
    summary.tokens += static_cast<int64_t>(s.ids.size());
    summary.candidates += static_cast<int64_t>(s.rows.size());
  }
  summary.kept_logits = input.keep_logits;
  summary.chunks = output.chunks;
  summary.planned_peak = output.planned_peak;
  summary.lower_bound = output.lower_bound;
  summary.arena_bytes = output.arena_bytes;

  // Hand each request its rows (host-sampled when the logits were kept).
  int64_t row = 0;
  std::vector<float> stats;
  for (const auto& [id, m] : stepping) {
    SequenceDecoder& d = *m->decoder;
    const DecoderStep& step = d.prepared();
    const int64_t n = static_cast<int64_t>(step.candidates.size());
    if (n == 0) {
      d.commit(nullptr);
    } else if (committed_on_device.contains(m)) {
      d.commit_from_device(std::span<const CommittedRow>(output.committed).subspan(static_cast<size_t>(row),
                                                                                  static_cast<size_t>(n)));
      row += n;
    } else {
      stats.assign(static_cast<size_t>(n * kHeadStatCount), 0.0f);
      const bool cfg = !step.unconditional_canvas.empty();
      if (input.keep_logits) {
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
      row += cfg ? 2 * n : n;
      d.commit(stats.data());
    }
    if (d.finished()) runner_.release_canvas(m->canvas_id);
    m->tokens_per_step.push_back(static_cast<int64_t>(d.last_committed().size()));
    summary.committed += static_cast<int64_t>(d.last_committed().size());
    if (observe) {
      StepEvent event;
      event.request = id;
      event.step = d.steps_taken();
      event.canvas = d.canvas();
      event.prompt_length = d.prompt_length();
      event.committed = d.last_committed();
      event.confidence = d.last_committed_confidence();
      event.masked_left = d.masked();
      event.finished = d.finished();
      event.batch_sequences = summary.sequences;
      event.batch_tokens = summary.tokens;
      event.batch_candidates = summary.candidates;
      event.planned_peak = output.planned_peak;
      observe(event);
    }
  }
  return summary;
}

}  // namespace mosaic
