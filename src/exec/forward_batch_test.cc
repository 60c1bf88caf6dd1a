#include "exec/forward_batch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string error_of(const ModelConfig& config, std::vector<SequenceRows> batch) {
  try {
    pack_batch(config, batch);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(PackBatch, PacksOffsetsPositionsAndRows) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  const std::vector<int32_t> a = {5, 6, 7}, b = {8, 9}, rows_a = {0, 2}, rows_b = {1};
  const std::vector<SequenceRows> batch = {{a, rows_a}, {b, rows_b}};
  const PackedBatch packed = pack_batch(config, batch);
  EXPECT_THAT(packed.offsets, ElementsAre(0, 3, 5));
  EXPECT_THAT(packed.ids, ElementsAre(5, 6, 7, 8, 9));
  EXPECT_THAT(packed.positions, ElementsAre(0, 1, 2, 0, 1));
  EXPECT_THAT(packed.logit_rows, ElementsAre(0, 2, 4));
}

TEST(PackBatch, DreamReadsThePreviousRow) {
  const ModelConfig config = test_model_preset(Family::dream, "tiny");
  const std::vector<int32_t> a = {5, 6, 7}, b = {8, 9}, rows_a = {0, 1, 2}, rows_b = {0, 1};
  const std::vector<SequenceRows> batch = {{a, rows_a}, {b, rows_b}};
  EXPECT_THAT(pack_batch(config, batch).logit_rows, ElementsAre(0, 0, 1, 3, 3));
}

TEST(PackBatch, RejectsBadInput) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  const std::vector<int32_t> ok = {1, 2}, bad_id = {1, 1024}, negative = {-1}, rows = {0},
                             bad_rows = {2}, none = {};
  EXPECT_THAT(error_of(config, {{ok, rows}, {bad_id, rows}}),
              HasSubstr("sequence 1: token id 1024 at position 1 is outside the vocabulary [0, 1024)"));
  EXPECT_THAT(error_of(config, {{negative, rows}}), HasSubstr("token id -1"));
  EXPECT_THAT(error_of(config, {{ok, bad_rows}}),
              HasSubstr("sequence 0: requested row 2 is outside the sequence of length 2"));
  EXPECT_THAT(error_of(config, {{none, none}}), HasSubstr("sequence 0 is empty"));
  const std::vector<int32_t> twice = {1, 1};
  EXPECT_THAT(error_of(config, {{ok, twice}}), HasSubstr("sequence 0: row 1 is requested twice"));
  EXPECT_THAT(error_of(config, {}), HasSubstr("no sequences"));
}

}  // namespace
}  // namespace mosaic
