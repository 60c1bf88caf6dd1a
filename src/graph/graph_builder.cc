#include "graph/graph_builder.h"

#include <algorithm>

#include "core/error.h"

namespace mosaic {

int32_t GraphBuilder::tensor(TensorRole role, TensorCategory category, DType dtype, int64_t rows,
                             int64_t cols, int32_t layer, int32_t chunk) {
  GraphTensor t;
  t.role = role, t.category = category, t.dtype = dtype;
  t.layer = layer, t.chunk = chunk, t.rows = rows, t.cols = cols;
  graph_.tensors.push_back(t);
  return static_cast<int32_t>(graph_.tensors.size()) - 1;
}

void GraphBuilder::read(const TensorRef& ref, int32_t op) {
  if (!ref.valid()) return;
  GraphTensor& t = graph_.tensors.at(static_cast<size_t>(ref.tensor));
  MOSAIC_ASSERT(t.first_op >= 0 || t.category == TensorCategory::input,
                "op {} reads {} before anything writes it", op, graph_.tensor_name(ref.tensor));
  t.last_op = std::max(t.last_op, op);
}

void GraphBuilder::write(const TensorRef& ref, int32_t op) {
  GraphTensor& t = graph_.tensors.at(static_cast<size_t>(ref.tensor));
  if (t.first_op < 0) t.first_op = op;
  t.last_op = std::max(t.last_op, op);
}

void GraphBuilder::op(GraphOp op) {
  const int32_t index = graph_.op_count();
  MOSAIC_ASSERT(op.out.valid(), "op {} has no output", index);
  const bool in_place = op.kind == OpKind::rope || op.kind == OpKind::swiglu || op.kind == OpKind::head_norm ||
                        op.kind == OpKind::moe_combine || op.kind == OpKind::all_reduce || op.accumulate;
  if (in_place) read(op.out, index);
  for (const TensorRef* input : {&op.a, &op.b, &op.c, &op.index, &op.staged}) read(*input, index);
  write(op.out, index);
  if (op.out2.valid()) write(op.out2, index);
  if (op.scratch.valid()) write(op.scratch, index);
  graph_.ops.push_back(op);
}

int32_t GraphBuilder::add_segments(std::span<const AttentionSegment> segments) {
  const int32_t begin = static_cast<int32_t>(graph_.segments.size());
  graph_.segments.insert(graph_.segments.end(), segments.begin(), segments.end());
  return begin;
}

Graph GraphBuilder::finish(int32_t output) && {
  graph_.output = output;
  const int32_t last = graph_.op_count() - 1;
  for (size_t i = 0; i < graph_.tensors.size(); ++i) {
    GraphTensor& t = graph_.tensors[i];
    if (t.category == TensorCategory::input) {
      t.first_op = 0;
      t.last_op = std::max(t.last_op, 0);
    }
    if (static_cast<int32_t>(i) == output) t.last_op = last;
    MOSAIC_ASSERT(t.first_op >= 0 && t.last_op >= t.first_op, "{} is never written",
                  graph_.tensor_name(static_cast<int32_t>(i)));
  }
  return std::move(graph_);
}

}  // namespace mosaic
