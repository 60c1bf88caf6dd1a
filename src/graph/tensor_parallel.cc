#include "graph/tensor_parallel.h"

#include "core/error.h"
#include "core/head_sampling.h"
#include "graph/graph_builder.h"

namespace mosaic {

Graph insert_tensor_parallel_collectives(const Graph& graph, int64_t ranks) {
  if (ranks == 1) return graph;
  // The graph as it is, less its ops: the builder derives every lifetime again as they are replayed.
  GraphBuilder builder;
  Graph& out = builder.graph();
  out = graph;
  out.ops.clear();
  for (GraphTensor& t : out.tensors) t.first_op = t.last_op = -1;
  out.tensor_parallel = ranks;
  int32_t partials = -1;  // the head's summaries per rank, [candidates, kHeadPartialCount], in stats' rows
  for (const GraphOp& source : graph.ops) {
    GraphOp op = source;
    MOSAIC_ASSERT(op.kind != OpKind::moe_combine, "tensor parallelism of an expert FFN");
    if (op.kind == OpKind::embed) {
      builder.op(op);
      GraphOp reduce{.kind = OpKind::all_reduce};
      reduce.out = op.out, reduce.rows = op.rows, reduce.group = op.group;
      builder.op(reduce);
      continue;
    }
    if (op.kind == OpKind::linear && op.accumulate) {
      // A row-parallel projection closing a residual block: its rank's share into a partial of its
      // own, summed over the ranks into x.
      const GraphTensor& x = graph.tensors[static_cast<size_t>(op.out.tensor)];
      const GraphTensor& in = graph.tensors[static_cast<size_t>(op.a.tensor)];
      const int32_t partial =
          builder.tensor(TensorRole::reduce_partial, in.category, x.dtype, op.rows, x.cols, op.layer, in.chunk);
      const TensorRef into = op.out;
      op.out = {partial, 0}, op.accumulate = false;
      builder.op(op);
      GraphOp reduce{.kind = OpKind::all_reduce};
      reduce.accumulate = true, reduce.out = into, reduce.a = {partial, 0}, reduce.rows = op.rows;
      reduce.layer = op.layer, reduce.group = op.group;
      builder.op(reduce);
      continue;
    }
    if (op.kind == OpKind::lm_head_stats) {
      const GraphTensor& stats = graph.tensors[static_cast<size_t>(op.out.tensor)];
      if (partials < 0)
        partials = builder.tensor(TensorRole::head_partials, TensorCategory::head, DType::f32, stats.rows,
                                  kHeadPartialCount);
      const TensorRef into = op.out;
      op.out = {partials, into.row};  // the same rows: the sampling of row r is still entry r
      builder.op(op);
      GraphOp combine{.kind = OpKind::combine_head_stats};
      combine.out = into, combine.a = {partials, into.row}, combine.rows = op.rows, combine.group = op.group;
      builder.op(combine);
      continue;
    }
    builder.op(op);
  }
  return std::move(builder).finish(graph.output);
}

}  // namespace mosaic
