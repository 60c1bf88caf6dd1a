#include "exec/replay_padding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "model/test_model.h"

namespace mosaic {
namespace {

using ::testing::ElementsAre;

namespace fs = std::filesystem;

HeadRowSampling sampling_at(uint32_t position, double inverse_temperature = 0) {
  HeadRowSampling s;
  s.seed = 11, s.step = 3, s.position = position, s.choice_inv_temperature = inverse_temperature;
  return s;
}

TEST(ReplayPadding, LladaTakesEveryComputedRowInPositionOrder) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  const std::vector<int32_t> ids(10, 1), rows = {5, 3};
  SequenceRows sequence{ids, rows};
  sequence.cache_id = 1, sequence.begin = 2, sequence.end = 8;
  StepInput input;
  input.sequences = {sequence};
  input.sampling = {sampling_at(5, 0.5), sampling_at(3, 0.25)};
  const auto padded = pad_candidates_for_replay(config, input);
  ASSERT_TRUE(padded.has_value());
  EXPECT_THAT(padded->input.sequences[0].rows, ElementsAre(2, 3, 4, 5, 6, 7));
  EXPECT_EQ(padded->padded_total, 6);
  EXPECT_THAT(padded->real_index[0], ElementsAre(3, 1));
  ASSERT_EQ(padded->input.sampling.size(), 6u);
  EXPECT_EQ(padded->input.sampling[1].choice_inv_temperature, 0.25);  // the real rows keep their own
  EXPECT_EQ(padded->input.sampling[3].choice_inv_temperature, 0.5);
  for (const size_t i : {0, 2, 4, 5}) {  // the first real row's sampling, at the padding's position
    EXPECT_EQ(padded->input.sampling[i].position, static_cast<uint32_t>(padded->input.sequences[0].rows[i]));
    EXPECT_EQ(padded->input.sampling[i].choice_inv_temperature, 0.5);
    EXPECT_EQ(padded->input.sampling[i].seed, 11u);
  }
  EXPECT_EQ(padded->input.sequences[0].begin, 2);
  EXPECT_EQ(padded->input.sequences[0].end, 8);
}

TEST(ReplayPadding, DreamTakesThePositionsWhoseHiddenRowIsComputed) {
  const ModelConfig config = test_model_preset(Family::dream, "tiny");
  const std::vector<int32_t> ids(10, 1), rows = {4};
  SequenceRows cached{ids, rows};
  cached.cache_id = 1, cached.begin = 2, cached.end = 6;  // position p reads row p - 1
  StepInput input;
  input.sequences = {cached};
  input.sampling = {sampling_at(4)};
  auto padded = pad_candidates_for_replay(config, input);
  ASSERT_TRUE(padded.has_value());
  EXPECT_THAT(padded->input.sequences[0].rows, ElementsAre(3, 4, 5, 6));
  EXPECT_THAT(padded->real_index[0], ElementsAre(1));

  // A full step: positions 0 and 1 both read row 0, so 0 is left out (one position per row).
  const std::vector<int32_t> short_ids(4, 1), first = {2}, zero = {0};
  input.sequences = {SequenceRows{short_ids, first}};
  input.sampling = {sampling_at(2)};
  padded = pad_candidates_for_replay(config, input);
  ASSERT_TRUE(padded.has_value());
  EXPECT_THAT(padded->input.sequences[0].rows, ElementsAre(1, 2, 3));
  EXPECT_THAT(padded->real_index[0], ElementsAre(1));
  input.sequences = {SequenceRows{short_ids, zero}};  // position 0 wanted: no padding
  input.sampling = {sampling_at(0)};
  EXPECT_FALSE(pad_candidates_for_replay(config, input).has_value());
}

TEST(ReplayPadding, DeviceCommitsKeepTheirRowsAndEmptySequencesStayEmpty) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  const std::vector<int32_t> ids(6, 1), rows_a = {1}, rows_b = {4}, none = {};
  StepInput input;
  input.sequences = {SequenceRows{ids, rows_a}, SequenceRows{ids, none}, SequenceRows{ids, rows_b}};
  input.sampling = {sampling_at(1), sampling_at(4)};
  input.device_commit = {CommitRule{}, std::nullopt, std::nullopt};
  const auto padded = pad_candidates_for_replay(config, input);
  ASSERT_TRUE(padded.has_value());
  EXPECT_THAT(padded->input.sequences[0].rows, ElementsAre(1));
  EXPECT_TRUE(padded->input.sequences[1].rows.empty());
  EXPECT_THAT(padded->input.sequences[2].rows, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(padded->padded_begin, ElementsAre(0, 1, 1));
  EXPECT_THAT(padded->real_index[0], ElementsAre(0));
  EXPECT_TRUE(padded->real_index[1].empty());
  EXPECT_THAT(padded->real_index[2], ElementsAre(4));
  EXPECT_EQ(padded->input.sampling.size(), 7u);
  EXPECT_EQ(padded->input.device_commit.size(), 3u);
}

TEST(ReplayPadding, DoesNotApplyToLogitsFullRowsOrLargeSteps) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  const std::vector<int32_t> ids(6, 1), some = {2}, all = {0, 1, 2, 3, 4, 5};
  StepInput input;
  input.sequences = {SequenceRows{ids, some}};
  input.sampling = {sampling_at(2)};
  input.keep_logits = true;
  EXPECT_FALSE(pad_candidates_for_replay(config, input).has_value());
  input.keep_logits = false;
  EXPECT_FALSE(pad_candidates_for_replay(config, input, 5).has_value());  // 6 rows > 5
  EXPECT_TRUE(pad_candidates_for_replay(config, input, 6).has_value());
  input.sequences = {SequenceRows{ids, all}};
  input.sampling.assign(6, sampling_at(0));
  EXPECT_FALSE(pad_candidates_for_replay(config, input).has_value());  // nothing to add
}

