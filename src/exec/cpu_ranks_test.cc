// Tensor-parallel ranks behind the CPU runner: the same predictions as one rank whether the step is
// unchunked or chunked under a per-rank budget, each rank holding its share of the weights.
#include "exec/cpu_ranks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/error.h"
#include "exec/step_runner.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

class CpuRanksTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ModelConfig config = test_model_preset(Family::llada, "tiny");  // 4 heads, FFN 768, vocabulary 1024
    const fs::path dir = fs::temp_directory_path() / ("mosaic_cpu_ranks_test_" + std::to_string(::getpid()));
    write_test_model(config, {.dtype = DType::bf16, .seed = 9, .progress = {}}, dir);
    model_ = Model::load(dir).release();
    fs::remove_all(dir);
  }
  static void TearDownTestSuite() { delete model_; }

  static StepOutput run(CpuStepRunner& runner, bool keep_logits = false, int length = 96) {
    std::mt19937 rng(4);
    static std::vector<int32_t> canvas;
    canvas.clear();
    for (int p = 0; p < length; ++p) canvas.push_back(static_cast<int32_t>(rng() % 1000));
    static const std::vector<int32_t> rows = {95, 3, 40, 41, 42, 60};
    StepInput input;
    input.sequences = {SequenceRows{canvas, rows}};
    input.keep_logits = keep_logits;
    for (const int32_t r : rows) {
      HeadRowSampling s;
      s.seed = 11, s.position = static_cast<uint32_t>(r), s.choice_inv_temperature = 1.0;
      input.sampling.push_back(s);
    }
    return runner.run(input);
  }

  static Model* model_;
};
Model* CpuRanksTest::model_ = nullptr;

void expect_same_predictions(const StepOutput& got, const StepOutput& want) {
  ASSERT_EQ(got.values.size(), want.values.size());
  for (size_t i = 0; i < got.values.size(); ++i)
    EXPECT_NEAR(got.values[i], want.values[i], 1e-4 * (1 + std::abs(want.values[i]))) << "value " << i;
  for (size_t r = 0; r < got.values.size() / kHeadStatCount; ++r)
    EXPECT_EQ(got.values[r * kHeadStatCount + kHeadChosen], want.values[r * kHeadStatCount + kHeadChosen]);
}

TEST_F(CpuRanksTest, RanksPredictAsOneChunkedOrNot) {
  CpuStepRunner one(*model_);
  const StepOutput want = run(one);
  CpuStepRunner two(*model_, std::nullopt, CpuStepRunner::kCpuCachePageRows, 2);
  const StepOutput unchunked = run(two);
  EXPECT_EQ(unchunked.chunks.extra_chunks(), 0);
  expect_same_predictions(unchunked, want);
  // A rank's budget below its unchunked peak: the search chunks the rank's graph.
  CpuStepRunner tight(*model_, unchunked.planned_peak * 2 / 3, CpuStepRunner::kCpuCachePageRows, 2);
  const StepOutput chunked = run(tight);
  EXPECT_GT(chunked.chunks.extra_chunks(), 0) << chunked.chunks.to_string();
  EXPECT_LE(chunked.planned_peak, unchunked.planned_peak * 2 / 3);
  expect_same_predictions(chunked, want);
  // A rank's activations: narrower Q, K, V and FFN than one device's, the residual rows the same.
  EXPECT_LT(unchunked.planned_peak, want.planned_peak);
}

TEST_F(CpuRanksTest, LogitsComeBackOverTheWholeVocabulary) {
  CpuStepRunner one(*model_);
  CpuStepRunner four(*model_, std::nullopt, CpuStepRunner::kCpuCachePageRows, 4);
  const StepOutput want = run(one, true), got = run(four, true);
  EXPECT_EQ(got.cols, 1024);
  ASSERT_EQ(got.values.size(), want.values.size());
  for (size_t i = 0; i < got.values.size(); ++i)
    EXPECT_NEAR(got.values[i], want.values[i], 1e-4 * (1 + std::abs(want.values[i]))) << "logit " << i;
}

TEST_F(CpuRanksTest, EachRankHoldsItsShareOfTheWeights) {
  CpuStepRunner one(*model_);
  CpuStepRunner four(*model_, std::nullopt, CpuStepRunner::kCpuCachePageRows, 4);
  const uint64_t whole = one.memory_setup().fixed_bytes, share = four.memory_setup().fixed_bytes;
  EXPECT_GT(share, whole / 4);  // the norms are on every rank
  EXPECT_LT(share, whole / 4 + whole / 50);
  EXPECT_EQ(four.memory_setup().cache_page_bytes, one.memory_setup().cache_page_bytes / 4);
}

}  // namespace
}  // namespace mosaic

namespace mosaic {
namespace {

class CpuContextRanksTest : public CpuRanksTest {};

TEST_F(CpuContextRanksTest, RanksOfRowsPredictAsOneChunkedOrNot) {
  CpuStepRunner one(*model_);
  const StepOutput want = run(one);
  CpuStepRunner three(*model_, std::nullopt, CpuStepRunner::kCpuCachePageRows, 1, 3);
  const StepOutput unchunked = run(three);
  EXPECT_EQ(unchunked.chunks.extra_chunks(), 0);
  expect_same_predictions(unchunked, want);
  // A rank holds a third of x, Q and the FFN rows, all of K and V.
  EXPECT_LT(unchunked.planned_peak, want.planned_peak);
  // A longer step under a rank's budget below its unchunked peak: chunked, the same predictions.
  const StepOutput long_want = run(one, false, 768), long_unchunked = run(three, false, 768);
  CpuStepRunner tight(*model_, long_unchunked.planned_peak * 95 / 100, CpuStepRunner::kCpuCachePageRows, 1, 3);
  const StepOutput chunked = run(tight, false, 768);
  EXPECT_GT(chunked.chunks.extra_chunks(), 0) << chunked.chunks.to_string();
  expect_same_predictions(chunked, long_want);
  const StepOutput logits_one = run(one, true), logits_three = run(three, true);
  ASSERT_EQ(logits_three.values.size(), logits_one.values.size());
  for (size_t i = 0; i < logits_one.values.size(); ++i)
    EXPECT_NEAR(logits_three.values[i], logits_one.values[i], 1e-4 * (1 + std::abs(logits_one.values[i])));
}

TEST_F(CpuContextRanksTest, RefusesTheCacheAndTensorParallelismBesideIt) {
  CpuStepRunner two(*model_, std::nullopt, CpuStepRunner::kCpuCachePageRows, 1, 2);
  try {
    two.reserve_cache(64);
    FAIL() << "a cache under context parallelism";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("the KV cache is not supported with context parallelism yet"));
  }
  EXPECT_THROW(CpuStepRunner(*model_, std::nullopt, CpuStepRunner::kCpuCachePageRows, 2, 2), Error);
}

}  // namespace
}  // namespace mosaic
