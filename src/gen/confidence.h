// From the fused head's per-row output to what the algorithms rank positions by
// (docs/design/sampling.md): the chosen token and one confidence number.
#pragma once

#include <cstdint>

#include "core/head_sampling.h"

namespace mosaic {

enum class ConfidenceKind : uint8_t {
  chosen_probability,  // p(x0) in the stats softmax; 0 when x0 is left out of it (LLaDA, threshold)
  top2_margin,         // p(1st) - p(2nd) (Dream topk_margin)
  negative_entropy,    // sum p ln p (Dream entropy)
};

struct TokenChoice {
  int32_t token = -1;
  double confidence = 0;
};

TokenChoice choice_from_head(const float* stats, const HeadRowSampling& how, ConfidenceKind kind);

}  // namespace mosaic
