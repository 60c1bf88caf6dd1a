// The mixture-of-experts FFN as an op group of the step graph (LLaDA-MoE; docs/design/moe.md).
// Per ffn chunk of R rows, with E experts of width F, each row taking K of them:
//
//   n       = norm(x[rows])                          ffn_norm       [R, hidden]
//   x[rows] += shared(n)   (LLaDA 2.x only)          gate, up       [R, shared width]
//   logits  = n Wr^T                                 router_logits  [R, E] (fp32 for LLaDA 2.x)
//   routes  = top K of softmax(logits), fp32         route_experts  i32 [R, K] (ascending)
//             (LLaDA 2.x: moe_route_grouped)         route_weights  f32 [R, K] (not renormalised;
//                                                                   LLaDA 2.x: renormalised, scaled)
//   permute: rows grouped by expert                  expert_rows    i32 [E + 1 + R K]: offsets, then
//                                                                   each permuted row's source row
//                                                    route_slots    i32 [R, K]
//   xp      = n[source rows]                         expert_input   [R K, hidden]
//   g, u    = xp We_gate^T, xp We_up^T per expert    expert_gate/up [R K, F]
//   g       = silu(g) * u
//   y       = g We_down^T per expert                 expert_output  [R K, hidden]
//   x[rows] += sum_j route_weights[r, j] y[route_slots[r, j]]   in expert order
//
// Every buffer's size follows from R x K whatever the routing, so one plan holds for any step of
// the shape, and the group is chunked by rows like the dense FFN. Each row's arithmetic depends
// only on its own values (its experts are its own choice), so chunking changes no result.
#pragma once

#include <cstdint>

namespace mosaic {

struct DecoderBuilder;

// Appends layer l's expert FFN over the builder's current rows, in ffn chunks.
void moe_ffn_block(DecoderBuilder& b, int32_t l);

}  // namespace mosaic
