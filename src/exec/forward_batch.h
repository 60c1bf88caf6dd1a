// A batch of sequences for one forward: token ids per sequence and, per sequence, the positions
// whose logits are wanted (mask-only: no other row's logits are ever computed).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"

namespace mosaic {

struct SequenceRows {
  std::span<const int32_t> ids;   // the whole canvas of one sequence
  std::span<const int32_t> rows;  // positions p whose prediction is wanted
  // The same canvas across steps, for runners that keep canvases on the device (0: none, upload
  // the ids every step). Unique among the canvases a runner holds; StepRunner::release_canvas
  // drops it.
  uint64_t canvas_id = 0;
};

// Packed layout of a batch: sequence i holds tokens [offsets[i], offsets[i+1]).
struct PackedBatch {
  std::vector<int64_t> offsets;      // size batch + 1
  std::vector<int32_t> ids;          // [tokens]
  std::vector<int32_t> positions;    // [tokens], position within its own sequence
  std::vector<int32_t> logit_rows;   // packed hidden row feeding each requested prediction
  int64_t tokens() const { return offsets.back(); }
  int64_t sequences() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

// Validates ids (0 <= id < vocab), rows (0 <= p < L, each at most once) and non-empty sequences, throwing
// mosaic::Error naming the sequence and the value, and packs the batch. The family's logit
// convention is applied here (Dream: position p reads hidden row p - 1, position 0 row 0).
PackedBatch pack_batch(const ModelConfig& config, std::span<const SequenceRows> batch);

}  // namespace mosaic
