// Appends tensors and ops to a Graph and derives lifetimes from the order of ops: a tensor is
// born at the first op that writes it and dies after the last op that reads it. Templates use
// it; nothing else writes a Graph.
#pragma once

#include <span>

#include "graph/graph.h"

namespace mosaic {

class GraphBuilder {
 public:
  int32_t tensor(TensorRole role, TensorCategory category, DType dtype, int64_t rows, int64_t cols,
                 int32_t layer = -1, int32_t chunk = -1);
  // Appends an op; `out` (and `out2`) are written, `a`, `b`, `c`, `index` are read. In-place ops
  // read `out` too.
  void op(GraphOp op);
  int32_t add_segments(std::span<const AttentionSegment> segments);

  // Inputs are written before op 0; `output` stays live to the last op. Checks that every
  // tensor is written before it is read and read after it is written (MOSAIC_ASSERT).
  Graph finish(int32_t output) &&;

  Graph& graph() { return graph_; }

 private:
  void read(const TensorRef& ref, int32_t op);
  void write(const TensorRef& ref, int32_t op);

  Graph graph_;
};

}  // namespace mosaic
