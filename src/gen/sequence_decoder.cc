#include "gen/sequence_decoder.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/philox.h"
#include "gen/answer_end.h"
#include "gen/dream_schedule.h"
#include "gen/position_select.h"

namespace mosaic {

SequenceDecoder::SequenceDecoder(const ModelConfig& config, std::vector<int32_t> prompt,
                                 GenerationOptions options, std::vector<int32_t> suffix)
    : config_(config), options_(std::move(options)), canvas_(std::move(prompt)) {
  prompt_length_ = static_cast<int64_t>(canvas_.size());
  generation_end_ = prompt_length_ + options_.gen_length;
  mask_ = static_cast<int32_t>(config.mask_token_id);
  canvas_.resize(static_cast<size_t>(generation_end_), mask_);
  canvas_.insert(canvas_.end(), suffix.begin(), suffix.end());
  layout_ = block_layout(config, prompt_length_, options_);
  if (decodes_in_blocks(config, options_)) {
    blocks_ = decoding_blocks(layout_);  // over the generated region only
    steps_per_block_ = options_.steps / static_cast<int64_t>(blocks_.size());
  }
  layout_.length = static_cast<int64_t>(canvas_.size());  // queries attend to the suffix too
  if (config.family == Family::dream)
    timesteps_ = dream_timesteps(dream_blocks() ? std::max<int64_t>(steps_per_block_, 1) : options_.steps, options_.eps);
}

int64_t SequenceDecoder::masked() const {
  return std::count(canvas_.begin() + prompt_length_, canvas_.begin() + generation_end_, mask_);
}

std::vector<int32_t> SequenceDecoder::masked_in(int64_t begin, int64_t end) const {
  std::vector<int32_t> positions;
  for (int64_t p = begin; p < end; ++p)
    if (canvas_[p] == mask_) positions.push_back(static_cast<int32_t>(p));
  return positions;
}

ConfidenceKind SequenceDecoder::confidence_kind() const {
  if (config_.family != Family::dream || decoding_by_rule()) return ConfidenceKind::chosen_probability;
  switch (options_.alg) {
    case DreamAlg::topk_margin: return ConfidenceKind::top2_margin;
    case DreamAlg::entropy: return ConfidenceKind::negative_entropy;
    default: return ConfidenceKind::chosen_probability;  // p(x0): the top probability when greedy
  }
}

HeadRowSampling SequenceDecoder::sampling_for(int32_t position) const {
  HeadRowSampling how;
  how.seed = options_.seed;
  how.step = static_cast<uint32_t>(step_);
  how.position = static_cast<uint32_t>(position);
  const double T = options_.temperature;
  if (T > 0) how.choice_inv_temperature = 1.0 / T;
  // The mask token is never a choice: "unmasking" to it would leave the position masked (and
  // could keep a threshold decode from ending). Trained checkpoints give it ~0 probability.
  how.choice_bans[1] = mask_;
  if (config_.family == Family::dream) {
    if (T > 0) how.stats_scale = 1.0 / T;  // Dream's probabilities are of logits / T
    return how;
  }
  // LLaDA: confidences are softmax of the raw logits; the EOS/EoT options shape both lists.
  int bans = 0;
  if (options_.logits_eos_inf) how.choice_bans[0] = how.stats_bans[bans++] = static_cast<int32_t>(options_.eos_id);
  if (options_.confidence_eos_eot_inf) {
    if (options_.eot_id >= 0) how.stats_bans[bans++] = static_cast<int32_t>(options_.eot_id);
    if (T == 0 && !options_.logits_eos_inf && bans < 2) how.stats_bans[bans++] = static_cast<int32_t>(options_.eos_id);
  }
  return how;
}

const DecoderStep& SequenceDecoder::prepare() {
  MOSAIC_ASSERT(!finished_, "prepare() on a finished sequence");
  next_ = DecoderStep{};
  quota_ = -1;
  commit_all_ = false;
  if (dream_blocks()) prepare_dream_block();
  else if (config_.family == Family::dream) prepare_dream();
  else prepare_llada();
  for (const int32_t position : next_.candidates) next_.sampling.push_back(sampling_for(position));
  if (config_.family == Family::dream && (options_.top_p || options_.top_k)) {
    next_.needs_logits = true;
    next_.filter = {options_.top_p, options_.top_k};
  }
  if (options_.cfg_scale > 0 && !next_.candidates.empty()) {
    next_.needs_logits = true;
    next_.unconditional_canvas = canvas_;
    std::fill(next_.unconditional_canvas.begin(), next_.unconditional_canvas.begin() + prompt_length_, mask_);
  }
  prepare_rows();
  return next_;
}

void SequenceDecoder::prepare_rows() {
  next_.layout = layout_;
  if (next_.candidates.empty() || options_.cache == CacheMode::none) return;
  const int64_t length = static_cast<int64_t>(canvas_.size());
  const DecodingBlock& b = block();
  next_.cached = true;
  switch (options_.cache) {
    case CacheMode::prefix:  // the refresh computes everything, later steps the block and after
      next_.begin = block_forwarded_ ? b.begin : 0, next_.end = length;
      break;
    case CacheMode::dual:  // the refresh computes everything, later steps the block
      next_.begin = block_forwarded_ ? b.begin : 0, next_.end = block_forwarded_ ? b.end : length;
      break;
    case CacheMode::block:  // what is not final yet, up to the block's end
      next_.begin = final_until_, next_.end = b.end;
      break;
    default: MOSAIC_ASSERT(false, "cache mode {}", cache_mode_name(options_.cache));
  }
  // Every row a candidate reads must be computed (Dream reads position p from row p - 1).
  for (const int32_t p : next_.candidates)
    next_.begin = std::min<int64_t>(next_.begin, config_.shifted_logits() ? std::max(p - 1, 0) : p);
}

void SequenceDecoder::after_forward() {
  ++forwards_;
  if (blocks_.empty()) return;
  block_forwarded_ = true;
  // Everything before the attention block holding the active block is final now (an absolute
  // grid block also holding the prompt's tail starts before the decoding block).
  final_until_ = layout_.block_start(block().begin);
}

void SequenceDecoder::prepare_llada() {
  const std::vector<int32_t> masked = masked_in(block().begin, block().end);
  if (step_in_block_ == 0) block_masked_at_start_ = static_cast<int64_t>(masked.size());
  if (decoding_by_rule()) {
    next_.candidates = masked;
    return;
  }
  quota_ = llada_quota(block_masked_at_start_, steps_per_block_, step_in_block_);
  if (options_.remasking == Remasking::low_confidence) {
    next_.candidates = quota_ > 0 ? masked : std::vector<int32_t>{};
    return;
  }
  // remasking="random": confidences are drawn before the forward, so only the winners are
  // candidates.
  std::vector<RankedPosition> ranked;
  for (const int32_t p : masked)
    ranked.push_back({p, rng_uniform(options_.seed, RngStream::random_confidence, 0, uint32_t(p), uint32_t(step_))});
  for (const size_t index : top_k_positions(ranked, quota_)) next_.candidates.push_back(ranked[index].position);
  std::sort(next_.candidates.begin(), next_.candidates.end());
  quota_ = -1;  // every candidate is unmasked
}

// Fast-dLLM's block decoding (cached-decoding.md §2): the block's first position alone at its
// first step, then the rule or the block-local schedule over the block's masks.
void SequenceDecoder::prepare_dream_block() {
  const DecodingBlock& b = block();
  const std::vector<int32_t> masked = masked_in(b.begin, b.end);
  if (step_in_block_ == 0 && canvas_[static_cast<size_t>(b.begin)] == mask_) {
    next_.candidates = {static_cast<int32_t>(b.begin)};
    commit_all_ = true;  // unmasked whatever its confidence and the rule
    return;
  }
  dream_step(masked, step_in_block_);
}

void SequenceDecoder::prepare_dream() {
  dream_step(masked_in(prompt_length_, generation_end_), step_);
}

void SequenceDecoder::dream_step(const std::vector<int32_t>& masked, int64_t schedule_step) {
  if (decoding_by_rule()) {
    next_.candidates = masked;
    return;
  }
  if (options_.alg == DreamAlg::origin) {
    const float p = dream_transfer_probability(timesteps_, schedule_step);
    for (const int32_t q : masked)
      if (rng_uniform(options_.seed, RngStream::transfer, 0, uint32_t(q), uint32_t(step_)) < p)
        next_.candidates.push_back(q);
    return;  // every candidate is unmasked
  }
  quota_ = dream_transfer_count(static_cast<int64_t>(masked.size()), timesteps_, schedule_step);
  if (quota_ > 0) next_.candidates = masked;
}

bool SequenceDecoder::ranks_with_noise() const {
  return config_.family == Family::dream && options_.alg_temp && *options_.alg_temp > 0 && !decoding_by_rule();
}

void SequenceDecoder::commit(const float* stats) {
  committed_.clear();
  committed_confidence_.clear();
  const std::vector<int32_t>& candidates = next_.candidates;
  if (!candidates.empty()) {
    MOSAIC_ASSERT(stats != nullptr, "a step with candidates needs the head's output");
    after_forward();
    const ConfidenceKind kind = confidence_kind();
    std::vector<int32_t> tokens;
    std::vector<double> confidences;
    std::vector<RankedPosition> ranked;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const TokenChoice choice = choice_from_head(stats + i * kHeadStatCount, next_.sampling[i], kind);
      tokens.push_back(choice.token);
      confidences.push_back(choice.confidence);
      double score = choice.confidence;
      if (ranks_with_noise())
        score = score / *options_.alg_temp +
                rng_gumbel(options_.seed, RngStream::position_gumbel, 0, uint32_t(candidates[i]), uint32_t(step_));
      ranked.push_back({candidates[i], score});
    }
    std::vector<size_t> chosen;
    if (commit_all_) for (size_t i = 0; i < candidates.size(); ++i) chosen.push_back(i);
    else if (options_.threshold) chosen = threshold_positions(ranked, *options_.threshold);
    else if (options_.factor) chosen = factor_positions(ranked, *options_.factor);
    else if (quota_ >= 0) chosen = top_k_positions(ranked, quota_);
    else for (size_t i = 0; i < candidates.size(); ++i) chosen.push_back(i);
    if (options_.logprobs)
      for (const size_t i : chosen) logprobs_.push_back(token_logprob_from_stats(stats + i * kHeadStatCount, next_.sampling[i], candidates[i], prompt_length_));
    unmask(std::move(chosen), tokens, confidences);
  }
  advance();
}

