#include "core/head_stats_combine.h"

#include <cmath>
#include <initializer_list>
#include <utility>
#include <limits>

#include "core/head_sampling.h"

namespace mosaic {

void combine_head_partials(int64_t rows, int64_t parts, const float* partials, int64_t part_stride,
                           int64_t row_stride, float* out, int64_t out_stride) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    auto part = [&](int64_t k) { return partials + k * part_stride + r * row_stride; };
    double best_score = kNegInf, max = kNegInf, second = kNegInf, lse_max = kNegInf;
    float chosen = -1, chosen_logit = 0, argmax = -1, second_id = -1;
    for (int64_t k = 0; k < parts; ++k) {
      const float* p = part(k);
      if (p[kHeadChosen] >= 0 && p[kHeadChosenScore] > best_score)
        best_score = p[kHeadChosenScore], chosen = p[kHeadChosen], chosen_logit = p[kHeadChosenLogit];
      lse_max = std::fmax(lse_max, p[kHeadLogSumExp]);
      // The top two of every part's top two: a part's values arrive in id order, so a strict
      // comparison keeps the lowest id among equals.
      for (const auto& [value, id] : {std::pair{p[kHeadMax], p[kHeadArgmax]}, std::pair{p[kHeadSecond], p[kHeadSecondId]}}) {
        if (id < 0) continue;
        if (value > max) second = max, second_id = argmax, max = value, argmax = id;
        else if (value > second) second = value, second_id = id;
      }
    }
    double sum_exp = 0;
    for (int64_t k = 0; k < parts; ++k)
      if (const float lse = part(k)[kHeadLogSumExp]; lse > kNegInf) sum_exp += std::exp(double(lse) - lse_max);
    const double lse = lse_max + std::log(sum_exp);
    double mean = 0;
    for (int64_t k = 0; k < parts; ++k)
      if (const float* p = part(k); p[kHeadLogSumExp] > kNegInf)
        mean += std::exp(double(p[kHeadLogSumExp]) - lse) * double(p[kHeadMeanLogit]);
    float* o = out + r * out_stride;
    o[kHeadChosen] = chosen;
    o[kHeadChosenLogit] = chosen_logit;
    o[kHeadMax] = static_cast<float>(max);
    o[kHeadArgmax] = argmax;
    o[kHeadLogSumExp] = static_cast<float>(lse);
    o[kHeadMeanLogit] = static_cast<float>(sum_exp > 0 ? mean : std::nan(""));
    o[kHeadSecond] = static_cast<float>(second);
    o[kHeadSecondId] = second_id;
  }
}

}  // namespace mosaic
