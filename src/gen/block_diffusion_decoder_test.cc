// LLaDA 2.x's block diffusion state machine driven by a scripted "model" (each candidate's token
// and confidence a function of its position and the step): the grid-aligned blocks, the even
// schedule, the threshold-or-top-k rule, the block cache's computed rows, the stop at an EOS.
// Whole generations against the independent NumPy reference: tests/reference/check_llada2_generate.py.
#include "gen/block_diffusion_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "gen/dream_schedule.h"
#include "gen/generation_options.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Prediction {
  int32_t token = 5;
  double confidence = 0.5;
};
using Script = std::function<Prediction(int32_t position, int64_t step)>;

const ModelConfig& tiny() {
  static const ModelConfig config = test_model_preset(Family::llada2, "tiny");
  return config;
}

void fill_stats(float* row, const Prediction& p) {
  row[kHeadChosen] = static_cast<float>(p.token);
  row[kHeadChosenLogit] = static_cast<float>(std::log(p.confidence));
  row[kHeadMax] = row[kHeadChosenLogit];
  row[kHeadArgmax] = row[kHeadChosen];
  row[kHeadLogSumExp] = 0;
  row[kHeadSecondId] = -1;
}

// Runs to the end; returns each step's candidate count and committed count.
std::vector<std::pair<size_t, size_t>> run(BlockDiffusionDecoder& d, const Script& script,
                                           const std::function<void(const DecoderStep&)>& each = {}) {
  std::vector<std::pair<size_t, size_t>> trace;
  std::vector<float> stats;
  while (!d.finished()) {
    const DecoderStep& step = d.prepare();
    if (each) each(step);
    stats.assign(step.candidates.size() * kHeadStatCount, 0.0f);
    for (size_t i = 0; i < step.candidates.size(); ++i)
      fill_stats(stats.data() + i * kHeadStatCount, script(step.candidates[i], d.steps_taken()));
    d.commit(step.candidates.empty() ? nullptr : stats.data());
    trace.emplace_back(step.candidates.size(), d.last_committed().size());
  }
  return trace;
}

BlockDiffusionDecoder make(GenerationOptions o, int64_t prompt) {
  validate_generation_options(tiny(), o);
  return BlockDiffusionDecoder(tiny(), std::vector<int32_t>(static_cast<size_t>(prompt), 7), o);
}

GenerationOptions options(int64_t gen, int64_t block, int64_t steps, double threshold) {
  GenerationOptions o;
  o.gen_length = gen, o.block_length = block, o.steps = steps, o.threshold = threshold;
  return o;
}

// The reference's schedule of a block length over the steps, as the decoder takes it (llada_quota).
std::vector<int64_t> even_transfer_schedule(int64_t block, int64_t steps) {
  std::vector<int64_t> schedule;
  for (int64_t i = 0; i < steps; ++i) schedule.push_back(llada_quota(block, steps, i));
  return schedule;
}

TEST(EvenTransferSchedule, SplitsTheBlockWithTheRemainderFirst) {
  EXPECT_THAT(even_transfer_schedule(8, 3), ElementsAre(3, 3, 2));
  EXPECT_THAT(even_transfer_schedule(4, 6), ElementsAre(1, 1, 1, 1, 0, 0));
  EXPECT_THAT(even_transfer_schedule(32, 1), ElementsAre(32));
}

TEST(BlockDiffusionDecoder, TheCanvasRunsToTheGridAndTheFirstBlockHoldsThePromptsEnd) {
  // Prompt 10, 20 generated, blocks of 8: the grid ends at 32; blocks [10, 16), [16, 24), [24, 32).
  BlockDiffusionDecoder d = make(options(20, 8, 8, 1.0), 10);
  EXPECT_EQ(d.canvas().size(), 32u);
  EXPECT_EQ(d.generation_end(), 30);
  ASSERT_EQ(d.blocks().size(), 3u);
  EXPECT_EQ(d.blocks()[0].begin, 10);
  EXPECT_EQ(d.blocks()[0].end, 16);
  EXPECT_EQ(d.blocks()[2].end, 32);
}

