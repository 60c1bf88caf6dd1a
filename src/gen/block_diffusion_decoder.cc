#include "gen/block_diffusion_decoder.h"

#include <algorithm>

#include "core/error.h"
#include "gen/confidence.h"
#include "gen/dream_schedule.h"
#include "gen/position_select.h"

namespace mosaic {

BlockDiffusionDecoder::BlockDiffusionDecoder(const ModelConfig& config, std::vector<int32_t> prompt,
                                             GenerationOptions options)
    : config_(config), options_(std::move(options)), canvas_(std::move(prompt)) {
  MOSAIC_ASSERT(config.block_attention == BlockAttention::absolute && options_.threshold && options_.block_length > 0,
                "block diffusion needs an absolute block grid, a block length and a threshold");
  prompt_length_ = static_cast<int64_t>(canvas_.size());
  generation_end_ = prompt_length_ + options_.gen_length;
  const int64_t B = options_.block_length;
  const int64_t grid_end = (generation_end_ + B - 1) / B * B;
  mask_ = static_cast<int32_t>(config.mask_token_id);
  canvas_.resize(static_cast<size_t>(grid_end), mask_);
  layout_ = {BlockAttention::absolute, prompt_length_, B, grid_end};
  blocks_ = decoding_blocks(layout_);
  // The reference caps the steps per block at gen_length // minimal_topk (minimal_topk = 1).
  steps_per_block_ = std::min(options_.steps, options_.gen_length);
}

int64_t BlockDiffusionDecoder::quota() const {
  if (options_.editing) return options_.editing->num_to_transfer;
  return llada_quota(options_.block_length, steps_per_block_, step_in_block_);
}

int64_t BlockDiffusionDecoder::masked() const {
  return std::count(canvas_.begin() + prompt_length_, canvas_.begin() + generation_end_, mask_);
}

bool BlockDiffusionDecoder::block_has_masks() const {
  return std::find(canvas_.begin() + block().begin, canvas_.begin() + block().end, mask_) != canvas_.begin() + block().end;
}

std::vector<int32_t> BlockDiffusionDecoder::masked_in(int64_t begin, int64_t end) const {
  std::vector<int32_t> positions;
  for (int64_t p = begin; p < end; ++p)
    if (canvas_[static_cast<size_t>(p)] == mask_) positions.push_back(static_cast<int32_t>(p));
  return positions;
}

// The reference samples from softmax(logits / T) and ranks by that probability.
HeadRowSampling BlockDiffusionDecoder::sampling_for(int32_t position) const {
  return tempered_sampling(options_.seed, step_, position, options_.temperature, mask_);
}

const DecoderStep& BlockDiffusionDecoder::prepare() {
  MOSAIC_ASSERT(!finished_, "prepare() on a finished sequence");
  next_ = DecoderStep{};
  masked_at_start_ = block_has_masks();
  if (options_.editing) {  // every position of the block: the masks to fill, the tokens to edit
    for (int64_t p = block().begin; p < block().end; ++p) next_.candidates.push_back(static_cast<int32_t>(p));
  } else {
    next_.candidates = masked_in(block().begin, block().end);
  }
  for (const int32_t position : next_.candidates) next_.sampling.push_back(sampling_for(position));
  next_.layout = layout_;
  if (!next_.candidates.empty() && options_.cache == CacheMode::block) {
    // What is not final yet, up to the block's end: at a block's first step that includes the
    // block before it, whose K/V are then written from its final tokens.
    next_.cached = true;
    next_.begin = final_until_, next_.end = block().end;
  }
  return next_;
}

void BlockDiffusionDecoder::after_forward() {
  ++forwards_;
  final_until_ = layout_.block_start(block().begin);
}

void BlockDiffusionDecoder::commit(const float* stats) {
  committed_.clear();
  committed_confidence_.clear();
  const std::vector<int32_t>& candidates = next_.candidates;
  if (!candidates.empty()) {
    MOSAIC_ASSERT(stats != nullptr, "a step with candidates needs the head's output");
    after_forward();
    std::vector<int32_t> tokens;
    std::vector<double> confidences;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const TokenChoice choice =
          choice_from_head(stats + i * kHeadStatCount, next_.sampling[i], ConfidenceKind::chosen_probability);
      tokens.push_back(choice.token);
      confidences.push_back(choice.confidence);
    }
    std::vector<size_t> chosen = choose(tokens, confidences);
    if (options_.logprobs)
      for (const size_t i : chosen)
        logprobs_.push_back(token_logprob_from_stats(stats + i * kHeadStatCount, next_.sampling[i], candidates[i],
                                                     prompt_length_));
    write_commits(std::move(chosen), candidates, tokens, confidences, canvas_, committed_, committed_confidence_);
  }
  advance();
}

