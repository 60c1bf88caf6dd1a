#include "gen/request_decoder.h"

#include <algorithm>
#include <limits>

#include "gen/block_diffusion_decoder.h"
#include "gen/d2f_decoder.h"
#include "gen/sequence_decoder.h"

namespace mosaic {

std::unique_ptr<RequestDecoder> make_request_decoder(const ModelConfig& config, std::vector<int32_t> prompt,
                                                     GenerationOptions options, std::vector<int32_t> suffix) {
  if (options.d2f) return std::make_unique<D2fDecoder>(config, std::move(prompt), std::move(options));
  if (config.family == Family::llada2)
    return std::make_unique<BlockDiffusionDecoder>(config, std::move(prompt), std::move(options));
  return std::make_unique<SequenceDecoder>(config, std::move(prompt), std::move(options), std::move(suffix));
}

HeadRowSampling tempered_sampling(uint64_t seed, int64_t step, int32_t position, double temperature, int32_t mask) {
  HeadRowSampling how;
  how.seed = seed;
  how.step = static_cast<uint32_t>(step);
  how.position = static_cast<uint32_t>(position);
  if (temperature > 0) how.choice_inv_temperature = how.stats_scale = 1.0 / temperature;
  how.choice_bans[1] = mask;
  return how;
}

DeviceCommits device_commits(std::span<const CommittedRow> rows) {
  DeviceCommits out;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].committed) out.chosen.push_back(i);
    out.tokens.push_back(rows[i].token);
    out.confidences.push_back(rows[i].confidence);
  }
  return out;
}

void write_commits(std::vector<size_t> chosen, std::span<const int32_t> candidates, std::span<const int32_t> tokens,
                   std::span<const double> confidences, std::vector<int32_t>& canvas, std::vector<int32_t>& committed,
                   std::vector<float>& committed_confidence) {
  std::sort(chosen.begin(), chosen.end(), [&](size_t a, size_t b) { return candidates[a] < candidates[b]; });
  for (const size_t i : chosen) {
    canvas[static_cast<size_t>(candidates[i])] = tokens[i];
    committed.push_back(candidates[i]);
    committed_confidence.push_back(static_cast<float>(confidences[i]));
  }
}

TokenLogprob token_logprob_from_stats(const float* stats, const HeadRowSampling& how, int32_t position,
                                      int64_t prompt_length) {
  const double lse = stats[kHeadLogSumExp];
  TokenLogprob out;
  out.position = position - prompt_length;
  out.token = static_cast<int32_t>(stats[kHeadChosen]);
  out.logprob = how.stats_banned(out.token) ? -std::numeric_limits<double>::infinity()
                                            : double(stats[kHeadChosenLogit]) - lse;
  out.top.emplace_back(static_cast<int32_t>(stats[kHeadArgmax]), double(stats[kHeadMax]) - lse);
  if (stats[kHeadSecondId] >= 0)
    out.top.emplace_back(static_cast<int32_t>(stats[kHeadSecondId]), double(stats[kHeadSecond]) - lse);
  return out;
}

}  // namespace mosaic
