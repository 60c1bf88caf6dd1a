// Which steps a runner may commit on the device (docs/design/device-commit.md), by what rule, and
// how a device's per-row outcome lands in the decoder. The whole generation against the host
// commit is batch_stepper_test.cc's (a runner that emulates the device) and, on a GPU,
// tests/gpu/device_commit_test.cc's.
#include "gen/sequence_decoder.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "gen/dream_schedule.h"
#include "gen/generation_options.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

using ::testing::ElementsAre;

// The rule of the first step of a decoder with these options (gen_length 16, steps 8 unless set).
std::optional<CommitRule> first_rule(Family family, const std::function<void(GenerationOptions&)>& set,
                                     size_t* candidates = nullptr) {
  static const ModelConfig llada = test_model_preset(Family::llada, "tiny");
  static const ModelConfig dream = test_model_preset(Family::dream, "tiny");
  const ModelConfig& config = family == Family::dream ? dream : llada;
  GenerationOptions options;
  options.gen_length = 16, options.steps = 8;
  set(options);
  validate_generation_options(config, options);
  SequenceDecoder decoder(config, {1, 2, 3}, options);
  const DecoderStep& step = decoder.prepare();
  if (candidates != nullptr) *candidates = step.candidates.size();
  return decoder.device_commit_rule();
}

const ModelConfig& tiny_llada() {
  static const ModelConfig config = test_model_preset(Family::llada, "tiny");
  return config;
}

// A tiny LLaDA decoder that unmasks 4 positions after the prompt {7, 8} in `steps` steps.
SequenceDecoder four_positions_in(int64_t steps) {
  GenerationOptions options;
  options.gen_length = 4, options.steps = std::min<int64_t>(steps, 4);
  validate_generation_options(tiny_llada(), options);
  // Validation refuses more steps than positions; the decoder still handles the steps without
  // candidates they would give (as Dream's schedule can give one), so tests may ask for them.
  options.steps = steps;
  return SequenceDecoder(tiny_llada(), {7, 8}, options);
}

TEST(DeviceCommitRule, LladaLowConfidenceIsTopKOfTheQuota) {
  size_t candidates = 0;
  const auto rule = first_rule(Family::llada, [](GenerationOptions& o) { o.temperature = 0.5; }, &candidates);
  ASSERT_TRUE(rule.has_value());
  EXPECT_EQ(rule->selection, CommitSelection::top_k);
  EXPECT_EQ(rule->confidence, ConfidenceKind::chosen_probability);
  EXPECT_EQ(rule->k, llada_quota(16, 8, 0));
  EXPECT_EQ(candidates, 16u);  // the whole block is ranked
}

TEST(DeviceCommitRule, ThresholdRulesRankTheChosenProbabilityInBothFamilies) {
  for (const Family family : {Family::llada, Family::dream}) {
    const auto rule = first_rule(family, [&](GenerationOptions& o) {
      o.threshold = 0.75, o.steps = 16;
      if (family == Family::dream) o.alg = DreamAlg::entropy;  // a rule ranks p(x0) whatever alg says
    });
    ASSERT_TRUE(rule.has_value()) << family_name(family);
    EXPECT_EQ(rule->selection, CommitSelection::threshold);
    EXPECT_EQ(rule->confidence, ConfidenceKind::chosen_probability);
    EXPECT_EQ(rule->threshold, 0.75);
  }
}

TEST(DeviceCommitRule, StepsThatUnmaskEveryCandidateAreTopKOfAll) {
  size_t candidates = 0;
  auto rule = first_rule(Family::llada, [](GenerationOptions& o) { o.remasking = Remasking::random; }, &candidates);
  ASSERT_TRUE(rule.has_value());
  EXPECT_EQ(rule->selection, CommitSelection::top_k);
  EXPECT_EQ(rule->k, static_cast<int64_t>(candidates));

  rule = first_rule(Family::dream, [](GenerationOptions& o) { o.alg = DreamAlg::origin, o.steps = 2; }, &candidates);
  ASSERT_GT(candidates, 0u);
  ASSERT_TRUE(rule.has_value());
  EXPECT_EQ(rule->k, static_cast<int64_t>(candidates));
}

