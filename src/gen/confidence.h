// From the fused head's per-row output to what the algorithms rank positions by
// (docs/design/sampling.md): the chosen token and one confidence number.
#pragma once

#include <cstdint>

#include "core/commit_rule.h"  // ConfidenceKind
#include "core/head_sampling.h"

namespace mosaic {

struct TokenChoice {
  int32_t token = -1;
  double confidence = 0;
};

TokenChoice choice_from_head(const float* stats, const HeadRowSampling& how, ConfidenceKind kind);

}  // namespace mosaic
