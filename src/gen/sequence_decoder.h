// One request's denoising state machine: its canvas, where it is in its schedule, which
// positions the next step must predict and how, and what it unmasks once the predictions come
// back (docs/design/sampling.md). It runs no model: the generation loop batches the steps of
// many decoders into one forward.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/commit_rule.h"
#include "core/head_sampling.h"
#include "gen/confidence.h"
#include "gen/generation_options.h"
#include "gen/host_sampler.h"
#include "gen/request_decoder.h"
#include "model/config.h"

namespace mosaic {

class SequenceDecoder final : public RequestDecoder {
 public:
  // `options` must have passed validate_generation_options for `config` (and validate_suffix for
  // a suffix). The canvas is prompt + gen_length masks + suffix: the suffix is context the
  // generated region is decoded between (infilling), never a candidate.
  SequenceDecoder(const ModelConfig& config, std::vector<int32_t> prompt, GenerationOptions options,
                  std::vector<int32_t> suffix = {});

  bool finished() const override { return finished_; }
  CacheMode cache_mode() const override { return options_.cache; }
  const std::vector<int32_t>& canvas() const override { return canvas_; }
  int64_t prompt_length() const override { return prompt_length_; }
  int64_t generation_end() const override { return generation_end_; }  // prompt + gen_length
  int64_t steps_taken() const override { return step_; }
  int64_t forwards() const override { return forwards_; }
  int64_t masked() const override;
  bool stopped_at_eos() const override { return stopped_at_eos_; }
  const std::vector<int32_t>& last_committed() const override { return committed_; }
  // The confidence each of those positions was ranked by (the algorithm's score of its token,
  // before any alg_temp noise), in the same order.
  const std::vector<float>& last_committed_confidence() const override { return committed_confidence_; }
  // With options.logprobs: every committed token's log-probabilities so far, in commit order.
  const std::vector<TokenLogprob>& logprobs() const override { return logprobs_; }

  // What the next step needs. Call once per step, then commit().
  const DecoderStep& prepare() override;
  const DecoderStep& prepared() const override { return next_; }
  double cfg_scale() const override { return options_.cfg_scale; }
  // `stats`: [candidates, kHeadStatCount] from the fused head or the host sampler; null when
  // the step had no candidates.
  void commit(const float* stats) override;

  // The prepared step's choice of positions as a rule a runner can apply on the device, where
  // the statistics are (docs/design/device-commit.md). nullopt where the host must rank: no
  // candidates, the logits path (top-p / top-k, CFG), the factor rule, Dream's alg_temp noise.
  std::optional<CommitRule> device_commit_rule() const override;
  // commit() for a step the runner committed on the device by device_commit_rule(): `rows`
  // [candidates] is each row's outcome. The canvas follows the device's.
  void commit_from_device(std::span<const CommittedRow> rows) override;

 private:
  void prepare_llada();
  void prepare_dream();
  void prepare_dream_block();
  // Dream's rule or schedule over `masked` at step `schedule_step` of timesteps_ (the noise is
  // addressed by the generation's step counter whatever the schedule's).
  void dream_step(const std::vector<int32_t>& masked, int64_t schedule_step);
  void prepare_rows();  // the forward's computed rows, once the candidates are known
  const DecodingBlock& block() const { return blocks_[static_cast<size_t>(block_)]; }
  std::vector<int32_t> masked_in(int64_t begin, int64_t end) const;
  HeadRowSampling sampling_for(int32_t position) const;
  ConfidenceKind confidence_kind() const;
  bool ranks_with_noise() const;
  // Writes the chosen candidates' tokens; reports them in position order.
  void unmask(std::vector<size_t> chosen, std::span<const int32_t> tokens, std::span<const double> confidences);
  void advance();
  void check_eos();
  // The committed token's log-probabilities from its row's statistics.
  bool decoding_by_rule() const { return options_.threshold.has_value() || options_.factor.has_value(); }
  bool dream_blocks() const { return config_.family == Family::dream && decodes_in_blocks(config_, options_); }
  void after_forward();  // the cache's state after a step that ran a forward

  const ModelConfig& config_;
  GenerationOptions options_;
  std::vector<int32_t> canvas_;
  int64_t prompt_length_;
  int64_t generation_end_;
  int32_t mask_;
  int64_t step_ = 0;      // steps taken (the RNG's step address)
  int64_t forwards_ = 0;  // steps that ran a forward
  bool finished_ = false, stopped_at_eos_ = false;
  // Blocks (LLaDA; Dream when it decodes in blocks)
  BlockLayout layout_;
  std::vector<DecodingBlock> blocks_;
  int64_t block_ = 0, step_in_block_ = 0, steps_per_block_ = 0, block_masked_at_start_ = 0;
  // Dream schedule: of the whole canvas, or of one block (block decoding)
  std::vector<float> timesteps_;
  // The KV cache: whether the active block has run a forward yet (prefix / dual refresh at its
  // first), and where the positions not yet computed from final tokens start (block mode).
  bool block_forwarded_ = false;
  int64_t final_until_ = 0;
  // the prepared step
  DecoderStep next_;
  int64_t quota_ = -1;            // positions to unmask this step (-1: every candidate / by rule)
  bool commit_all_ = false;       // every candidate is unmasked, whatever the rule
  std::vector<int32_t> committed_;
  std::vector<float> committed_confidence_;
  std::vector<TokenLogprob> logprobs_;
};

}  // namespace mosaic