TEST(DeviceCommitRule, DreamTopKRanksByItsAlgorithmsConfidence) {
  const std::vector<float> ts = dream_timesteps(8, 1e-3);
  const std::pair<DreamAlg, ConfidenceKind> algs[] = {{DreamAlg::maskgit_plus, ConfidenceKind::chosen_probability},
                                                      {DreamAlg::topk_margin, ConfidenceKind::top2_margin},
                                                      {DreamAlg::entropy, ConfidenceKind::negative_entropy}};
  for (const auto& [alg, kind] : algs) {
    const auto rule = first_rule(Family::dream, [&](GenerationOptions& o) { o.alg = alg, o.alg_temp = 0.0; });
    ASSERT_TRUE(rule.has_value()) << dream_alg_name(alg);
    EXPECT_EQ(rule->selection, CommitSelection::top_k);
    EXPECT_EQ(rule->confidence, kind) << dream_alg_name(alg);
    EXPECT_EQ(rule->k, dream_transfer_count(16, ts, 0));
  }
}

TEST(DeviceCommitRule, PathsTheHostMustRankHaveNone) {
  EXPECT_FALSE(first_rule(Family::llada, [](GenerationOptions& o) { o.factor = 1.0, o.steps = 16; }));
  EXPECT_FALSE(first_rule(Family::llada, [](GenerationOptions& o) { o.cfg_scale = 1.5; }));
  EXPECT_FALSE(first_rule(Family::dream, [](GenerationOptions& o) { o.alg = DreamAlg::entropy, o.alg_temp = 0.3; }));
  EXPECT_FALSE(first_rule(Family::dream, [](GenerationOptions& o) {
    o.alg = DreamAlg::maskgit_plus, o.top_p = 0.9, o.temperature = 1.0;
  }));
  EXPECT_FALSE(first_rule(Family::dream, [](GenerationOptions& o) {
    o.alg = DreamAlg::maskgit_plus, o.top_k = 5, o.temperature = 1.0;
  }));
}

TEST(DeviceCommitRule, AStepWithoutCandidatesHasNone) {
  // 4 positions over 8 steps: quotas 1, 1, 1, 1, then 0 (a step with no forward).
  SequenceDecoder decoder = four_positions_in(8);
  for (int step = 0; step < 4; ++step) {
    const size_t n = decoder.prepare().candidates.size();
    ASSERT_EQ(decoder.device_commit_rule()->k, 1);
    std::vector<CommittedRow> rows(n, CommittedRow{5, 0, 0.5});
    rows[0].committed = 1;
    decoder.commit_from_device(rows);
  }
  EXPECT_TRUE(decoder.prepare().candidates.empty());
  EXPECT_FALSE(decoder.device_commit_rule().has_value());
}

TEST(CommitFromDevice, UnmasksTheFlaggedRowsAndReportsThemInPositionOrder) {
  SequenceDecoder decoder = four_positions_in(2);
  ASSERT_THAT(decoder.prepare().candidates, ElementsAre(2, 3, 4, 5));
  ASSERT_EQ(decoder.device_commit_rule()->k, 2);
  const std::vector<CommittedRow> rows = {{11, 0, 0.1}, {12, 1, 0.9}, {13, 0, 0.2}, {14, 1, 0.4}};
  decoder.commit_from_device(rows);
  const int32_t mask = static_cast<int32_t>(tiny_llada().mask_token_id);
  EXPECT_THAT(decoder.canvas(), ElementsAre(7, 8, mask, 12, mask, 14));
  EXPECT_THAT(decoder.last_committed(), ElementsAre(3, 5));
  EXPECT_THAT(decoder.last_committed_confidence(), ElementsAre(0.9f, 0.4f));
  EXPECT_EQ(decoder.forwards(), 1);
  EXPECT_EQ(decoder.steps_taken(), 1);
  EXPECT_FALSE(decoder.finished());
}