TEST(BlockDiffusionDecoder, ThresholdOneFollowsTheSchedule) {
  // Nothing is above 1.0: each step commits its quota, 8 tokens over 3 steps as 3, 3, 2.
  BlockDiffusionDecoder d = make(options(16, 8, 3, 1.0), 8);
  const auto trace = run(d, [](int32_t, int64_t) { return Prediction{5, 0.9}; });
  ASSERT_EQ(trace.size(), 6u);
  for (size_t block = 0; block < 2; ++block) {
    EXPECT_EQ(trace[3 * block + 0].second, 3u);
    EXPECT_EQ(trace[3 * block + 1].second, 3u);
    EXPECT_EQ(trace[3 * block + 2].second, 2u);
  }
  EXPECT_EQ(d.masked(), 0);
}

TEST(BlockDiffusionDecoder, AllAboveTheThresholdWhenEnoughElseTheMostConfident) {
  // Positions 8..15: even ones at 0.99, odd at 0.5. k = 1 per step (8 steps): the first step
  // takes the four above 0.95, then one odd position a step, the lowest first on a tie.
  BlockDiffusionDecoder d = make(options(8, 8, 8, 0.95), 8);
  std::vector<std::vector<int32_t>> committed;
  std::vector<float> stats;
  while (!d.finished()) {
    const DecoderStep& step = d.prepare();
    stats.assign(step.candidates.size() * kHeadStatCount, 0.0f);
    for (size_t i = 0; i < step.candidates.size(); ++i)
      fill_stats(stats.data() + i * kHeadStatCount, {9, step.candidates[i] % 2 == 0 ? 0.99 : 0.5});
    d.commit(stats.data());
    committed.push_back(d.last_committed());
  }
  ASSERT_EQ(committed.size(), 5u);
  EXPECT_THAT(committed[0], ElementsAre(8, 10, 12, 14));
  EXPECT_THAT(committed[1], ElementsAre(9));
  EXPECT_THAT(committed[4], ElementsAre(15));
}

TEST(BlockDiffusionDecoder, TheBlockCacheComputesTheBlockAndTheOneBeforeAtItsFirstStep) {
  BlockDiffusionDecoder d = make(options(24, 8, 8, 1.0), 12);  // blocks [12,16), [16,24), [24,32), [32,36)
  std::vector<std::pair<int64_t, int64_t>> computed;
  run(d, [](int32_t, int64_t) { return Prediction{5, 0.5}; },
      [&](const DecoderStep& step) {
        ASSERT_TRUE(step.cached);
        computed.emplace_back(step.begin, step.end);
      });
  // Block 1 (grid block [8, 16) holds the prompt's end): from 0 at first, then from 8.
  EXPECT_EQ(computed.front(), (std::pair<int64_t, int64_t>{0, 16}));
  EXPECT_EQ(computed[1], (std::pair<int64_t, int64_t>{8, 16}));
  // Block [16, 24): its first step rewrites [8, 16) from its final tokens.
  EXPECT_EQ(computed[4], (std::pair<int64_t, int64_t>{8, 24}));
  EXPECT_EQ(computed[5], (std::pair<int64_t, int64_t>{16, 24}));
}

TEST(BlockDiffusionDecoder, AnEosEndsTheGenerationAfterItsBlock) {
  const int32_t eos = static_cast<int32_t>(tiny().eos_token_id);
  BlockDiffusionDecoder d = make(options(32, 8, 8, 1.0), 8);
  // Position 11 predicts EOS: block [8, 16) finishes, then nothing more is decoded.
  const auto trace = run(d, [&](int32_t p, int64_t) { return Prediction{p == 11 ? eos : 5, p == 11 ? 0.9 : 0.5}; });
  EXPECT_EQ(trace.size(), 8u);
  EXPECT_TRUE(d.stopped_at_eos());
  EXPECT_EQ(d.masked(), 0);
  EXPECT_EQ(d.canvas()[16], eos);
  EXPECT_EQ(d.canvas()[39], eos);
}