std::optional<CommitRule> SequenceDecoder::device_commit_rule() const {
  // Log-probabilities need the rows' statistics, which a device commit keeps on the device.
  if (next_.candidates.empty() || next_.needs_logits || options_.logprobs) return std::nullopt;
  CommitRule rule;
  rule.confidence = confidence_kind();
  if (commit_all_) {  // the Dream block's first position, whatever the rule
    rule.selection = CommitSelection::top_k;
    rule.k = static_cast<int64_t>(next_.candidates.size());
    return rule;
  }
  if (options_.factor) return std::nullopt;
  if (options_.threshold) {
    rule.selection = CommitSelection::threshold;
    rule.threshold = *options_.threshold;
    return rule;
  }
  if (ranks_with_noise()) return std::nullopt;
  rule.selection = CommitSelection::top_k;
  rule.k = quota_ >= 0 ? quota_ : static_cast<int64_t>(next_.candidates.size());  // -1: every candidate
  return rule;
}

void SequenceDecoder::commit_from_device(std::span<const CommittedRow> rows) {
  committed_.clear();
  committed_confidence_.clear();
  MOSAIC_ASSERT(!next_.candidates.empty() && rows.size() == next_.candidates.size(),
                "a device commit has one row per candidate");
  after_forward();
  DeviceCommits commits = device_commits(rows);
  unmask(std::move(commits.chosen), commits.tokens, commits.confidences);
  advance();
}

