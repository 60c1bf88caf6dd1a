// Random checkpoints with the real naming scheme and a real-looking config.json, for tests and
// benchmarks (no real weights are reachable from CI). The presets llada-8b and dream-7b are the
// released architectures exactly, with random weights.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string_view>

#include "core/dtype.h"
#include "model/config.h"

namespace mosaic {

// Preset names: "tiny", "llada-8b" (LLaDA family only), "dream-7b" (Dream family only),
// "llada-moe-7b" (LLaDA-MoE only), "llada2-mini" and "llada2-flash" (LLaDA 2.x only).
// Throws mosaic::Error for an unknown name or a family/preset mismatch.
ModelConfig test_model_preset(Family family, std::string_view preset);

struct TestModelOptions {
  DType dtype = DType::bf16;
  int shards = 1;          // > 1 writes model-0000k-of-0000N.safetensors + the index
  uint64_t seed = 0;
  // Called after each tensor with (bytes written, total bytes).
  std::function<void(uint64_t, uint64_t)> progress;
};

// Writes config.json and safetensors into `out` (created if missing). Weights are
// deterministic in (seed, tensor, element): normal with std 1/sqrt(fan_in) for matrices,
// N(0, 1) for the embedding, 1 + 0.1 N(0, 1) for norm weights, 0.5 N(0, 1) for biases.
void write_test_model(const ModelConfig& config, const TestModelOptions& options,
                      const std::filesystem::path& out);

}  // namespace mosaic
