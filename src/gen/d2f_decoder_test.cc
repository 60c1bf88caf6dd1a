// D2F's state machine (docs/design/d2f-decoding.md) driven by a scripted "model": each candidate
// row's token and confidence come from a function of its position and the step. The whole
// generation against the independent NumPy reference is tests/reference/check_d2f_generate.py.
#include "gen/d2f_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "gen/generation_options.h"
#include "mosaic/generation_options.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Prediction {
  int32_t token = 5;
  double confidence = 0.5;
};
using Model = std::function<Prediction(int32_t position, int64_t step)>;

const ModelConfig& tiny(Family family = Family::llada) {
  static const ModelConfig llada = test_model_preset(Family::llada, "tiny");
  static const ModelConfig dream = test_model_preset(Family::dream, "tiny");
  return family == Family::dream ? dream : llada;
}

GenerationOptions characterization(int64_t gen_length, int64_t block) {
  GenerationOptions o;
  o.gen_length = gen_length, o.block_length = block;
  o.d2f = D2fOptions{};  // 0.5 / 0.9 / 1.0: the reference class's defaults
  return o;
}

// The head's statistics of one row that chose `p.token` with probability `p.confidence`.
void fill_stats(float* row, const Prediction& p) {
  row[kHeadChosen] = static_cast<float>(p.token);
  row[kHeadChosenLogit] = static_cast<float>(std::log(p.confidence));
  row[kHeadMax] = row[kHeadChosenLogit];
  row[kHeadArgmax] = row[kHeadChosen];
  row[kHeadLogSumExp] = 0;
  row[kHeadSecondId] = -1;
}

// Runs the decoder to its end; calls `each` after every step.
void run(D2fDecoder& d, const Model& model, const std::function<void(const DecoderStep&)>& each = {}) {
  std::vector<float> stats;
  while (!d.finished()) {
    const DecoderStep& step = d.prepare();
    if (each) each(step);
    if (step.candidates.empty()) {
      d.commit(nullptr);
      continue;
    }
    stats.assign(step.candidates.size() * kHeadStatCount, 0.0f);
    for (size_t i = 0; i < step.candidates.size(); ++i)
      fill_stats(stats.data() + i * kHeadStatCount, model(step.candidates[i], d.steps_taken()));
    d.commit(stats.data());
  }
}

D2fDecoder make(GenerationOptions o, int64_t prompt = 5, Family family = Family::llada) {
  validate_generation_options(tiny(family), o);
  return D2fDecoder(tiny(family), std::vector<int32_t>(static_cast<size_t>(prompt), 7), o);
}

// Under skip_threshold 1.0 nothing passes the strict test: only fully activated blocks decode,
// one token a step, and block k + 1 activates once block k holds 29 of its 32 tokens. A request
// that creates n blocks takes 29 n + 4 steps (the characterization's 178 + 29 k for n = 6 + k).
TEST(D2fDecoder, CharacterizationSettingsTake29nPlus4Steps) {
  const int64_t prompt = 11, block = 32;
  for (int64_t n = 1; n <= 16; ++n) {
    D2fDecoder d = make(characterization(512, block), prompt);
    const int32_t eos = static_cast<int32_t>(tiny().eos_token_id);
    // EOS as block n's first token: accepted before block n is half decoded, so no block n + 1.
    const int32_t eos_at = static_cast<int32_t>(prompt + (n - 1) * block);
    run(d, [&](int32_t position, int64_t) { return Prediction{position == eos_at && n < 16 ? eos : 5, 0.5}; });
    EXPECT_EQ(d.blocks().size(), static_cast<size_t>(n)) << n;
    EXPECT_EQ(d.steps_taken(), 29 * n + 4) << n;
    EXPECT_EQ(d.forwards(), 29 * n + 3) << n;
    EXPECT_EQ(d.masked(), 0) << n;
    EXPECT_EQ(d.stopped_at_eos(), n < 16) << n;
    // Never-created blocks hold EOS.
    for (int64_t p = prompt + n * block; p < prompt + 512; ++p) ASSERT_EQ(d.canvas()[p], eos) << n;
  }
}

