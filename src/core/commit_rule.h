// Which of a sequence's candidate rows a step unmasks, said so that the device can apply it where
// the fused head's statistics already are (docs/design/device-commit.md), and what each row's
// outcome is: shared by the generation loop that chooses the rule, the runners that carry it and
// the commit kernel that applies it.
#pragma once

#include <cstdint>

namespace mosaic {

// The number a row is ranked by, from the head's statistics (gen/confidence.cc).
enum class ConfidenceKind : uint8_t {
  chosen_probability,  // p(x0) in the stats softmax; 0 when x0 is left out of it (LLaDA, threshold)
  top2_margin,         // p(1st) - p(2nd) (Dream topk_margin)
  negative_entropy,    // sum p ln p (Dream entropy)
};

enum class CommitSelection : uint8_t {
  top_k,      // the k most confident rows
  threshold,  // the most confident row always, every other whose confidence >= threshold
  // LLaDA 2.x: the k most confident rows always, every other whose confidence > threshold
  // (strictly) — "all above the bar if at least k are, else the top k".
  top_k_or_above,
};

// Rows rank by confidence, highest first; equal confidences rank the lower canvas position first
// (gen/position_select.h).
struct CommitRule {
  ConfidenceKind confidence = ConfidenceKind::chosen_probability;
  CommitSelection selection = CommitSelection::top_k;
  int64_t k = 0;          // top_k, top_k_or_above: how many (more than the rows: all of them)
  double threshold = 0;   // threshold, top_k_or_above: the bar the other rows must reach
};

// One candidate row after a commit on the device: what the host needs to mirror the canvas and
// report the step. 16 bytes, the same layout on host and device.
struct CommittedRow {
  int32_t token = -1;      // the row's chosen token (written to the canvas when committed)
  int32_t committed = 0;   // 1: the row's position was unmasked
  double confidence = 0;   // the number it was ranked by, as the device computed it
};
static_assert(sizeof(CommittedRow) == 16);

}  // namespace mosaic
