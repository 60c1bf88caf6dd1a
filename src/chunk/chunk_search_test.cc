#include "chunk/chunk_search.h"

#include <gtest/gtest.h>

#include "model/test_model.h"

namespace mosaic {
namespace {

// Brute force over every configuration with counts in [1, limit]: the fewest extra chunks that
// fit, or -1 when none does; with the last layer over candidates only or over every row, the
// fewer chunks, a tie to candidates only.
struct BruteForce {
  int64_t extra_chunks = -1;
  bool last_layer_all_rows = false;
};

BruteForce brute_force_minimum(const ModelConfig& config, const ChunkSearchRequest& request, int64_t limit) {
  BruteForce found;
  for (const bool all_rows : {false, true}) {
    int64_t best = -1;
    for (int64_t q = 1; q <= limit; ++q)
      for (int64_t a = 1; a <= limit; ++a)
        for (int64_t f = 1; f <= limit; ++f)
          for (int64_t h = 1; h <= limit; ++h) {
            const ChunkConfig chunks{q, a, f, h, all_rows};
            if (best >= 0 && chunks.extra_chunks() >= best) continue;
            const PlannedStep step =
                plan_graph(instantiate_step_graph(config, request.shape, chunks, request.options));
            if (step.memory.planned_peak <= request.activation_budget) best = chunks.extra_chunks();
          }
    if (best >= 0 && (found.extra_chunks < 0 || best < found.extra_chunks)) found = {best, all_rows};
  }
  return found;
}

struct Case {
  Family family;
  StepShape shape;
  HeadMode head;
};

class ChunkSearchMinimal : public ::testing::TestWithParam<Case> {};

TEST_P(ChunkSearchMinimal, MatchesBruteForce) {
  const Case& c = GetParam();
  const ModelConfig config = test_model_preset(c.family, "tiny");
  ChunkSearchRequest request{c.shape, {DType::f32, c.head}, 0, 1, 6};
  const uint64_t unchunked =
      plan_graph(instantiate_step_graph(config, c.shape, {}, request.options)).memory.planned_peak;
  int fitted = 0;
  for (const double fraction : {1.0, 0.8, 0.6, 0.45, 0.35, 0.25, 0.1}) {
    request.activation_budget = static_cast<uint64_t>(unchunked * fraction);
    const ChunkSearchResult result = search_chunks(config, request);
    const BruteForce brute = brute_force_minimum(config, request, request.max_chunks);
    const int64_t best = brute.extra_chunks;
    if (best < 0) {
      EXPECT_FALSE(result.fits) << "budget fraction " << fraction;
      EXPECT_GT(result.floor, 0u);
      continue;
    }
    ++fitted;
    ASSERT_TRUE(result.fits) << "budget fraction " << fraction << ": brute force fits with "
                             << best << " extra chunks";
    EXPECT_LE(result.planned_peak, request.activation_budget);
    EXPECT_EQ(result.chunks.extra_chunks(), best)
        << "budget fraction " << fraction << ": search chose " << result.chunks.to_string();
    EXPECT_EQ(result.chunks.last_layer_all_rows, brute.last_layer_all_rows)
        << "budget fraction " << fraction << ": search chose " << result.chunks.to_string();
  }
  EXPECT_GE(fitted, 3);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ChunkSearchMinimal,
    ::testing::Values(Case{Family::llada, StepShape{{96}, {48}}, HeadMode::stats},
                      Case{Family::llada, StepShape{{64}, {60}}, HeadMode::logits},
                      Case{Family::dream, StepShape{{50, 30}, {10, 30}}, HeadMode::stats},
                      Case{Family::dream, StepShape{{128}, {8}}, HeadMode::logits}));

TEST(ChunkSearch, UnchunkedWhenItFits) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  const ChunkSearchResult result =
      search_chunks(config, {StepShape{{64}, {32}}, {}, uint64_t{1} << 30, 1, 4096});
  EXPECT_TRUE(result.fits);
  EXPECT_EQ(result.chunks, ChunkConfig{});
  EXPECT_TRUE(result.steps.empty());
}

TEST(ChunkSearch, ReportsTheFloorWhenNothingFits) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  const ChunkSearchResult result = search_chunks(config, {StepShape{{64}, {32}}, {}, 1000, 1, 4096});
  EXPECT_FALSE(result.fits);
  // The floor still holds x, K and V of a layer: 3 x 64 x 256 fp32.
  EXPECT_GE(result.floor, 3u * 64 * 256 * 4);
}

TEST(ChunkSearch, Llada8BAt256kFitsTwentyFourGiB) {
  const ModelConfig config = test_model_preset(Family::llada, "llada-8b");
  const uint64_t gib = uint64_t{1} << 30;
  const uint64_t weights = 16032391168;  // bf16 LLaDA-8B
  ChunkSearchRequest request{StepShape{{262144}, {131072}}, {DType::bf16, HeadMode::stats},
                             24 * gib - weights - (64u << 20), 2u << 20, 4096};
  const ChunkSearchResult result = search_chunks(config, request);
  ASSERT_TRUE(result.fits) << "floor " << result.floor;
  EXPECT_LE(result.planned_peak, request.activation_budget);
  EXPECT_LT(result.probes, 400);
}

// Near the floor the candidates' gathered rows (1.4 GiB here) no longer fit beside x, K and V
// (8.25 GiB): only the last layer over every row does.
TEST(ChunkSearch, Llada8BAt352kFitsOnlyWithTheLastLayerOverEveryRow) {
  const ModelConfig config = test_model_preset(Family::llada, "llada-8b");
  const uint64_t gib = uint64_t{1} << 30;
  const uint64_t weights = 16032391168;
  ChunkSearchRequest request{StepShape{{360448}, {180224}}, {DType::bf16, HeadMode::stats},
                             24 * gib - weights - (64u << 20), 2u << 20, 4096};
  const ChunkSearchResult result = search_chunks(config, request);
  ASSERT_TRUE(result.fits) << "floor " << result.floor;
  EXPECT_TRUE(result.chunks.last_layer_all_rows) << result.chunks.to_string();
  EXPECT_LE(result.planned_peak, request.activation_budget);
}

TEST(ChunkSearch, Llada8BAt32kRunsItsLastLayerOnTheCandidatesUnchunked) {
  const ModelConfig config = test_model_preset(Family::llada, "llada-8b");
  const uint64_t gib = uint64_t{1} << 30;
  ChunkSearchRequest request{StepShape{{32768}, {16384}}, {DType::bf16, HeadMode::stats}, 6 * gib, 2u << 20, 4096};
  const ChunkSearchResult result = search_chunks(config, request);
  ASSERT_TRUE(result.fits) << "floor " << result.floor;
  EXPECT_EQ(result.chunks, ChunkConfig{});
}

}  // namespace
}  // namespace mosaic
