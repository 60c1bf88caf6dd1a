#include "gen/d2f_decoder.h"

#include <algorithm>

#include "core/error.h"
#include "gen/answer_end.h"
#include "gen/confidence.h"

namespace mosaic {

D2fDecoder::D2fDecoder(const ModelConfig& config, std::vector<int32_t> prompt, GenerationOptions options)
    : config_(config), options_(std::move(options)), canvas_(std::move(prompt)) {
  MOSAIC_ASSERT(options_.d2f.has_value(), "a D2F decoder needs options.d2f");
  d2f_ = *options_.d2f;
  prompt_length_ = static_cast<int64_t>(canvas_.size());
  mask_ = static_cast<int32_t>(config.mask_token_id);
  max_blocks_ = options_.gen_length / options_.block_length;
  canvas_.resize(static_cast<size_t>(prompt_length_ + options_.gen_length), mask_);
  layout_ = {BlockAttention::prompt, prompt_length_, options_.block_length, static_cast<int64_t>(canvas_.size())};
}

int64_t D2fDecoder::masked() const {
  return std::count(canvas_.begin() + prompt_length_, canvas_.end(), mask_);
}

// The reference's sample_tokens, for LLaDA and Dream alike.
HeadRowSampling D2fDecoder::sampling_for(int32_t position) const {
  return tempered_sampling(options_.seed, step_, position, options_.temperature, mask_);
}

int64_t D2fDecoder::decoded_prefix_end() const {
  int64_t end = prompt_length_;
  for (const Block& b : blocks_) {
    if (b.masks_left != 0) break;
    end = b.end;
  }
  return end;
}

const DecoderStep& D2fDecoder::prepare() {
  MOSAIC_ASSERT(!finished_, "prepare() on a finished sequence");
  next_ = DecoderStep{};
  next_.layout = layout_;
  // 1. Add a block once the last one (the prompt at first: fraction 1) is decoded enough.
  const double last_fraction = blocks_.empty() ? 1.0 : blocks_.back().decoded_fraction();
  if (static_cast<int64_t>(blocks_.size()) < max_blocks_ && !eos_seen_ && last_fraction >= d2f_.block_add_threshold) {
    const int64_t begin = prompt_length_ + static_cast<int64_t>(blocks_.size()) * options_.block_length;
    blocks_.push_back({begin, begin + options_.block_length, options_.block_length, true, false});
  }
  // 2. Promote: a block decoded enough fully activates the next (the prompt, the first block).
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const double fraction = i == 0 ? 1.0 : blocks_[i - 1].decoded_fraction();
    if (fraction >= d2f_.decoded_token_threshold) blocks_[i].fully_activated = true;
  }
  // 3. Nothing active: the request ends with this step, which runs no forward.
  if (std::none_of(blocks_.begin(), blocks_.end(), [](const Block& b) { return b.active; })) return next_;
  // 4-5. Every active block's masks are candidates; the forward spans what is not cached yet.
  for (const Block& b : blocks_)
    if (b.active)
      for (int64_t p = b.begin; p < b.end; ++p)
        if (canvas_[static_cast<size_t>(p)] == mask_) next_.candidates.push_back(static_cast<int32_t>(p));
  for (const int32_t position : next_.candidates) next_.sampling.push_back(sampling_for(position));
  decoded_at_forward_ = decoded_prefix_end();
  if (options_.cache == CacheMode::block && !next_.candidates.empty()) {
    next_.cached = true;
    next_.begin = cached_until_;
    next_.end = blocks_.back().end;
    if (config_.shifted_logits())  // Dream predicts position q from row q - 1
      next_.begin = std::min<int64_t>(next_.begin, std::max<int64_t>(next_.candidates.front() - 1, 0));
  }
  return next_;
}

void D2fDecoder::accept(const std::vector<int32_t>& tokens, const std::vector<double>& confidences, const float* stats) {
  const std::vector<int32_t>& candidates = next_.candidates;
  size_t i = 0;
  for (Block& b : blocks_) {
    if (!b.active) continue;
    // This block's candidates: [first, last) of the step's (they are in position order).
    const size_t first = i;
    while (i < candidates.size() && candidates[i] < b.end) ++i;
    std::vector<size_t> chosen;
    for (size_t c = first; c < i; ++c)
      if (confidences[c] > d2f_.skip_threshold) chosen.push_back(c);
    if (chosen.empty() && b.fully_activated && i > first) {
      size_t best = first;  // the lowest position among equals
      for (size_t c = first + 1; c < i; ++c)
        if (confidences[c] > confidences[best]) best = c;
      chosen.push_back(best);
    }
    for (const size_t c : chosen) {
      canvas_[static_cast<size_t>(candidates[c])] = tokens[c];
      committed_.push_back(candidates[c]);
      committed_confidence_.push_back(static_cast<float>(confidences[c]));
      if (tokens[c] == options_.eos_id) eos_seen_ = true;
      if (options_.logprobs)
        logprobs_.push_back(token_logprob_from_stats(stats + c * kHeadStatCount, next_.sampling[c], candidates[c],
                                                     prompt_length_));
    }
    b.masks_left -= static_cast<int64_t>(chosen.size());
  }
}

void D2fDecoder::commit(const float* stats) {
  committed_.clear();
  committed_confidence_.clear();
  const std::vector<int32_t>& candidates = next_.candidates;
  if (candidates.empty()) {  // step 3: the reference's last iteration
    ++step_;
    finish();
    return;
  }
  MOSAIC_ASSERT(stats != nullptr, "a step with candidates needs the head's output");
  std::vector<int32_t> tokens;
  std::vector<double> confidences;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const TokenChoice choice =
        choice_from_head(stats + i * kHeadStatCount, next_.sampling[i], ConfidenceKind::chosen_probability);
    tokens.push_back(choice.token);
    confidences.push_back(choice.confidence);
  }
  accept(tokens, confidences, stats);
  end_step();
}

void D2fDecoder::commit_from_device(std::span<const CommittedRow>) {
  MOSAIC_ASSERT(false, "a D2F step has no device rule (device_commit_rule is nullopt): commit() it");
}

void D2fDecoder::end_step() {
  ++forwards_;
  ++step_;
  // 7. The blocks decoded before this forward had their final K/V written by it.
  cached_until_ = std::max(cached_until_, decoded_at_forward_);
  // 8. A finished block retires once every block before it has (blocks enter the cache in order).
  bool earlier_retired = true;
  for (Block& b : blocks_) {
    if (b.active && b.masks_left == 0 && earlier_retired) b.active = false;
    earlier_retired = !b.active;
  }
  if (options_.stop_at_eos) {
    const int64_t end = static_cast<int64_t>(canvas_.size());
    if (const auto stop = answer_end(canvas_, prompt_length_, end, mask_, options_.eos_id, options_.eot_id)) {
      for (int64_t rest = *stop + 1; rest < end; ++rest)
        if (canvas_[static_cast<size_t>(rest)] == mask_) canvas_[static_cast<size_t>(rest)] = static_cast<int32_t>(options_.eos_id);
      stopped_at_answer_end_ = finished_ = true;
      return;
    }
  }
  // 9. The reference's safety cap: the request ends where it is (blocks never created hold EOS).
  if (step_ >= d2f_.max_steps) finish();
}

void D2fDecoder::finish() {
  finished_ = true;
  const int64_t created_end = blocks_.empty() ? prompt_length_ : blocks_.back().end;
  std::fill(canvas_.begin() + created_end, canvas_.end(), static_cast<int32_t>(options_.eos_id));
}

}  // namespace mosaic
