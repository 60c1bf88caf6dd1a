// Pads a small step's candidate rows to every row its computed positions can predict, so that the
// steps of one block shape replay one CUDA graph (exec/cuda_step_graphs.h).
//
// Mask-only logits make a step's shape follow its masks: a block whose candidates shrink by one a
// step has another launch signature every step, and its steps never replay. Where the computed
// rows are few (a cached step of one or a few blocks), the last layer and the head over all of
// them cost what they cost over the masked ones (both read their weights once either way), and
// then the shape follows the block layout alone: D2F at batch 1 keeps one shape for 12-17 steps.
// A padded sequence's rows are its predictable positions in position order, whichever of them are
// masked (block-causal steps key their last layer's attention by the candidates' positions, so the
// order must not follow the masks either); unpad_output() gathers the real rows' outputs back in
// the caller's order and drops the rest. docs/design/replay-padding.md.
//
// MOSAIC_REPLAY_PADDING=0 in the environment turns it off (CudaStepRunner).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "exec/step_runner.h"
#include "model/config.h"

namespace mosaic {

// The most rows a padded step may hold: toward 256 the head's and the last layer's products become
// compute-bound at 8B scale (padding would cost more than replaying saves), and from 256 candidate
// rows the CUDA head takes another path (kHeadRowsThroughGemm), which padding must not choose.
inline constexpr int64_t kReplayPaddingMaxRows = 192;

struct PaddedStep {
  PaddedStep() = default;
  PaddedStep(PaddedStep&&) = default;  // moving keeps the rows where the spans point
  PaddedStep& operator=(PaddedStep&&) = default;
  PaddedStep(const PaddedStep&) = delete;
  PaddedStep& operator=(const PaddedStep&) = delete;

  StepInput input;  // the step with padded rows (its spans point into `rows`)
  std::vector<std::vector<int32_t>> rows;
  // Per sequence: its first row in the padded batch, and for each of its real rows (in the
  // caller's order) that row's index among the sequence's padded rows.
  std::vector<int64_t> padded_begin;
  std::vector<std::vector<int64_t>> real_index;
  int64_t padded_total = 0;
};

// The padded form of `input`, or nothing where padding does not apply: logits kept, no sequence
// gains a row, or more than `max_rows` rows in all. A sequence that commits on the device keeps
// its rows (a commit rule would unmask padding rows). A padded sequence's rows are every position
// whose hidden row the step computes (the family's logit convention, forward_batch.h), in position
// order; a padding row is sampled as the sequence's first real row is, at its own position.
std::optional<PaddedStep> pad_candidates_for_replay(const ModelConfig& config, const StepInput& input,
                                                    int64_t max_rows = kReplayPaddingMaxRows);

// The output of the padded step as the unpadded step returns it: each sequence's real rows of
// `values` and `committed`, in batch order.
void unpad_output(const PaddedStep& padded, StepOutput& output);

// Whether MOSAIC_REPLAY_PADDING leaves padding on (unset or anything but "0").
bool replay_padding_from_environment();

}  // namespace mosaic
