// The residual stream in host memory (issue 26, "one plan over two memories"): at long L the
// residual stream x (T x hidden) is a third of what a step keeps on the device (beside K and V),
// yet each chunk's ops touch only their own rows of it. This pass moves x to pinned host memory
// and gives each visit of its rows a residual_rows tensor in the arena:
//
//   stage_rows    x_rows[v] = x[rows of v]       (host -> device, one visit ahead of use)
//   the visit's ops, reading and adding into x_rows[v] instead of x
//   unstage_rows  x[rows of v] = x_rows[v]       (device -> host, where the visit wrote)
//
// A visit begins at a norm of rows of x and holds the ops after it that address those rows: a K/V
// chunk's norm, a query chunk's norm and output projection, an FFN chunk's norm and down
// projection (or its expert group). A visit of the same phase (group and layer) as the one before
// is staged while that one computes; the first visit of a phase waits for the previous phase's
// write-back (its rows may overlap). The planner places every x_rows tensor with the rest, so the
// staged visit and the one arriving are both counted in the step's peak.
// docs/design/residual-staging.md.
//
// Three ops address x as a whole and read or write the host rows directly (zero-copy): the
// embedding (writes every row once), the gather of the last layer's candidate rows, and the
// head's norm over gathered rows. Every other op sees device rows. The copies move values
// unchanged, so the step's results are the same bits as with x on the device.
#pragma once

#include "graph/graph.h"

namespace mosaic {

// `graph` with its residual stream (the TensorRole::residual tensor) in host memory and staged by
// visits as above. A graph without one is returned unchanged.
Graph stage_residual_rows(const Graph& graph);

// Whether `op` addresses a host tensor directly rather than through staged rows: the embedding,
// gather_rows, and a norm over gathered rows (`index`).
bool addresses_host_rows(const GraphOp& op);

}  // namespace mosaic
