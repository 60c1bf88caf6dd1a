// EngineOptions::streamed_layers = kAutoStreamedLayers on CUDA (docs/design/weight-staging.md,
// "Choosing the count at load"): with no budget nothing is streamed; under a budget the resident
// weights cannot meet, the engine streams layers by itself and generates the resident engine's
// tokens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "mem/cuda_arena.h"
#include "model/test_model.h"
#include "mosaic/engine.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

TEST(AutoStreaming, StreamsOnlyWhereTheBudgetAsksAndChangesNoToken) {
  if (!cuda_devices_visible()) GTEST_SKIP() << "no CUDA device";
  const fs::path dir = fs::temp_directory_path() / ("mosaic_auto_streaming_" + std::to_string(::getpid()));
  ModelConfig config = test_model_preset(Family::llada, "tiny");
  config.layers = 4, config.hidden = 256, config.heads = 4, config.kv_heads = 4, config.head_dim = 64;
  config.ffn = 1024;
  write_test_model(config, {.dtype = DType::bf16, .seed = 5}, dir);
  const auto resident = Engine::open(dir, {.device = "cuda"});
  EXPECT_EQ(resident->info().streamed_layers, 0);
  EXPECT_EQ(resident->info().streamed_weight_bytes, 0u);
  // Every byte of the weights and the workspace reserve, and 1 MiB: a step of the reference
  // length (the tiny model's context, at most 4,096 tokens) cannot fit beside resident weights.
  const uint64_t budget = resident->info().weight_bytes + (uint64_t{64} << 20) + (uint64_t{1} << 20);
  const auto streamed = Engine::open(dir, {.device = "cuda", .budget = budget});
  EXPECT_GT(streamed->info().streamed_layers, 0);
  EXPECT_GT(streamed->info().streamed_weight_bytes, 0u);
  GenerationOptions options;
  options.gen_length = 16, options.steps = 8, options.block_length = 16;
  GenerateRequest request;
  request.prompt_ids = {5, 17, 99, 3, 42};
  const std::vector<GenerateResult> expected = resident->generate({&request, 1}, options);
  const std::vector<GenerateResult> got = streamed->generate({&request, 1}, options);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].output_ids, expected[0].output_ids);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mosaic
