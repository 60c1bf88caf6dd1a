// Cutting a packed batch into context-parallel ranks' parts: each rank's rows (ghosts past the
// end), its candidates in the batch's order, and the shapes its graph is built for.
#include "exec/context_parallel_batch.h"

#include <gtest/gtest.h>

namespace mosaic {
namespace {

TEST(ContextParallelBatch, EachRankGetsItsRowsAndTheCandidatesItHolds) {
  // Sequences of 6 and 4 rows (packed rows 0-5 and 6-9) over 3 ranks of 4 rows.
  PackedBatch packed;
  packed.offsets = {0, 6, 10};
  for (int32_t i = 0; i < 10; ++i) packed.ids.push_back(100 + i), packed.positions.push_back(i < 6 ? i : i - 6);
  packed.logit_rows = {5, 1, 9, 6};  // sequence 0: rows 5, 1; sequence 1: rows 9, 6
  const StepShape shape{{6, 4}, {2, 2}};
  const std::vector<ContextParallelPart> parts = split_for_context_parallel(shape, packed, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].batch.ids, (std::vector<int32_t>{100, 101, 102, 103}));
  EXPECT_EQ(parts[1].batch.positions, (std::vector<int32_t>{4, 5, 0, 1}));
  EXPECT_EQ(parts[2].batch.ids, (std::vector<int32_t>{108, 109, 0, 0}));  // two ghost rows
  EXPECT_EQ(parts[2].batch.tokens(), 4);
  EXPECT_EQ(parts[0].candidates, (std::vector<int64_t>{1}));
  EXPECT_EQ(parts[0].batch.logit_rows, (std::vector<int32_t>{1}));
  EXPECT_EQ(parts[1].candidates, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(parts[1].batch.logit_rows, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(parts[1].shape.candidates, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(parts[2].candidates, (std::vector<int64_t>{2}));
  EXPECT_EQ(parts[2].shape.lengths, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(parts[2].shape.candidates, (std::vector<int64_t>{0, 1}));
}

}  // namespace
}  // namespace mosaic
