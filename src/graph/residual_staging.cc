#include "graph/residual_staging.h"

#include <algorithm>
#include <map>
#include <vector>

#include "core/error.h"
#include "graph/graph_builder.h"

namespace mosaic {
namespace {

// A run of ops over rows [begin, begin + rows) of x, ops first .. last of the source graph.
struct Visit {
  int64_t begin = 0, rows = 0;
  int32_t first = 0, last = 0;
  bool writes = false;
  int32_t stage_before = 0;  // the source op the stage is placed before
  int32_t tensor = -1;       // its residual_rows tensor
};

std::vector<TensorRef*> refs_of(GraphOp& op) { return {&op.out, &op.a, &op.b, &op.c}; }

}  // namespace

bool addresses_host_rows(const GraphOp& op) {
  return op.kind == OpKind::embed || op.kind == OpKind::gather_rows ||
         (op.kind == OpKind::rms_norm && op.index.valid());
}

Graph stage_residual_rows(const Graph& graph) {
  int32_t x = -1;
  for (size_t t = 0; t < graph.tensors.size(); ++t)
    if (graph.tensors[t].role == TensorRole::residual) x = static_cast<int32_t>(t);
  if (x < 0) return graph;

  // The visits, and the last op before each that writes x's host rows directly (the embedding).
  // Everything here follows from the graph's structure, never from its row counts, so that a
  // step and its shape bucket get the same ops and lifetimes (plan/step_planner.h plans the
  // bucket): a visit begins at each norm of x's rows and holds the ops after it that address x
  // until the next; its staged tensor has the norm output's rows (the chunk's capacity).
  std::vector<Visit> visits;
  std::vector<int32_t> visit_of(graph.ops.size(), -1);
  std::vector<int64_t> capacity;
  bool open = false;  // the last op addressing x belongs to visits.back()
  int32_t last_direct_write = -1;
  for (int32_t i = 0; i < graph.op_count(); ++i) {
    GraphOp op = graph.ops[static_cast<size_t>(i)];
    for (const TensorRef* ref : {&op.index, &op.out2, &op.scratch, &op.staged})
      MOSAIC_ASSERT(ref->tensor != x, "op {} ({}) addresses the residual stream as a side tensor", i,
                    op_kind_name(op.kind));
    const std::vector<TensorRef*> refs = refs_of(op);
    const bool touches = std::ranges::any_of(refs, [&](const TensorRef* r) { return r->tensor == x; });
    if (!touches) continue;
    if (addresses_host_rows(op)) {
      if (op.out.tensor == x) last_direct_write = i;
      open = false;
      continue;
    }
    int64_t begin = -1;
    for (const TensorRef* ref : refs) {
      if (ref->tensor != x) continue;
      MOSAIC_ASSERT(begin < 0 || begin == ref->row, "op {} ({}) addresses two row ranges of the residual stream", i,
                    op_kind_name(op.kind));
      begin = ref->row;
    }
    const bool writes = op.out.tensor == x;
    if (op.kind == OpKind::rms_norm && op.a.tensor == x) {
      Visit v;
      v.begin = begin, v.rows = op.rows, v.first = v.last = i, v.writes = false;
      // One visit ahead: staged while the previous visit's ops run. A visit of another phase (a
      // new group or layer) may read rows the previous one wrote, so it waits for their write-back;
      // a chunk of the same phase never does (the phase's chunks are disjoint). Never before a
      // direct write of x (the embedding).
      v.stage_before = i;
      if (!visits.empty()) {
        const Visit& previous = visits.back();
        const GraphOp& previous_op = graph.ops[static_cast<size_t>(previous.first)];
        const bool same_phase = previous_op.group == op.group && previous_op.layer == op.layer;
        v.stage_before = same_phase || !previous.writes ? previous.first : previous.last + 1;
      }
      v.stage_before = std::max(v.stage_before, last_direct_write + 1);
      visits.push_back(v);
      capacity.push_back(graph.tensors[static_cast<size_t>(op.out.tensor)].rows);
      open = true;
    } else {
      MOSAIC_ASSERT(open && visits.back().begin == begin && op.rows <= visits.back().rows,
                    "op {} ({}) addresses rows of the residual stream outside a visit that begins with their norm", i,
                    op_kind_name(op.kind));
      visits.back().last = i;
      visits.back().writes |= writes;
    }
    visit_of[static_cast<size_t>(i)] = static_cast<int32_t>(visits.size()) - 1;
  }

  GraphBuilder builder;
  Graph& out = builder.graph();
  out = graph;
  out.ops.clear();
  for (GraphTensor& t : out.tensors) t.first_op = t.last_op = -1;
  out.tensors[static_cast<size_t>(x)].host = true;
  const GraphTensor& residual = graph.tensors[static_cast<size_t>(x)];
  std::map<int32_t, int32_t> visits_in_layer;
  std::multimap<int32_t, size_t> stages_before;  // source op -> visits staged just before it
  for (size_t v = 0; v < visits.size(); ++v) {
    Visit& visit = visits[v];
    const int32_t layer = graph.ops[static_cast<size_t>(visit.first)].layer;
    visit.tensor = builder.tensor(TensorRole::residual_rows, TensorCategory::residual, residual.dtype, capacity[v],
                                  residual.cols, layer, visits_in_layer[layer]++);
    stages_before.emplace(visit.stage_before, v);
  }
  for (int32_t i = 0; i < graph.op_count(); ++i) {
    for (auto [at, end] = stages_before.equal_range(i); at != end; ++at) {
      const Visit& visit = visits[at->second];
      GraphOp stage{.kind = OpKind::stage_rows};
      stage.out = {visit.tensor, 0}, stage.a = {x, visit.begin}, stage.rows = visit.rows;
      stage.group = graph.ops[static_cast<size_t>(visit.first)].group;
      builder.op(stage);
    }
    GraphOp op = graph.ops[static_cast<size_t>(i)];
    const int32_t v = visit_of[static_cast<size_t>(i)];
    if (v < 0) {
      builder.op(op);
      continue;
    }
    const Visit& visit = visits[static_cast<size_t>(v)];
    for (TensorRef* ref : refs_of(op))
      if (ref->tensor == x) *ref = {visit.tensor, ref->row - visit.begin};
    builder.op(op);
    if (i == visit.last && visit.writes) {
      GraphOp unstage{.kind = OpKind::unstage_rows};
      unstage.out = {x, visit.begin}, unstage.a = {visit.tensor, 0}, unstage.rows = visit.rows;
      unstage.group = op.group;
      builder.op(unstage);
    }
  }
  return std::move(builder).finish(graph.output);
}

}  // namespace mosaic
