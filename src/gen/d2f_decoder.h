// D2F's pipelined block decoding for one request (docs/design/d2f-decoding.md): blocks of B
// appended from the prompt's end while the one before is still being decoded, several active
// at once, each accepting the tokens whose confidence passes skip_threshold (a fully activated
// block at least its most confident one), attended block-causally, the blocks decoded before a
// forward kept exactly in the block cache. One step is one iteration of the reference's loop.
#pragma once

#include <cstdint>
#include <vector>

#include "gen/request_decoder.h"

namespace mosaic {

class D2fDecoder final : public RequestDecoder {
 public:
  // `options` must have passed validate_generation_options with options.d2f set.
  D2fDecoder(const ModelConfig& config, std::vector<int32_t> prompt, GenerationOptions options);

  bool finished() const override { return finished_; }
  CacheMode cache_mode() const override { return options_.cache; }
  const std::vector<int32_t>& canvas() const override { return canvas_; }
  int64_t prompt_length() const override { return prompt_length_; }
  int64_t generation_end() const override { return static_cast<int64_t>(canvas_.size()); }
  int64_t steps_taken() const override { return step_; }
  int64_t forwards() const override { return forwards_; }
  int64_t masked() const override;
  bool stopped_at_eos() const override { return eos_seen_ || stopped_at_answer_end_; }
  double cfg_scale() const override { return 0; }
  const std::vector<int32_t>& last_committed() const override { return committed_; }
  const std::vector<float>& last_committed_confidence() const override { return committed_confidence_; }
  const std::vector<TokenLogprob>& logprobs() const override { return logprobs_; }

  const DecoderStep& prepare() override;
  const DecoderStep& prepared() const override { return next_; }
  void commit(const float* stats) override;
  // Blocks differ in their rule (fully or semi-activated) within one step: the host chooses.
  std::optional<CommitRule> device_commit_rule() const override { return std::nullopt; }
  void commit_from_device(std::span<const CommittedRow> rows) override;  // never called: no rule

  // The state machine, for tests and reports.
  struct Block {
    int64_t begin = 0, end = 0;
    int64_t masks_left = 0;
    bool active = true;           // the reference's `active`; else to_cache / in_cache
    bool fully_activated = false; // sticky
    double decoded_fraction() const { return double(end - begin - masks_left) / double(end - begin); }
  };
  const std::vector<Block>& blocks() const { return blocks_; }
  int64_t cached_until() const { return cached_until_; }

 private:
  HeadRowSampling sampling_for(int32_t position) const;
  // The end of the longest run of fully decoded blocks from the prompt on.
  int64_t decoded_prefix_end() const;
  // Commits, per active block, the candidates its rule accepts (tokens / confidences per candidate;
  // `stats` their rows, for the log-probabilities).
  void accept(const std::vector<int32_t>& tokens, const std::vector<double>& confidences, const float* stats);
  void end_step();  // the bookkeeping after a forward's tokens are written (steps 7-9)
  void finish();    // the end (natural or by the cap): never-created blocks hold EOS

  const ModelConfig& config_;
  GenerationOptions options_;
  D2fOptions d2f_;
  std::vector<int32_t> canvas_;
  int64_t prompt_length_ = 0, max_blocks_ = 0;
  int32_t mask_ = 0;
  BlockLayout layout_;
  std::vector<Block> blocks_;  // the generation blocks created so far (the prompt is not one)
  bool eos_seen_ = false, stopped_at_answer_end_ = false, finished_ = false;
  int64_t step_ = 0, forwards_ = 0;
  int64_t cached_until_ = 0;          // K/V of [0, cached_until_) are final in the cache
  int64_t decoded_at_forward_ = 0;    // decoded_prefix_end() when the prepared forward was chosen
  DecoderStep next_;
  std::vector<int32_t> committed_;
  std::vector<float> committed_confidence_;
  std::vector<TokenLogprob> logprobs_;
};

}  // namespace mosaic
