#include "plan/step_planner.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/test_model.h"
#include "plan/live_bytes.h"
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

// A residual stream in host memory (graph/residual_staging.h) takes no arena byte; its T rows
// leave the step's peak, two visits' rows at most take their place.
TEST(StepPlanner, AResidualInHostLeavesTheArenaForTwoVisitsOfRows) {
  ModelConfig config = test_model_preset(Family::llada, "tiny");
  config.layers = 3;
  GraphOptions options{.activations = DType::bf16, .head = HeadMode::stats};
  options.head_scratch_per_row = 64;
  ChunkConfig chunks{8, 8, 8, 1};
  const StepShape shape{{256}, {128}};
  const Graph device = instantiate_step_graph(config, shape, chunks, options);
  chunks.residual_in_host = true;
  const Graph host = instantiate_step_graph(config, shape, chunks, options);
  int32_t x = -1;
  for (size_t t = 0; t < host.tensors.size(); ++t)
    if (host.tensors[t].role == TensorRole::residual) x = static_cast<int32_t>(t);
  ASSERT_GE(x, 0);
  const PlannedStep planned = plan_graph(host);
  EXPECT_EQ(planned.usages[x].bytes, 0u);
  const uint64_t whole = device.tensors[x].bytes(), visit = device.tensors[x].row_bytes() * 32;
  const auto peak = [](const Graph& g) {
    const std::vector<uint64_t> live = live_bytes_per_op(usages_of(g), g.op_count());
    return *std::max_element(live.begin(), live.end());
  };
  EXPECT_LE(peak(host) + whole, peak(device) + 2 * visit);
  EXPECT_LT(peak(host), peak(device));
  EXPECT_LE(planned.plan.peak_bytes, plan_graph(device).plan.peak_bytes);
}

}  // namespace
}  // namespace mosaic
