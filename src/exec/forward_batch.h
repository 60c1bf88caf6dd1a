// A batch of sequences for one forward: token ids per sequence and, per sequence, the positions
// whose logits are wanted (mask-only: no other row's logits are ever computed).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/block_attention.h"
#include "model/config.h"

namespace mosaic {

struct SequenceRows {
  std::span<const int32_t> ids;   // the whole canvas of one sequence
  std::span<const int32_t> rows;  // positions p whose prediction is wanted
  // The same canvas across steps, for runners that keep canvases on the device (0: none, upload
  // the ids every step). Unique among the canvases a runner holds; StepRunner::release_canvas
  // drops it.
  uint64_t canvas_id = 0;
  // A cached step (docs/design/kv-cache.md): only the canvas positions [begin, end) are computed,
  // against the K/V of the whole canvas held in the runner's KV cache `cache_id` (0: a full step,
  // every position computed, no cache). The rows' hidden rows must lie in [begin, end).
  uint64_t cache_id = 0;
  int64_t begin = 0, end = 0;
  // How the sequence's queries see keys (kind none: full attention).
  BlockLayout layout;

  bool cached() const { return cache_id != 0; }
  int64_t computed_rows() const { return cached() ? end - begin : static_cast<int64_t>(ids.size()); }
};

// Packed layout of a batch: sequence i holds tokens [offsets[i], offsets[i+1]).
struct PackedBatch {
  std::vector<int64_t> offsets;      // size batch + 1
  std::vector<int32_t> ids;          // [tokens]
  std::vector<int32_t> positions;    // [tokens], position within its own sequence
  std::vector<int32_t> logit_rows;   // packed hidden row feeding each requested prediction
  std::vector<int64_t> canvas_begin; // per sequence, the canvas position of its first packed row
  std::vector<int32_t> kv_rows;      // cached steps: each packed row's row in the KV cache (runner)
  int64_t tokens() const { return offsets.back(); }
  int64_t sequences() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

// Validates ids (0 <= id < vocab), rows (0 <= p < L, each at most once) and non-empty sequences, throwing
// mosaic::Error naming the sequence and the value, and packs the batch: each sequence's computed
// rows (all of it, or [begin, end) for a cached step). The family's logit convention is applied
// here (Dream: position p reads hidden row p - 1, position 0 row 0); a requested row whose hidden
// row is not computed is an error.
PackedBatch pack_batch(const ModelConfig& config, std::span<const SequenceRows> batch);

}  // namespace mosaic
