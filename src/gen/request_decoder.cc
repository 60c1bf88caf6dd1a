#include "gen/request_decoder.h"

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
