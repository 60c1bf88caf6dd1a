#include "mem/cpu_arena.h"

#include <gtest/gtest.h>

#include <cstring>

namespace mosaic {
namespace {

TEST(CpuArena, GrowsShrinksWithHysteresisAndStaysAligned) {
  CpuArena arena;
  EXPECT_EQ(arena.size(), 0u);
  arena.reserve(1000000);
  EXPECT_GE(arena.size(), 1000000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.base()) % 4096, 0u);
  std::memset(arena.base(), 0xab, 1000000);  // usable (ASan would object otherwise)
  const uint64_t grown = arena.size();
  arena.reserve(600000);                       // more than half: keep the block
  EXPECT_EQ(arena.size(), grown);
  arena.reserve(10000);                        // less than half: give memory back
  EXPECT_LT(arena.size(), grown);
  arena.reserve(2 << 20);
  EXPECT_EQ(arena.high_water(), uint64_t{2} << 20);
  arena.reserve(0);
  EXPECT_EQ(arena.size(), 0u);
}

}  // namespace
}  // namespace mosaic
