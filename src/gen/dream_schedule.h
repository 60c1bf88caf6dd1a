// Dream's timestep schedule, bit for bit as PyTorch computes it on CUDA in float32
// (linspace(1, eps, steps + 1)), and the number of positions each step unmasks.
#pragma once

#include <cstdint>
#include <vector>

namespace mosaic {

// ts[k] for k = 0..steps: step = (eps - 1) / steps; fma(step, k, 1) for k < (steps + 1) / 2,
// else fma(-step, steps - k, eps); all float32, fused as PyTorch's CUDA kernel computes them.
std::vector<float> dream_timesteps(int64_t steps, double eps);

// Positions unmasked at step i of `steps` with `masked` masked positions:
// int(float32(masked) * float32(1 - s / t)) before the last step, all of them on the last.
int64_t dream_transfer_count(int64_t masked, const std::vector<float>& ts, int64_t step);

// The probability of unmasking a position at step i (alg="origin"): 1 - s / t, 1 on the last.
float dream_transfer_probability(const std::vector<float>& ts, int64_t step);

// LLaDA's per-block quota: with M masked positions at block start and S steps, step i unmasks
// M / S + (i < M % S).
int64_t llada_quota(int64_t masked_at_block_start, int64_t steps_per_block, int64_t step_in_block);

}  // namespace mosaic