// LLaDA 2.1: once placed, a token predicted otherwise above editing_threshold is replaced; the
// block ends at the first post step that edits nothing, or after max_post_steps.
TEST(BlockDiffusionDecoder, TokenEditingReplacesPlacedTokensAndCountsPostSteps) {
  GenerationOptions o = options(4, 4, 4, 1.0);
  o.editing = TokenEditing{.editing_threshold = 0.8, .max_post_steps = 3, .num_to_transfer = 2};
  BlockDiffusionDecoder d = make(o, 4);  // one block [4, 8)
  std::vector<std::vector<int32_t>> changed;
  std::vector<size_t> candidates;
  std::vector<float> stats;
  int64_t step = 0;
  while (!d.finished()) {
    const DecoderStep& prepared = d.prepare();
    candidates.push_back(prepared.candidates.size());
    stats.assign(prepared.candidates.size() * kHeadStatCount, 0.0f);
    for (size_t i = 0; i < prepared.candidates.size(); ++i) {
      const int32_t p = prepared.candidates[i];
      // Steps 0, 1 fill two masks each with 5; from step 2 position 4 predicts 6 at 0.9 (an
      // edit at step 2, then none: its token is 6 already).
      const bool edit = step >= 2 && p == 4;
      fill_stats(stats.data() + i * kHeadStatCount, {edit ? 6 : 5, edit ? 0.9 : 0.5});
    }
    d.commit(stats.data());
    changed.push_back(d.last_committed());
    ++step;
  }
  // Fill, fill, edit (a post step), then a post step that edits nothing ends the block.
  ASSERT_EQ(changed.size(), 4u);
  EXPECT_THAT(changed[0], ElementsAre(4, 5));
  EXPECT_THAT(changed[1], ElementsAre(6, 7));
  EXPECT_THAT(changed[2], ElementsAre(4));
  EXPECT_TRUE(changed[3].empty());
  EXPECT_THAT(candidates, ElementsAre(4, 4, 4, 4));  // every position of the block, placed or not
  EXPECT_EQ(d.canvas()[4], 6);
  EXPECT_FALSE(d.device_commit_rule().has_value());
}

TEST(BlockDiffusionDecoder, TokenEditingStopsAfterMaxPostSteps) {
  GenerationOptions o = options(4, 4, 4, 1.0);
  o.editing = TokenEditing{.editing_threshold = 0.5, .max_post_steps = 2, .num_to_transfer = 4};
  BlockDiffusionDecoder d = make(o, 4);
  // Every step predicts a new token everywhere above the bar: it edits forever but for the cap.
  const auto trace = run(d, [](int32_t p, int64_t s) { return Prediction{static_cast<int32_t>(10 + p + s), 0.9}; });
  EXPECT_EQ(trace.size(), 3u);  // the fill, then 2 post steps
}

TEST(BlockDiffusionDecoder, OptionsAreTheReferencesAndOthersAreRefused) {
  GenerationOptions o;
  validate_generation_options(tiny(), o);
  EXPECT_EQ(o.block_length, 32);
  EXPECT_DOUBLE_EQ(*o.threshold, 0.95);
  EXPECT_EQ(o.cache, CacheMode::block);
  GenerationOptions factor;
  factor.factor = 1.0;
  EXPECT_THAT([&] { validate_generation_options(tiny(), factor); }, ::testing::Throws<OptionError>());
  GenerationOptions prefix;
  prefix.cache = CacheMode::prefix;
  try {
    validate_generation_options(tiny(), prefix);
    FAIL() << "prefix accepted";
  } catch (const OptionError& error) {
    EXPECT_EQ(error.option(), "cache");
    EXPECT_THAT(error.what(), HasSubstr("exact block cache"));
  }
  // Any block length and step count: none has to divide another.
  GenerationOptions odd = options(37, 5, 3, 0.9);
  validate_generation_options(tiny(), odd);
  validate_for_prompt(tiny(), 11, odd);
}

}  // namespace
}  // namespace mosaic
