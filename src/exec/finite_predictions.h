// Non-finite predictions are an error, never a token: a checkpoint with NaN or infinite weights
// (or an activation that overflows) makes every logit of a row NaN, and the argmax over NaN is no
// token at all (id -1). Checked on what every step returns to the host anyway: the fused head's
// log-sum-exp per row (NaN or +inf exactly when a logit of the row is), the kept logits, or the
// device commit's token and confidence.
#pragma once

#include <cstdint>

#include "exec/step_runner.h"

namespace mosaic {

// Throws mosaic::Error naming the sequence and canvas position of the first row whose prediction
// is not finite.
void check_predictions_finite(const StepInput& input, const StepOutput& output, int64_t vocab);

}  // namespace mosaic