void SequenceDecoder::unmask(std::vector<size_t> chosen, std::span<const int32_t> tokens,
                             std::span<const double> confidences) {
  write_commits(std::move(chosen), next_.candidates, tokens, confidences, canvas_, committed_, committed_confidence_);
}

void SequenceDecoder::advance() {
  ++step_;
  if (blocks_.empty()) {  // Dream over the whole canvas
    finished_ = masked() == 0 || step_ >= options_.steps;
  } else {
    const bool block_done = masked_in(block().begin, block().end).empty();
    ++step_in_block_;
    // A LLaDA block runs its steps (a rule: until it is done); a Dream block ends when it is done.
    const bool next = decoding_by_rule() || dream_blocks() ? block_done : step_in_block_ >= steps_per_block_;
    if (next || (dream_blocks() && !decoding_by_rule() && step_in_block_ >= steps_per_block_)) {
      ++block_;
      step_in_block_ = 0;
      block_forwarded_ = false;
    }
    finished_ = block_ >= static_cast<int64_t>(blocks_.size()) ||
                (decoding_by_rule() && step_ >= options_.steps);  // rules: steps bounds the total
  }
  if (options_.stop_at_eos && !finished_) check_eos();
}

void SequenceDecoder::check_eos() {
  const std::optional<int64_t> end =
      answer_end(canvas_, prompt_length_, generation_end_, mask_, options_.eos_id, options_.eot_id);
  if (!end) return;
  for (int64_t rest = *end + 1; rest < generation_end_; ++rest)
    if (canvas_[rest] == mask_) canvas_[rest] = static_cast<int32_t>(options_.eos_id);
  finished_ = stopped_at_eos_ = true;
}

}  // namespace mosaic
