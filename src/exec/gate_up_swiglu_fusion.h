// Where a step's gate product, up product and SwiGLU run as one fused product on the GPU
// (backend/cuda/gate_up_swiglu.h, docs/design/gate-up-swiglu.md).
//
// The graph keeps the three ops (the CPU executor runs them, and the planner sizes the gate and up
// tensors as before); the CUDA executor recognises them here and launches one kernel that writes
// silu(gate) * up where the SwiGLU op writes it — into the gate product's tensor — with the same
// bits, and leaves the up product's tensor unwritten.
#pragma once

#include <cstddef>

#include "graph/graph.h"

namespace mosaic {

// Whether graph.ops[index], [index + 1] and [index + 2] are one layer's gate product, its up
// product over the same rows of the same input, and the SwiGLU that writes silu(gate) * up into
// the gate product's tensor; neither product with a bias or accumulating, and the up product's
// lifetime ending at the SwiGLU (the fused kernel does not write it).
bool is_gate_up_swiglu(const Graph& graph, size_t index);

}  // namespace mosaic
