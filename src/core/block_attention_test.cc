#include "core/block_attention.h"

#include <gtest/gtest.h>

namespace mosaic {
namespace {

TEST(BlockAttention, FullAttentionSeesTheWholeCanvas) {
  const BlockLayout layout{BlockAttention::none, 5, 4, 13};
  for (int64_t q = 0; q < 13; ++q) EXPECT_EQ(layout.key_end(q), 13);
}

// P = 5, B = 4, L = 13: the prompt [0, 5) is one block, then [5, 9) and [9, 13).
TEST(BlockAttention, PromptBlockThenBlocksFromItsEnd) {
  const BlockLayout layout{BlockAttention::prompt, 5, 4, 13};
  const int64_t expected[13] = {5, 5, 5, 5, 5, 9, 9, 9, 9, 13, 13, 13, 13};
  for (int64_t q = 0; q < 13; ++q) EXPECT_EQ(layout.key_end(q), expected[q]) << q;
  EXPECT_EQ(layout.block_start(3), 0);
  EXPECT_EQ(layout.block_start(7), 5);
  EXPECT_EQ(layout.block_start(9), 9);
}

// P = 5, B = 4, L = 14: grid blocks [0, 4), [4, 8), [8, 12), [12, 14) (cut at L).
TEST(BlockAttention, AbsoluteBlocksFromPositionZero) {
  const BlockLayout layout{BlockAttention::absolute, 5, 4, 14};
  const int64_t expected[14] = {4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 14, 14};
  for (int64_t q = 0; q < 14; ++q) EXPECT_EQ(layout.key_end(q), expected[q]) << q;
  EXPECT_EQ(layout.block_start(5), 4);  // the prompt's tail shares its block with position 5
  EXPECT_EQ(layout.block_start(13), 12);
}

TEST(BlockAttention, DecodingBlocksFollowTheKind) {
  auto spans = [](const BlockLayout& layout) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const DecodingBlock& b : decoding_blocks(layout)) out.emplace_back(b.begin, b.end);
    return out;
  };
  using Spans = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(spans({BlockAttention::none, 5, 4, 13}), (Spans{{5, 9}, {9, 13}}));
  EXPECT_EQ(spans({BlockAttention::prompt, 5, 4, 13}), (Spans{{5, 9}, {9, 13}}));
  // The first block is the rest of the grid block holding the prompt's tail; the last is cut.
  EXPECT_EQ(spans({BlockAttention::absolute, 5, 4, 14}), (Spans{{5, 8}, {8, 12}, {12, 14}}));
  EXPECT_EQ(spans({BlockAttention::absolute, 8, 4, 16}), (Spans{{8, 12}, {12, 16}}));
}

}  // namespace
}  // namespace mosaic
