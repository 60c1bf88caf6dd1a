// Rotary position embedding in the half-split ("rotate_half", NeoX) layout used by the LLaDA,
// Dream and LLaDA-MoE checkpoints: for a head of dim d and j < d/2, with
//   inv_freq[j] = 1 / theta^(2j/d)  and  angle = float(position) * inv_freq[j]   (both in fp32,
// as the Hugging Face modeling code computes them),
//   y[j]       = x[j] * cos(angle) - x[j + d/2] * sin(angle)
//   y[j + d/2] = x[j + d/2] * cos(angle) + x[j] * sin(angle)
#pragma once

#include <cstdint>
#include <vector>

namespace mosaic::cpu {

// inv_freq[j] for j < head_dim / 2, computed in fp32 exactly as the reference code does.
std::vector<float> rope_inv_freq(int64_t head_dim, double theta);

// In place on x: [tokens, heads, head_dim], row stride x_stride (elements between tokens);
// positions[t] is token t's absolute position within its own sequence. With head_stride > 0 the
// heads lie head_stride apart and only the first head_dim values of each turn (partial rotary:
// LLaDA 2.x turns 64 of its 128; the rest pass through).
void rope_apply(int64_t tokens, int64_t heads, int64_t head_dim, float* x, int64_t x_stride,
                const int32_t* positions, const float* inv_freq, int64_t head_stride = 0);

}  // namespace mosaic::cpu
