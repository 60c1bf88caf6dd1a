#include "gen/confidence.h"

#include <cmath>

namespace mosaic {

TokenChoice choice_from_head(const float* s, const HeadRowSampling& how, ConfidenceKind kind) {
  TokenChoice choice;
  choice.token = static_cast<int32_t>(s[kHeadChosen]);
  const double lse = s[kHeadLogSumExp];
  switch (kind) {
    case ConfidenceKind::chosen_probability:
      choice.confidence = how.stats_banned(choice.token) ? 0.0 : std::exp(double(s[kHeadChosenLogit]) - lse);
      break;
    case ConfidenceKind::top2_margin:
      choice.confidence = std::exp(double(s[kHeadMax]) - lse) -
                          (s[kHeadSecondId] < 0 ? 0.0 : std::exp(double(s[kHeadSecond]) - lse));
      break;
    case ConfidenceKind::negative_entropy:
      choice.confidence = double(s[kHeadMeanLogit]) - lse;
      break;
  }
  return choice;
}

}  // namespace mosaic
