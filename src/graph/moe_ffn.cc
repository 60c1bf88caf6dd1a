#include "graph/moe_ffn.h"

#include "graph/decoder_builder.h"

namespace mosaic {

using Cat = TensorCategory;
using Role = TensorRole;

void moe_ffn_block(DecoderBuilder& b, int32_t l) {
  const ModelConfig& c = b.c;
  GraphBuilder& g = b.g;
  b.group = ChunkGroup::ffn;
  const int64_t K = c.experts_per_token, E = c.experts;
  const int64_t cap = row_chunk(b.R, b.chunks.ffn, 0).rows;
  for (int64_t f = 0; f < b.chunks.ffn; ++f) {
    const RowChunk r = row_chunk(b.R, b.chunks.ffn, f);
    const int32_t chunk = b.chunks.ffn == 1 ? -1 : static_cast<int32_t>(f);
    const int64_t routed = r.rows * K;
    const int32_t n = g.tensor(Role::ffn_norm, Cat::norm, b.act(), cap, c.hidden, l, chunk);
    b.norm(l, WeightRole::ffn_norm, n, r.begin, r.rows);

    // LLaDA 2.x's shared expert on the same normalised rows, added first (the routed sum follows).
    if (c.shared_expert_ffn > 0) b.swiglu_into_residual(l, n, r.begin, r.rows, c.shared_expert_ffn, cap, chunk);

    // LLaDA-MoE's router logits are a bf16 product like any projection; LLaDA 2.x's are fp32.
    const bool grouped = c.router == RouterKind::sigmoid_grouped;
    const int32_t logits = g.tensor(Role::router_logits, Cat::experts, grouped ? DType::f32 : b.act(), cap, E, l, chunk);
    b.linear(l, WeightRole::router, {logits, 0}, n, r.rows);
    const int32_t experts = g.tensor(Role::route_experts, Cat::experts, DType::i32, cap, K, l, chunk);
    const int32_t weights = g.tensor(Role::route_weights, Cat::experts, DType::f32, cap, K, l, chunk);
    GraphOp route = grouped ? b.make(OpKind::moe_route_grouped, l, WeightRole::router_bias, {experts, 0}, {logits, 0}, r.rows)
                            : b.make(OpKind::moe_route, l, WeightRole::router, {experts, 0}, {logits, 0}, r.rows);
    route.out2 = {weights, 0};
    b.op(route);

    const int32_t rows = g.tensor(Role::expert_rows, Cat::experts, DType::i32, E + 1 + cap * K, 1, l, chunk);
    const int32_t slots = g.tensor(Role::route_slots, Cat::experts, DType::i32, cap, K, l, chunk);
    GraphOp permute = b.make(OpKind::moe_permute, l, WeightRole::router, {rows, 0}, {experts, 0}, r.rows);
    permute.out2 = {slots, 0};
    b.op(permute);
    const int32_t input = g.tensor(Role::expert_input, Cat::experts, b.act(), cap * K, c.hidden, l, chunk);
    GraphOp gather = b.make(OpKind::gather_rows, -1, WeightRole::embedding, {input, 0}, {n, 0}, routed);
    gather.index = {rows, E + 1};
    b.op(gather);

    auto expert_linear = [&](WeightRole weight, int32_t out, int32_t in) {
      GraphOp op = b.make(OpKind::expert_linear, l, weight, {out, 0}, {in, 0}, routed);
      op.index = {rows, 0};
      b.op(op);
    };
    const int32_t gate = g.tensor(Role::expert_gate, Cat::experts, b.act(), cap * K, c.expert_ffn, l, chunk);
    expert_linear(WeightRole::expert_gate, gate, input);
    const int32_t up = g.tensor(Role::expert_up, Cat::experts, b.act(), cap * K, c.expert_ffn, l, chunk);
    expert_linear(WeightRole::expert_up, up, input);
    GraphOp swiglu = b.make(OpKind::swiglu, l, WeightRole::embedding, {gate, 0}, {}, routed);
    swiglu.b = {up, 0};
    b.op(swiglu);
    const int32_t out = g.tensor(Role::expert_output, Cat::experts, b.act(), cap * K, c.hidden, l, chunk);
    expert_linear(WeightRole::expert_down, out, gate);

    GraphOp combine = b.make(OpKind::moe_combine, l, WeightRole::router, {b.x, r.begin}, {out, 0}, r.rows);
    combine.b = {weights, 0};
    combine.index = {slots, 0};
    b.op(combine);
  }
}

}  // namespace mosaic