TEST(ReplayPadding, UnpadKeepsEachSequencesRealRows) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  const std::vector<int32_t> ids(3, 1), rows_a = {2}, rows_b = {0, 1};
  StepInput input;
  input.sequences = {SequenceRows{ids, rows_a}, SequenceRows{ids, rows_b}};
  input.sampling = {sampling_at(2), sampling_at(0), sampling_at(1)};
  const auto padded = pad_candidates_for_replay(config, input);
  ASSERT_TRUE(padded.has_value());
  ASSERT_EQ(padded->padded_total, 6);
  StepOutput output;
  output.cols = 2;
  for (int v = 0; v < 12; ++v) output.values.push_back(static_cast<float>(v));
  output.committed.resize(6);
  for (int r = 0; r < 6; ++r) output.committed[r].token = 100 + r;
  unpad_output(*padded, output);
  // Sequence 0: padded rows 0-2, its real row is row 2; sequence 1: padded rows 3-5, real 3 and 4.
  EXPECT_THAT(output.values, ElementsAre(4, 5, 6, 7, 8, 9));
  ASSERT_EQ(output.committed.size(), 3u);
  EXPECT_EQ(output.committed[0].token, 102);
  EXPECT_EQ(output.committed[1].token, 103);
  EXPECT_EQ(output.committed[2].token, 104);
}

// A padded step's real rows give what the unpadded step gives (the CPU runner, a tiny model):
// full and cached, greedy and sampled, the padding's outputs dropped.
TEST(ReplayPadding, PaddedStepsPredictTheRealRowsAsTheUnpaddedStep) {
  ModelConfig config = test_model_preset(Family::llada, "tiny");
  config.layers = 2;
  const fs::path dir = fs::temp_directory_path() / ("mosaic_replay_padding_test_" + std::to_string(::getpid()));
  write_test_model(config, {.dtype = DType::f32, .seed = 5, .progress = {}}, dir);
  const std::unique_ptr<Model> model = Model::load(dir);
  fs::remove_all(dir);
  for (const bool cached : {false, true}) {
    CpuStepRunner runner(*model);
    std::mt19937 rng(3);
    std::vector<std::vector<int32_t>> canvases(2);
    for (auto& canvas : canvases)
      for (int p = 0; p < 24; ++p) canvas.push_back(static_cast<int32_t>(rng() % config.vocab));
    const std::vector<int32_t> rows_a = {20, 17}, rows_b = {3};
    StepInput input;
    input.sequences = {SequenceRows{canvases[0], rows_a}, SequenceRows{canvases[1], rows_b}};
    std::vector<uint64_t> caches;
    if (cached) {
      for (SequenceRows& s : input.sequences) {
        caches.push_back(runner.reserve_cache(24));
        s.cache_id = caches.back(), s.begin = 0, s.end = 24;
      }
    }
    input.sampling = {sampling_at(20, 1.0), sampling_at(17, 1.0), sampling_at(3)};
    const StepOutput plain = runner.run(input);
    const auto padded = pad_candidates_for_replay(config, input);
    ASSERT_TRUE(padded.has_value());
    EXPECT_EQ(padded->padded_total, 48);
    StepOutput out = runner.run(padded->input);
    unpad_output(*padded, out);
    ASSERT_EQ(out.values.size(), plain.values.size());
    for (size_t i = 0; i < out.values.size(); ++i)
      EXPECT_NEAR(out.values[i], plain.values[i], 1e-4 * (1 + std::abs(plain.values[i]))) << "value " << i;
    for (int64_t r = 0; r < 3; ++r)
      EXPECT_EQ(out.values[r * kHeadStatCount + kHeadChosen], plain.values[r * kHeadStatCount + kHeadChosen]);
    for (const uint64_t id : caches) runner.release_cache(id);
  }
}

}  // namespace
}  // namespace mosaic
