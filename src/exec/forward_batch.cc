#include "exec/forward_batch.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace mosaic {

PackedBatch pack_batch(const ModelConfig& config, std::span<const SequenceRows> batch) {
  if (batch.empty()) fail("the batch holds no sequences");
  PackedBatch packed;
  packed.offsets.push_back(0);
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceRows& sequence = batch[s];
    const int64_t length = static_cast<int64_t>(sequence.ids.size());
    if (length == 0) fail("sequence {} is empty", s);
    if (length > std::numeric_limits<int32_t>::max())
      fail("sequence {} has {} tokens, more than Mosaic's limit of 2^31 - 1", s, length);
    const int64_t begin = sequence.cached() ? sequence.begin : 0;
    const int64_t end = sequence.cached() ? sequence.end : length;
    if (begin < 0 || begin >= end || end > length)
      fail("sequence {}: computed positions [{}, {}) are not a non-empty run of its {} positions", s, begin, end,
           length);
    const int64_t start = packed.offsets.back();
    for (int64_t p = begin; p < end; ++p) {
      const int32_t id = sequence.ids[p];
      if (id < 0 || id >= config.vocab)
        fail("sequence {}: token id {} at position {} is outside the vocabulary [0, {})", s, id, p,
             config.vocab);
      packed.ids.push_back(id);
      packed.positions.push_back(static_cast<int32_t>(p));
    }
    std::vector<bool> requested(static_cast<size_t>(length), false);
    for (const int32_t row : sequence.rows) {
      if (row < 0 || row >= length)
        fail("sequence {}: requested row {} is outside the sequence of length {}", s, row, length);
      if (requested[row]) fail("sequence {}: row {} is requested twice", s, row);
      requested[row] = true;
      const int64_t source = config.shifted_logits() ? std::max<int64_t>(row - 1, 0) : row;
      if (source < begin || source >= end)
        fail("sequence {}: requested row {} reads hidden row {}, outside the computed positions [{}, {})", s,
             row, source, begin, end);
      packed.logit_rows.push_back(static_cast<int32_t>(start + source - begin));
    }
    packed.canvas_begin.push_back(begin);
    packed.offsets.push_back(start + end - begin);
  }
  return packed;
}

}  // namespace mosaic