std::vector<size_t> BlockDiffusionDecoder::choose(std::span<const int32_t> tokens, std::span<const double> confidences) {
  const std::vector<int32_t>& candidates = next_.candidates;
  std::vector<RankedPosition> masked;
  std::vector<size_t> masked_index, chosen;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const int32_t current = canvas_[static_cast<size_t>(candidates[i])];
    if (current == mask_) {
      masked.push_back({candidates[i], confidences[i]});
      masked_index.push_back(i);
    } else if (options_.editing && tokens[i] != current && confidences[i] > options_.editing->editing_threshold) {
      chosen.push_back(i);  // token to token
    }
  }
  edited_ = !chosen.empty();
  for (const size_t j : top_k_or_above_positions(masked, quota(), *options_.threshold)) chosen.push_back(masked_index[j]);
  return chosen;
}

std::optional<CommitRule> BlockDiffusionDecoder::device_commit_rule() const {
  // Edits change placed tokens, which the device commit does not do: the host chooses.
  if (next_.candidates.empty() || options_.logprobs || options_.editing) return std::nullopt;
  CommitRule rule;
  rule.confidence = ConfidenceKind::chosen_probability;
  rule.selection = CommitSelection::top_k_or_above;
  rule.k = quota();
  rule.threshold = *options_.threshold;
  return rule;
}

void BlockDiffusionDecoder::commit_from_device(std::span<const CommittedRow> rows) {
  committed_.clear();
  committed_confidence_.clear();
  MOSAIC_ASSERT(!next_.candidates.empty() && rows.size() == next_.candidates.size(),
                "a device commit has one row per candidate");
  after_forward();
  DeviceCommits commits = device_commits(rows);
  write_commits(std::move(commits.chosen), next_.candidates, commits.tokens, commits.confidences, canvas_, committed_,
                committed_confidence_);
  advance();
}

bool BlockDiffusionDecoder::block_over() {
  if (!options_.editing) return !block_has_masks() || step_in_block_ >= steps_per_block_;
  // LLaDA 2.1: a step that began without masks and edited nothing ends the block; each step that
  // will begin without masks is a post step, of which max_post_steps may run.
  if (!masked_at_start_ && !edited_) return true;
  if (block_has_masks()) return false;
  return ++post_steps_ > options_.editing->max_post_steps;
}

void BlockDiffusionDecoder::advance() {
  ++step_;
  ++step_in_block_;
  if (!block_over()) return;
  // The block is over (the reference leaves masks of a block whose steps ran out in place).
  const int64_t block_end = block().end;
  ++block_;
  step_in_block_ = 0, post_steps_ = 0;
  const auto eos = static_cast<int32_t>(options_.eos_id);
  const bool eos_seen = std::find(canvas_.begin() + prompt_length_, canvas_.begin() + block_end, eos) !=
                        canvas_.begin() + block_end;
  if (eos_seen) {
    // What follows is never decoded: the answer ends at its first EOS, the rest reads as EOS.
    for (size_t p = static_cast<size_t>(block_end); p < canvas_.size(); ++p)
      if (canvas_[p] == mask_) canvas_[p] = eos;
    stopped_at_eos_ = true;
  }
  finished_ = eos_seen || block_ >= static_cast<int64_t>(blocks_.size());
}

}  // namespace mosaic