TEST(D2fDecoder, OneTokenAStepPerFullyActivatedBlockAndBlocksOverlapByThreeSteps) {
  D2fDecoder d = make(characterization(64, 32), 3);
  std::vector<int64_t> per_step;
  std::vector<float> stats;
  while (!d.finished()) {
    const DecoderStep& step = d.prepare();
    stats.assign(step.candidates.size() * kHeadStatCount, 0.0f);
    for (size_t i = 0; i < step.candidates.size(); ++i) fill_stats(stats.data() + i * kHeadStatCount, {5, 0.99});
    d.commit(step.candidates.empty() ? nullptr : stats.data());
    per_step.push_back(static_cast<int64_t>(d.last_committed().size()));
  }
  // Block 2 fully activates at step 30 (block 1 holds 29): steps 30-32 decode two tokens.
  ASSERT_EQ(per_step.size(), 29u * 2 + 4);
  for (size_t s = 0; s < per_step.size(); ++s) {
    const int64_t expected = s + 1 == per_step.size() ? 0 : (s >= 29 && s < 32) ? 2 : 1;
    EXPECT_EQ(per_step[s], expected) << "step " << s;
  }
}

TEST(D2fDecoder, SemiActivatedBlocksAcceptOnlyConfidentTokensFullyActivatedAtLeastTheBest) {
  GenerationOptions o = characterization(16, 8);
  o.d2f->skip_threshold = 0.9, o.d2f->block_add_threshold = 0.25, o.d2f->decoded_token_threshold = 1.0;
  D2fDecoder d = make(o, 4);
  // Step 0: block 1 [4, 12) alone, fully activated; nothing passes 0.9: its best (position 6) only.
  const DecoderStep& s0 = d.prepare();
  EXPECT_THAT(s0.candidates, ElementsAre(4, 5, 6, 7, 8, 9, 10, 11));
  std::vector<float> stats(8 * kHeadStatCount);
  const double conf0[] = {0.2, 0.3, 0.6, 0.6, 0.1, 0.2, 0.3, 0.4};  // ties: the lower position
  for (int i = 0; i < 8; ++i) fill_stats(stats.data() + i * kHeadStatCount, {20 + i, conf0[i]});
  d.commit(stats.data());
  EXPECT_THAT(d.last_committed(), ElementsAre(6));
  // Step 1: accept every > 0.9 (two of them); 3 of 8 decoded, block 2 not yet (0.25 needs 2: it
  // was 1 of 8 before the step).
  const DecoderStep& s1 = d.prepare();
  ASSERT_EQ(s1.candidates.size(), 7u);
  stats.assign(7 * kHeadStatCount, 0);
  const double conf1[] = {0.95, 0.5, 0.91, 0.85, 0.2, 0.2, 0.2};
  for (int i = 0; i < 7; ++i) fill_stats(stats.data() + i * kHeadStatCount, {30 + i, conf1[i]});
  d.commit(stats.data());
  EXPECT_THAT(d.last_committed(), ElementsAre(4, 7));
  // Step 2: block 2 [12, 20) is added (3/8 >= 0.25), semi-activated (block 1 is not fully decoded).
  const DecoderStep& s2 = d.prepare();
  ASSERT_EQ(d.blocks().size(), 2u);
  EXPECT_FALSE(d.blocks()[1].fully_activated);
  ASSERT_EQ(s2.candidates.size(), 5u + 8u);
  stats.assign(13 * kHeadStatCount, 0);
  for (int i = 0; i < 13; ++i) fill_stats(stats.data() + i * kHeadStatCount, {40 + i, i == 12 ? 0.99 : 0.3});
  d.commit(stats.data());
  // Block 1 takes its best (forced); semi-activated block 2 its one confident token (position 19).
  EXPECT_THAT(d.last_committed(), ElementsAre(5, 19));
}

