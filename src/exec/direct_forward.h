// The straight-line fp32 CPU forward: one buffer per activation, layer after layer. It is the
// oracle the planned executor is checked against, and the simplest statement of the model math:
//
//   x = embed(ids)
//   per layer:  n = rms_norm(x);  q, k, v = n Wq^T (+bq), n Wk^T (+bk), n Wv^T (+bv)
//               rope(q), rope(k);  x += attention(q, k, v) Wo^T
//               n = rms_norm(x);   x += (silu(n Wg^T) * (n Wu^T)) Wd^T
//   logits[r] = rms_norm(x[logit_rows[r]]) Wlm^T        (only the requested rows)
//
// LLaDA-MoE: q and k normalised per head before RoPE; the FFN row by row over the row's
// experts, y = sum_j p_j (silu(n We_g^T) * (n We_u^T)) We_d^T in expert order.
#pragma once

#include <vector>

#include "exec/forward_batch.h"
#include "model/model_weights.h"

namespace mosaic {

// Returns logits [packed.logit_rows.size(), vocab], row-major.
std::vector<float> direct_forward(const Model& model, const PackedBatch& packed);

}  // namespace mosaic
