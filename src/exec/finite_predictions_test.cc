#include "exec/finite_predictions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "core/error.h"

namespace mosaic {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Fixture {
  std::vector<int32_t> ids{1, 2, 3, 4}, rows0{1, 3}, rows1{0};
  StepInput input;
  StepOutput output;
  Fixture() {
    input.sequences.push_back({ids, rows0});
    input.sequences.push_back({ids, rows1});
    output.cols = kHeadStatCount;
    output.values.assign(3 * kHeadStatCount, 0.5f);
    for (int r = 0; r < 3; ++r) output.values[r * kHeadStatCount + kHeadChosen] = 7;
  }
};

std::string error_of(const Fixture& f) {
  try {
    check_predictions_finite(f.input, f.output, 16);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(FinitePredictions, FiniteStatisticsPass) {
  Fixture f;
  EXPECT_EQ(error_of(f), "");
}

TEST(FinitePredictions, NamesTheRowWhoseLogSumExpIsNotFinite) {
  for (const float bad : {kNaN, kInf}) {
    Fixture f;
    f.output.values[2 * kHeadStatCount + kHeadLogSumExp] = bad;  // the third row: sequence 1, position 0
    EXPECT_THAT(error_of(f), ::testing::HasSubstr("position 0 of sequence 1 is not finite"));
  }
}

TEST(FinitePredictions, NoChosenTokenIsAnError) {
  Fixture f;
  f.output.values[1 * kHeadStatCount + kHeadChosen] = -1;  // argmax over NaN logits
  EXPECT_THAT(error_of(f), ::testing::HasSubstr("position 3 of sequence 0"));
}

TEST(FinitePredictions, KeptLogitsAndDeviceCommits) {
  Fixture f;
  f.output.cols = 16;
  f.output.values.assign(3 * 16, -2.0f);
  EXPECT_EQ(error_of(f), "");
  f.output.values[16 + 5] = kNaN;
  EXPECT_THAT(error_of(f), ::testing::HasSubstr("position 3 of sequence 0"));

  Fixture d;
  d.input.device_commit = {CommitRule{}, CommitRule{}};
  d.output.values.clear();
  d.output.committed = {{3, 1, 0.9}, {4, 0, 0.1}, {5, 1, 0.2}};
  EXPECT_EQ(error_of(d), "");
  d.output.committed[2].confidence = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(error_of(d), ::testing::HasSubstr("position 0 of sequence 1"));
  d.output.committed[2] = {-1, 1, 0.5};
  EXPECT_THAT(error_of(d), ::testing::HasSubstr("position 0 of sequence 1"));
}

TEST(FinitePredictions, MixedStepsCheckEachSequenceWhereItsResultIs) {
  // Sequence 0 committed on the device (its statistics rows hold nothing meaningful: NaN here),
  // sequence 1 returned statistics.
  Fixture f;
  f.input.device_commit = {CommitRule{}, std::nullopt};
  f.output.committed = {{3, 1, 0.9}, {4, 0, 0.1}, {}};
  for (int r = 0; r < 2; ++r) f.output.values[r * kHeadStatCount + kHeadLogSumExp] = kNaN;
  EXPECT_EQ(error_of(f), "");
  f.output.committed[1].token = -1;
  EXPECT_THAT(error_of(f), ::testing::HasSubstr("position 3 of sequence 0"));
}

}  // namespace
}  // namespace mosaic
