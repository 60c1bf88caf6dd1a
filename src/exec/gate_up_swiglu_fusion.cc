#include "exec/gate_up_swiglu_fusion.h"

namespace mosaic {
namespace {

bool same_view(const TensorRef& a, const TensorRef& b) { return a.tensor == b.tensor && a.row == b.row; }

bool plain_product(const GraphOp& op, WeightRole weight) {
  return op.kind == OpKind::linear && op.weight == weight && !op.has_bias && !op.accumulate;
}

}  // namespace

bool is_gate_up_swiglu(const Graph& graph, size_t index) {
  if (index + 2 >= graph.ops.size()) return false;
  const GraphOp& gate = graph.ops[index];
  const GraphOp& up = graph.ops[index + 1];
  const GraphOp& swiglu = graph.ops[index + 2];
  if (!plain_product(gate, WeightRole::gate) || !plain_product(up, WeightRole::up)) return false;
  if (up.layer != gate.layer || !same_view(up.a, gate.a) || up.rows != gate.rows) return false;
  if (swiglu.kind != OpKind::swiglu || swiglu.rows != gate.rows || !same_view(swiglu.out, gate.out) ||
      !same_view(swiglu.b, up.out))
    return false;
  // The fused kernel leaves the up product unwritten: its lifetime (graph_builder.cc) must end at
  // the SwiGLU.
  return graph.tensors.at(static_cast<size_t>(up.out.tensor)).last_op == static_cast<int32_t>(index + 2);
}

}  // namespace mosaic
