// The fused head's per-row summaries over the whole vocabulary from those of its parts: each
// tensor-parallel rank summarises its own vocabulary rows (kHeadPartialCount values a row, ids
// global; core/head_sampling.h), and every rank combines all the ranks' summaries the same way,
// so each holds the row's statistics as if one device had read every id:
//
//   chosen              the part with the highest chosen score (the lowest rank among ties, which
//                       holds the lowest ids: the same tie rule as one device's scan)
//   max, argmax         the same over the parts' maxima
//   log-sum-exp         m + log sum_r exp(lse_r - m), m the largest lse_r
//   sum p * s           sum_r exp(lse_r - lse) * (sum p * s)_r
//   runner-up           the best of the parts' maxima and runners-up, less the argmax
//
// Parts whose ids were all left out (an empty statistics set) count for nothing.
#pragma once

#include <cstdint>

namespace mosaic {

// partials: part k's row r at partials + k * part_stride + r * row_stride (kHeadPartialCount
// floats); out: row r's kHeadStatCount values at out + r * out_stride.
void combine_head_partials(int64_t rows, int64_t parts, const float* partials, int64_t part_stride,
                           int64_t row_stride, float* out, int64_t out_stride);

}  // namespace mosaic
