#include "exec/gate_up_swiglu_fusion.h"

namespace mosaic {
namespace {

bool same_view(const TensorRef& a, const TensorRef& b) { return a.tensor == b.tensor && a.row == b.row; }

bool plain_product(const GraphOp& op, WeightRole weight) {
  return op.kind == OpKind::linear && op.weight == weight && !op.has_bias && !op.accumulate;
}

bool reads(const GraphOp& op, int32_t tensor) {
  return op.a.tensor == tensor || op.b.tensor == tensor || op.c.tensor == tensor || op.index.tensor == tensor;
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
  for (size_t later = index + 3; later < graph.ops.size(); ++later)
    if (reads(graph.ops[later], up.out.tensor)) return false;
  return true;
}

}  // namespace mosaic
