#include "gen/generator.h"

#include <memory>

#include "core/error.h"

namespace mosaic {

std::vector<GenerationResult> generate(const ModelConfig& config, StepRunner& runner,
                                       std::vector<GenerationRequest> requests,
                                       const StepCallback& on_step) {
  std::vector<std::unique_ptr<SequenceDecoder>> decoders;
  for (GenerationRequest& request : requests) {
    validate_generation_options(config, request.options);
    for (const int32_t id : request.prompt)
      if (id < 0 || id >= config.vocab)
        fail("prompt token id {} is outside the vocabulary [0, {})", id, config.vocab);
    decoders.push_back(std::make_unique<SequenceDecoder>(config, request.prompt, request.options));
  }
  std::vector<GenerationResult> results(requests.size());
  bool cancelled = false;

  while (!cancelled) {
    // Each unfinished request's next step; those with candidates join the batch.
    StepInput input;
    std::vector<size_t> members;  // decoder index per batched request
    for (size_t r = 0; r < decoders.size(); ++r) {
      if (decoders[r]->finished()) continue;
      const DecoderStep& step = decoders[r]->prepare();
      if (step.candidates.empty()) continue;
      members.push_back(r);
      input.keep_logits = input.keep_logits || step.needs_logits;
    }
    bool any_active = false;
    for (const auto& decoder : decoders) any_active = any_active || !decoder->finished();
    if (!any_active) break;

    // One packed forward. CFG requests add their unconditional canvas right after themselves.
    std::vector<std::vector<int32_t>> canvases;  // owners of the spans below
    canvases.reserve(members.size() * 2);
    for (const size_t r : members) {
      const SequenceDecoder& d = *decoders[r];
      const DecoderStep& step = d.prepared();
      canvases.push_back(d.canvas());
      input.sequences.push_back({canvases.back(), step.candidates});
      input.sampling.insert(input.sampling.end(), step.sampling.begin(), step.sampling.end());
      if (!step.unconditional_canvas.empty()) {
        canvases.push_back(step.unconditional_canvas);
        input.sequences.push_back({canvases.back(), step.candidates});
        input.sampling.insert(input.sampling.end(), step.sampling.begin(), step.sampling.end());
      }
    }
    StepOutput output;
    if (!members.empty()) output = runner.run(input);

    // Hand each request its rows (host-sampled when the logits were kept).
    int64_t row = 0;
    std::vector<float> stats;
    for (size_t r = 0; r < decoders.size(); ++r) {
      SequenceDecoder& d = *decoders[r];
      if (d.finished()) continue;
      const DecoderStep& step = d.prepared();
      const int64_t n = static_cast<int64_t>(step.candidates.size());
      if (n == 0) {
        d.commit(nullptr);
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
      GenerationResult& result = results[r];
      result.tokens_per_step.push_back(static_cast<int64_t>(d.last_committed().size()));
      if (on_step) {
        StepEvent event;
        event.request = static_cast<int64_t>(r);
        event.step = d.steps_taken();
        event.canvas = d.canvas();
        event.prompt_length = d.prompt_length();
        event.committed = d.last_committed();
        event.masked_left = d.masked();
        event.finished = d.finished();
        event.batch_sequences = static_cast<int64_t>(input.sequences.size());
        for (const SequenceRows& s : input.sequences) {
          event.batch_tokens += static_cast<int64_t>(s.ids.size());
          event.batch_candidates += static_cast<int64_t>(s.rows.size());
        }
        event.planned_peak = output.planned_peak;
        if (!on_step(event)) cancelled = true;
      }
    }
  }
  for (size_t r = 0; r < decoders.size(); ++r) {
    const SequenceDecoder& d = *decoders[r];
    GenerationResult& result = results[r];
    result.canvas = d.canvas();
    result.prompt_length = d.prompt_length();
    result.steps = d.steps_taken();
    result.forwards = d.forwards();
    result.stopped_at_eos = d.stopped_at_eos();
    result.cancelled = cancelled && !d.finished();
  }
  return results;
}

}  // namespace mosaic
