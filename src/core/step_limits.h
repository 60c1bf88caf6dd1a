// Limits on the size of one denoising step that every module checks against.
#pragma once

#include <cstdint>

namespace mosaic {

// The most positions one step may hold, all sequences together: canvas positions and row indices
// are 32-bit in the kernels and the sampler, and with it every tensor's byte size fits in 64 bits
// for any real model's dimensions (graph/step_graph.cc checks it before a graph is built; the
// generation options check gen_length against it).
inline constexpr int64_t kMaxStepPositions = (int64_t{1} << 31) - 1;

}  // namespace mosaic
