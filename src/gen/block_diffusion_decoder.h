// LLaDA 2.x's block diffusion decoding for one request (docs/design/block-diffusion.md;
// moe-models.md 2.4): the canvas is the prompt then masks up to the end of the block grid from
// position 0; blocks are decoded in order from the one holding the prompt's end, each for at
// most `steps` steps (the reference's steps per block, capped at gen_length), attended
// block-causally with the finished blocks' K/V in the exact block cache. A step commits, of the
// block's masked positions, all whose confidence is above `threshold` if at least k of them are,
// else the k most confident, k following the reference's even split of the block length over the
// steps. After a block, an EOS anywhere in the generated region ends the generation.
//
// With options.editing (LLaDA 2.1) a step predicts every non-prompt position of the block: the
// masked ones are committed by the same rule with k = num_to_transfer, and a placed token whose
// prediction differs with probability above editing_threshold is replaced; the block ends at the
// first step after its masks are gone that edits nothing, or after max_post_steps such steps.
#pragma once

#include <cstdint>
#include <vector>

#include "gen/request_decoder.h"

namespace mosaic {

class BlockDiffusionDecoder final : public RequestDecoder {
 public:
  // `options` must have passed validate_generation_options for an LLaDA 2.x config.
  BlockDiffusionDecoder(const ModelConfig& config, std::vector<int32_t> prompt, GenerationOptions options);

  bool finished() const override { return finished_; }
  CacheMode cache_mode() const override { return options_.cache; }
  // Prompt, then the generated region, then the grid's padding to its last block's end (decoded
  // with it, as the reference does, but not part of the answer).
  const std::vector<int32_t>& canvas() const override { return canvas_; }
  int64_t prompt_length() const override { return prompt_length_; }
  int64_t generation_end() const override { return generation_end_; }
  int64_t steps_taken() const override { return step_; }
  int64_t forwards() const override { return forwards_; }
  int64_t masked() const override;
  bool stopped_at_eos() const override { return stopped_at_eos_; }
  double cfg_scale() const override { return 0; }
  const std::vector<int32_t>& last_committed() const override { return committed_; }
  const std::vector<float>& last_committed_confidence() const override { return committed_confidence_; }
  const std::vector<TokenLogprob>& logprobs() const override { return logprobs_; }

  const DecoderStep& prepare() override;
  const DecoderStep& prepared() const override { return next_; }
  void commit(const float* stats) override;
  std::optional<CommitRule> device_commit_rule() const override;
  void commit_from_device(std::span<const CommittedRow> rows) override;

  // For tests and reports.
  const std::vector<DecodingBlock>& blocks() const { return blocks_; }
  int64_t steps_per_block() const { return steps_per_block_; }

 private:
  const DecodingBlock& block() const { return blocks_[static_cast<size_t>(block_)]; }
  std::vector<int32_t> masked_in(int64_t begin, int64_t end) const;
  HeadRowSampling sampling_for(int32_t position) const;
  // The block's quota at this step: the reference splits the block length (not the block's masks)
  // over the steps, the remainder to the first steps, as LLaDA's schedule splits a block's masks
  // (llada_quota); with editing, num_to_transfer.
  int64_t quota() const;
  // Which of the prepared candidates the step commits (mask to token) and edits (token to token),
  // from each candidate's token and confidence.
  std::vector<size_t> choose(std::span<const int32_t> tokens, std::span<const double> confidences);
  bool block_has_masks() const;
  // Whether the block is over after this step (and counts LLaDA 2.1's post steps).
  bool block_over();
  void after_forward();
  // After a step: to the next block when this one is done or out of steps; the end after the
  // last block or at an EOS in the generated region.
  void advance();

  const ModelConfig& config_;
  GenerationOptions options_;
  std::vector<int32_t> canvas_;
  int64_t prompt_length_ = 0, generation_end_ = 0;
  int32_t mask_ = 0;
  BlockLayout layout_;
  std::vector<DecodingBlock> blocks_;
  int64_t block_ = 0, step_in_block_ = 0, steps_per_block_ = 0;
  // Token editing: whether the prepared step's block had masks, whether it edited, post steps.
  bool masked_at_start_ = true, edited_ = false;
  int64_t post_steps_ = 0;
  int64_t step_ = 0, forwards_ = 0;
  int64_t final_until_ = 0;  // K/V of [0, final_until_) are final in the block cache
  bool finished_ = false, stopped_at_eos_ = false;
  DecoderStep next_;
  std::vector<int32_t> committed_;
  std::vector<float> committed_confidence_;
  std::vector<TokenLogprob> logprobs_;
};

}  // namespace mosaic