// Infilling (docs/design/infilling.md): prompt + gen_length masks + suffix; the suffix is context.
TEST(Infilling, TheSuffixFollowsTheMasksAndIsNeverACandidate) {
  for (const Family family : {Family::llada, Family::dream}) {
    const ModelConfig config = test_model_preset(family, "tiny");
    GenerationOptions options;
    options.gen_length = 4, options.steps = 4;
    validate_generation_options(config, options);
    SequenceDecoder decoder(config, {7, 8}, options, {9, 10, 11});
    const int32_t m = static_cast<int32_t>(config.mask_token_id);
    EXPECT_THAT(decoder.canvas(), ElementsAre(7, 8, m, m, m, m, 9, 10, 11));
    EXPECT_EQ(decoder.generation_end(), 6);
    EXPECT_EQ(decoder.masked(), 4);
    const DecoderStep& step = decoder.prepare();
    ASSERT_FALSE(step.candidates.empty());
    for (const int32_t p : step.candidates) {
      EXPECT_GE(p, 2);
      EXPECT_LT(p, 6);
    }
    EXPECT_EQ(step.layout.length, 9);  // queries attend to the suffix
  }
}

TEST(Infilling, RefusedWhereItCannotWork) {
  const ModelConfig config = tiny_llada();
  GenerationOptions options;
  options.gen_length = 8, options.steps = 8, options.block_length = 4, options.cache = CacheMode::dual;
  validate_generation_options(config, options);
  EXPECT_THROW(validate_suffix(config, options, 3), OptionError);
  EXPECT_NO_THROW(validate_suffix(config, options, 0));
  ModelConfig block_causal = config;
  block_causal.block_attention = BlockAttention::prompt;
  GenerationOptions plain;
  plain.gen_length = 8, plain.steps = 8;
  try {
    validate_suffix(block_causal, plain, 3);
    ADD_FAILURE() << "a block-causal model infilled";
  } catch (const OptionError& error) {
    EXPECT_EQ(error.option(), "suffix");
    EXPECT_THAT(error.what(), ::testing::HasSubstr("block-causal"));
  }
}

// The committed token's log-probability is its logit minus the row's log-sum-exp; the top list is
// the row's max and runner-up (the fused head's statistics, written here by hand).
TEST(Logprobs, ACommittedTokensLogprobComesFromItsRowsStatistics) {
  GenerationOptions options;
  options.gen_length = 1, options.steps = 1, options.logprobs = true;
  validate_generation_options(tiny_llada(), options);
  SequenceDecoder decoder(tiny_llada(), {7, 8}, options);
  decoder.prepare();
  EXPECT_FALSE(decoder.device_commit_rule().has_value());  // the statistics must come back
  float stats[kHeadStatCount] = {};
  stats[kHeadChosen] = 5, stats[kHeadChosenLogit] = 1.0f, stats[kHeadMax] = 2.0f, stats[kHeadArgmax] = 6;
  stats[kHeadLogSumExp] = 3.0f, stats[kHeadSecond] = 1.0f, stats[kHeadSecondId] = 5;
  decoder.commit(stats);
  ASSERT_EQ(decoder.logprobs().size(), 1u);
  const TokenLogprob& lp = decoder.logprobs()[0];
  EXPECT_EQ(lp.position, 0);
  EXPECT_EQ(lp.token, 5);
  EXPECT_DOUBLE_EQ(lp.logprob, -2.0);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0], (std::pair<int32_t, double>{6, -1.0}));
  EXPECT_EQ(lp.top[1], (std::pair<int32_t, double>{5, -2.0}));
}

}  // namespace
}  // namespace mosaic
