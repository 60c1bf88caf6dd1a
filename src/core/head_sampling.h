// How the fused LM head picks and scores one candidate row (docs/design/sampling.md): shared by
// the samplers that fill it in and the kernels that apply it.
#pragma once

#include <cstdint>

namespace mosaic {

struct HeadRowSampling {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t position = 0;                // canvas position of the predicted token (noise address)
  double choice_inv_temperature = 0;    // 0: greedy; else 1 / T with Gumbel noise
  double stats_scale = 1;               // statistics over l * stats_scale (Dream: 1 / T)
  int32_t choice_bans[2] = {-1, -1};    // ids the chosen token may not be
  int32_t stats_bans[2] = {-1, -1};     // ids left out of the statistics' softmax

  bool choice_banned(int64_t id) const { return choice_bans[0] == id || choice_bans[1] == id; }
  bool stats_banned(int64_t id) const { return stats_bans[0] == id || stats_bans[1] == id; }
};

// Columns of the fused head's output per candidate row (fp32).
enum HeadStat : int {
  kHeadChosen = 0,         // chosen token id
  kHeadChosenLogit = 1,    // its logit * stats_scale
  kHeadMax = 2,            // max of logit * stats_scale over the stats set
  kHeadArgmax = 3,         // its id
  kHeadLogSumExp = 4,      // log-sum-exp over the stats set
  kHeadMeanLogit = 5,      // sum p * logit * stats_scale
  kHeadSecond = 6,         // runner-up value
  kHeadSecondId = 7,       // its id (-1 if none)
  kHeadStatCount = 8,
};

// One tensor-parallel rank's fused head over its vocabulary rows (model/tensor_parallel.h): the
// statistics above for its ids (global ids), then the chosen token's score (its logit, or the
// logit / T plus its Gumbel noise), by which core/head_stats_combine.h picks across ranks.
inline constexpr int kHeadChosenScore = kHeadStatCount;
inline constexpr int kHeadPartialCount = kHeadStatCount + 1;

}  // namespace mosaic
