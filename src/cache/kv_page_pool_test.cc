#include "cache/kv_page_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace mosaic {
namespace {

std::vector<int32_t> pages_of(const KvPagePool& pool, uint64_t id) {
  const auto span = pool.pages(id);
  return {span.begin(), span.end()};
}

TEST(KvPagePool, PagesForRoundsUpToWholePages) {
  const KvPagePool pool(16);
  EXPECT_EQ(pool.pages_for(0), 0);
  EXPECT_EQ(pool.pages_for(1), 1);
  EXPECT_EQ(pool.pages_for(16), 1);
  EXPECT_EQ(pool.pages_for(17), 2);
}

TEST(KvPagePool, SequencesTakeDistinctPagesAndGiveThemBack) {
  KvPagePool pool(16);
  const uint64_t a = pool.reserve(3), b = pool.reserve(2);
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(pages_of(pool, a), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(pages_of(pool, b), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(pool.used(), 5);
  EXPECT_EQ(pool.high_water(), 5);
  pool.release(a);
  EXPECT_FALSE(pool.holds(a));
  EXPECT_EQ(pool.used(), 2);
  EXPECT_EQ(pool.high_water(), 5);  // b still holds the pages above a's
  EXPECT_EQ(pool.free_below_high_water(), 3);
  // The lowest free pages go first; a new sequence needing more takes fresh ones above the top.
  EXPECT_EQ(pool.high_water_after(4), 6);
  const uint64_t c = pool.reserve(4);
  EXPECT_EQ(pages_of(pool, c), (std::vector<int32_t>{0, 1, 2, 5}));
  EXPECT_EQ(pool.high_water(), 6);
  pool.release(b);
  pool.release(c);
  EXPECT_EQ(pool.used(), 0);
  EXPECT_EQ(pool.high_water(), 0);  // nothing held: the backing may give everything back
  pool.release(c);                  // twice: nothing
  EXPECT_EQ(pool.sequences(), 0);
}

TEST(KvPagePool, TheTopShrinksAsTheHighestHoldersLeave) {
  KvPagePool pool(8);
  const uint64_t low = pool.reserve(2), high = pool.reserve(2);
  pool.release(high);
  EXPECT_EQ(pool.high_water(), 2);
  EXPECT_EQ(pool.free_below_high_water(), 0);
  pool.release(low);
  EXPECT_EQ(pool.high_water(), 0);
}

TEST(KvPagePool, AnEmptyReservationHoldsNoPages) {
  KvPagePool pool(8);
  const uint64_t id = pool.reserve(0);
  EXPECT_TRUE(pool.holds(id));
  EXPECT_TRUE(pool.pages(id).empty());
  EXPECT_EQ(pool.high_water(), 0);
}

}  // namespace
}  // namespace mosaic
