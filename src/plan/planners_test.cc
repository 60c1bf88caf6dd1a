// Planner tests in the style of TFLite's: a small graph with exact expected offsets (worked out
// by hand from the algorithm's steps), then randomized graphs checked by the verifier.
#include <gtest/gtest.h>

#include <random>

#include "plan/first_fit.h"
#include "plan/greedy_by_area.h"
#include "plan/greedy_by_size.h"
#include "plan/live_bytes.h"
#include "plan/verify.h"

namespace mosaic {
namespace {

// Nine tensors over nine ops (bytes, first op, last op); alignment 1 keeps the numbers legible.
const std::vector<TensorUsage> kNine = {
    {32, 0, 1}, {28, 1, 4}, {36, 2, 5}, {16, 3, 5}, {8, 4, 5},
    {64, 5, 7}, {10, 6, 8}, {40, 7, 8}, {16, 8, 8},
};

TEST(LiveBytes, PerOpAndLowerBound) {
  EXPECT_EQ(live_bytes_per_op(kNine, 9),
            (std::vector<uint64_t>{32, 60, 64, 80, 88, 124, 74, 114, 66}));
  EXPECT_EQ(live_bytes_lower_bound(kNine), 124u);
}

// Greedy by size, largest first: t5 t7 t2 t0 t1 t3 t8 t6 t4.
//
//  offset 0        32   60 64       100  116 124
//  op 0-1 [t0......]
//  op 1-4          [t1...]  [t2.........]                 t3 [100,116) ops 3-5
//  op 5-7 [t5...................]                         t4 [116,124) ops 4-5
//  op 7-8 [t8]              [t7.............]             t6 [104,114) ops 6-8
//
// It meets the lower bound (124) exactly.
TEST(GreedyBySize, ExactOffsets) {
  const MemoryPlan plan = plan_greedy_by_size(kNine, 1);
  EXPECT_EQ(plan.offsets, (std::vector<uint64_t>{0, 32, 64, 100, 116, 0, 104, 64, 0}));
  EXPECT_EQ(plan.peak_bytes, 124u);
  EXPECT_EQ(verify_plan(kNine, plan, 1), std::nullopt);
}

// Greedy by area (size x lifetime), largest first: t5 t2 t1 t7 t0 t3 t6 t8 t4. Also optimal.
TEST(GreedyByArea, ExactOffsets) {
  const MemoryPlan plan = plan_greedy_by_area(kNine, 1);
  EXPECT_EQ(plan.offsets, (std::vector<uint64_t>{28, 0, 64, 100, 116, 0, 104, 64, 0}));
  EXPECT_EQ(plan.peak_bytes, 124u);
  EXPECT_EQ(verify_plan(kNine, plan, 1), std::nullopt);
}

// First fit in birth order: t0 t1 ... t8. Early small tensors fragment the low addresses, so the
// 64-byte t5 has to go above t2: peak 160.
TEST(FirstFit, ExactOffsets) {
  const MemoryPlan plan = plan_first_fit(kNine, 1);
  EXPECT_EQ(plan.offsets, (std::vector<uint64_t>{0, 32, 60, 0, 16, 96, 0, 10, 50}));
  EXPECT_EQ(plan.peak_bytes, 160u);
  EXPECT_EQ(verify_plan(kNine, plan, 1), std::nullopt);
}

TEST(Planners, AlignmentRoundsSizesAndOffsets) {
  const std::vector<TensorUsage> usages = {{1, 0, 1}, {300, 1, 2}, {1, 2, 3}};
  for (const MemoryPlan& plan : {plan_greedy_by_size(usages), plan_first_fit(usages)}) {
    EXPECT_EQ(verify_plan(usages, plan), std::nullopt);
    for (uint64_t offset : plan.offsets) EXPECT_EQ(offset % kPlanAlignment, 0u);
    EXPECT_EQ(plan.peak_bytes, 256u + 512u);  // t0 and t2 share [0,256); t1 takes [256,768)
  }
}

TEST(Planners, ZeroSizedAndEmpty) {
  EXPECT_EQ(plan_greedy_by_size({}).peak_bytes, 0u);
  const std::vector<TensorUsage> usages = {{0, 0, 3}, {512, 1, 2}};
  const MemoryPlan plan = plan_greedy_by_size(usages);
  EXPECT_EQ(plan.peak_bytes, 512u);
  EXPECT_EQ(verify_plan(usages, plan), std::nullopt);
}

TEST(Verify, CatchesOverlapMisalignmentAndShortPeak) {
  const std::vector<TensorUsage> usages = {{256, 0, 2}, {256, 1, 3}};
  EXPECT_NE(verify_plan(usages, MemoryPlan{{0, 0}, 512}), std::nullopt);       // overlap
  EXPECT_NE(verify_plan(usages, MemoryPlan{{0, 300}, 1024}), std::nullopt);    // misaligned
  EXPECT_NE(verify_plan(usages, MemoryPlan{{0, 256}, 300}), std::nullopt);     // past the peak
  EXPECT_NE(verify_plan(usages, MemoryPlan{{0}, 512}), std::nullopt);          // not all placed
  EXPECT_EQ(verify_plan(usages, MemoryPlan{{256, 0}, 512}), std::nullopt);
  // Disjoint lifetimes may share bytes.
  const std::vector<TensorUsage> apart = {{256, 0, 1}, {256, 2, 3}};
  EXPECT_EQ(verify_plan(apart, MemoryPlan{{0, 0}, 256}), std::nullopt);
}

// Random graphs: both planners always produce valid plans, never below the bound.
TEST(Planners, RandomGraphsVerify) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    const int ops = 1 + static_cast<int>(rng() % 40);
    const int tensors = static_cast<int>(rng() % 60);
    std::vector<TensorUsage> usages;
    for (int t = 0; t < tensors; ++t) {
      const int32_t first = static_cast<int32_t>(rng() % ops);
      const int32_t last = first + static_cast<int32_t>(rng() % (ops - first));
      const uint64_t bytes = rng() % 4 == 0 ? rng() % 100 : (rng() % 64) * 1000 + 1;
      usages.push_back({bytes, first, last});
    }
    const uint64_t bound = live_bytes_lower_bound(usages);
    for (const MemoryPlan& plan :
         {plan_greedy_by_size(usages), plan_greedy_by_area(usages), plan_first_fit(usages)}) {
      ASSERT_EQ(verify_plan(usages, plan), std::nullopt) << "trial " << trial;
      EXPECT_GE(plan.peak_bytes, bound);
    }
  }
}

// A chain where each tensor lives for two ops (an op's input and output) is planned perfectly.
TEST(GreedyBySize, ChainMeetsLowerBound) {
  std::vector<TensorUsage> usages;
  for (int32_t op = 0; op < 50; ++op) usages.push_back({(op % 7 + 1) * 1024ull, op, op + 1});
  const MemoryPlan plan = plan_greedy_by_size(usages);
  EXPECT_EQ(verify_plan(usages, plan), std::nullopt);
  EXPECT_EQ(plan.peak_bytes, live_bytes_lower_bound(usages));
}

}  // namespace
}  // namespace mosaic
