#include "exec/finite_predictions.h"

#include <cmath>

#include "core/error.h"

namespace mosaic {
namespace {

// `on_device`: the row's sequence was committed on the device (its statistics, if any are
// returned beside other sequences' rows, are not meaningful; its committed row is).
bool row_finite(const StepOutput& output, int64_t row, int64_t vocab, bool on_device) {
  if (!on_device) {
    const float* values = output.values.data() + row * output.cols;
    if (output.cols == kHeadStatCount) {
      const float chosen = values[kHeadChosen];
      return std::isfinite(values[kHeadLogSumExp]) && chosen >= 0 && chosen < static_cast<float>(vocab);
    }
    for (int64_t v = 0; v < output.cols; ++v)
      if (!std::isfinite(values[v])) return false;
    return true;
  }
  const CommittedRow& committed = output.committed[static_cast<size_t>(row)];
  return committed.token >= 0 && committed.token < vocab && std::isfinite(committed.confidence);
}

}  // namespace

void check_predictions_finite(const StepInput& input, const StepOutput& output, int64_t vocab) {
  if (output.values.empty() && output.committed.empty()) return;
  int64_t row = 0;
  for (size_t s = 0; s < input.sequences.size(); ++s) {
    const bool on_device = s < input.device_commit.size() && input.device_commit[s].has_value();
    for (const int32_t position : input.sequences[s].rows) {
      if (!row_finite(output, row, vocab, on_device))
        fail("the model's prediction for position {} of sequence {} is not finite (NaN or infinite logits): the "
             "weights or the activations hold non-finite values (a damaged checkpoint, or an overflow)",
             position, s);
      ++row;
    }
  }
}

}  // namespace mosaic
