// The fused head's rules applied to a materialised logits row, plus Dream's top-p / top-k
// filters, which need the whole row sorted (docs/design/sampling.md). Used when a step keeps its
// logits: top-p / top-k requests and classifier-free guidance, whose logits are combined first.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "core/head_sampling.h"

namespace mosaic {

struct RowFilter {
  std::optional<double> top_p;   // keep the smallest prefix of the sorted row with mass > p
  std::optional<int64_t> top_k;  // keep values >= the k-th largest
};

// Writes kHeadStatCount values (core/head_sampling.h). With a filter, `l * stats_scale` is the
// row the filter sees (Dream divides by the temperature first); filtered ids leave both the
// choice and the statistics.
void sample_logits_row(std::span<const float> logits, const HeadRowSampling& how,
                       const RowFilter& filter, float* out);

}  // namespace mosaic