TEST(D2fDecoder, ComputesWhatIsNotCachedAndCachesBlocksInOrder) {
  GenerationOptions o = characterization(24, 8);
  o.d2f->skip_threshold = 0.5, o.d2f->block_add_threshold = 0.5, o.d2f->decoded_token_threshold = 0.5;
  D2fDecoder d = make(o, 6);
  std::vector<std::pair<int64_t, int64_t>> rows;
  // Block 2 [14, 22) finishes at once (every token confident), before block 1 [6, 14) does.
  run(d, [](int32_t position, int64_t) { return Prediction{5, position >= 14 && position < 22 ? 0.9 : 0.1}; },
      [&](const DecoderStep& step) {
        if (!step.candidates.empty()) {
          EXPECT_TRUE(step.cached);
          EXPECT_EQ(step.layout.kind, BlockAttention::prompt);
          rows.emplace_back(step.begin, step.end);
        }
      });
  ASSERT_GE(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::pair<int64_t, int64_t>{0, 14}));  // the first forward: prompt + block 1
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i].first, rows[i - 1].first);  // the cache only grows
  EXPECT_EQ(rows[1].first, 6);  // the prompt is cached by the first forward
  EXPECT_EQ(d.cached_until(), 6 + 24 - 8);  // every block but the last was decoded before a forward
  EXPECT_EQ(d.masked(), 0);
  EXPECT_EQ(d.steps_taken(), d.forwards() + 1);
}

TEST(D2fDecoder, CacheNoneComputesTheWholeCanvasUnderTheSameMask) {
  GenerationOptions o = characterization(16, 8);
  o.cache = CacheMode::none;
  D2fDecoder d = make(o, 3);
  const DecoderStep& step = d.prepare();
  EXPECT_FALSE(step.cached);
  EXPECT_EQ(step.layout.kind, BlockAttention::prompt);
  EXPECT_EQ(step.layout.block, 8);
}

TEST(D2fDecoder, DreamComputesTheRowBeforeItsFirstCandidate) {
  GenerationOptions o = characterization(16, 8);
  o.d2f->skip_threshold = 0.5;
  D2fDecoder d = make(o, 4, Family::dream);
  run(d, [](int32_t, int64_t) { return Prediction{5, 0.9}; }, [&](const DecoderStep& step) {
    if (!step.candidates.empty()) {
      EXPECT_LE(step.begin, step.candidates.front() - 1);
    }
  });
  EXPECT_EQ(d.masked(), 0);
}

TEST(D2fDecoder, MaxStepsEndsTheRequestWhereItIs) {
  GenerationOptions o = characterization(64, 32);
  o.d2f->max_steps = 10;
  D2fDecoder d = make(o);
  run(d, [](int32_t, int64_t) { return Prediction{5, 0.5}; });
  EXPECT_EQ(d.steps_taken(), 10);
  EXPECT_EQ(d.masked(), 32 - 10);  // in block 1; block 2 was never created: EOS
}

std::string d2f_error(const std::function<void(GenerationOptions&)>& set, Family family = Family::llada) {
  GenerationOptions o = characterization(64, 32);
  set(o);
  try {
    validate_generation_options(tiny(family), o);
  } catch (const OptionError& e) {
    return e.option() + ": " + e.what();
  }
  return "accepted";
}

TEST(D2fOptions, WhatDoesNotApplyIsRefusedByName) {
  EXPECT_THAT(d2f_error([](auto& o) { o.threshold = 0.9; }), HasSubstr("threshold: D2F has its own"));
  EXPECT_THAT(d2f_error([](auto& o) { o.cache = CacheMode::prefix; }), HasSubstr("cache: cache prefix"));
  EXPECT_THAT(d2f_error([](auto& o) { o.cfg_scale = 1; }), HasSubstr("cfg_scale"));
  EXPECT_THAT(d2f_error([](auto& o) { o.block_length = 24; }), HasSubstr("multiple of block_length 24"));
  EXPECT_THAT(d2f_error([](auto& o) { o.d2f->skip_threshold = 1.5; }), HasSubstr("skip_threshold must be in [0, 1]"));
  EXPECT_THAT(d2f_error([](auto& o) { o.d2f->block_add_threshold = std::nan(""); }), HasSubstr("block_add_threshold"));
  EXPECT_THAT(d2f_error([](auto& o) { o.top_k = 3; }, Family::dream), HasSubstr("alg"));
  EXPECT_EQ(d2f_error([](auto& o) { o.steps = 100000; }), "accepted");  // steps does not apply
  GenerationOptions o = characterization(16, 0);
  validate_generation_options(tiny(), o);
  EXPECT_EQ(o.block_length, 16);  // 32, or the generation when shorter
  EXPECT_EQ(o.cache, CacheMode::block);
}

}  // namespace
}  // namespace mosaic
