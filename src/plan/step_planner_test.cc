#include "plan/step_planner.h"

#include <gtest/gtest.h>

#include "model/test_model.h"
#include "plan/verify.h"

namespace mosaic {
namespace {

TEST(BucketRows, RoundsUpWithinSixPercent) {
  EXPECT_EQ(bucket_rows(1), 16);
  EXPECT_EQ(bucket_rows(16), 16);
  EXPECT_EQ(bucket_rows(17), 32);
  EXPECT_EQ(bucket_rows(256), 256);
  EXPECT_EQ(bucket_rows(257), 272);
  EXPECT_EQ(bucket_rows(4096), 4096);
  EXPECT_EQ(bucket_rows(4097), 4352);
  for (int64_t rows = 1; rows < 100000; rows += 37) {
    const int64_t bucket = bucket_rows(rows);
    EXPECT_GE(bucket, rows);
    if (rows > 256) {
      EXPECT_LE(bucket, rows + rows / 16 + 1) << rows;
    }
    EXPECT_EQ(bucket_rows(bucket), bucket);
  }
}

TEST(StepPlanner, CachesByBucketAndCoversTheStep) {
  const ModelConfig config = test_model_preset(Family::dream, "tiny");
  StepPlanner planner(config, {});
  const ChunkConfig chunks{.attention = 2, .ffn = 3};
  const Graph a = planner.instantiate(StepShape{{300, 20}, {100, 20}}, chunks);
  const Graph b = planner.instantiate(StepShape{{310}, {118}}, chunks);   // same buckets
  const Graph c = planner.instantiate(StepShape{{400}, {118}}, chunks);   // larger bucket
  const auto plan_a = planner.plan(a);
  const auto plan_b = planner.plan(b);
  EXPECT_EQ(plan_a, plan_b);
  EXPECT_NE(planner.plan(c), plan_a);
  EXPECT_EQ(planner.hits(), 1u);
  EXPECT_EQ(planner.misses(), 2u);
  for (const Graph* graph : {&a, &b}) {
    ASSERT_EQ(graph->tensors.size(), plan_a->graph.tensors.size());
    for (size_t t = 0; t < graph->tensors.size(); ++t) {
      EXPECT_LE(graph->tensors[t].bytes(), plan_a->usages[t].bytes);
      EXPECT_EQ(graph->tensors[t].first_op, plan_a->usages[t].first_op);
      EXPECT_EQ(graph->tensors[t].last_op, plan_a->usages[t].last_op);
    }
  }
}

TEST(StepPlanner, PlannedStepsVerifyAndReportMemory) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  for (const ChunkConfig& chunks : {ChunkConfig{}, ChunkConfig{2, 3, 4, 2}}) {
    const PlannedStep step = plan_graph(instantiate_step_graph(config, StepShape{{128}, {64}}, chunks, {}));
    EXPECT_EQ(verify_plan(step.usages, step.plan), std::nullopt);
    EXPECT_GE(step.memory.planned_peak, step.memory.lower_bound);
    EXPECT_GT(step.memory.par(), 1.0);
    EXPECT_GE(step.memory.inflation(), 1.0);
    EXPECT_LT(step.memory.inflation(), 1.10);  // greedy-by-size lands close to the bound
  }
}

}  // namespace
}  // namespace mosaic
