#include "mosaic/plan_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mosaic {
namespace {

TEST(PlanJson, ReportCarriesTheReportsNumbers) {
  const PlanReport report = plan_step({.model = "llada-8b", .lengths = {1024}, .candidates = {512}});
  const auto j = nlohmann::json::parse(plan_report_json(report));
  EXPECT_EQ(j["model"], "llada-8b");
  EXPECT_EQ(j["tokens"], 1024);
  EXPECT_EQ(j["candidates"], 512);
  EXPECT_EQ(j["activation_peak_bytes"].get<uint64_t>(), report.activation_peak);
  EXPECT_EQ(j["lower_bound_bytes"].get<uint64_t>(), report.lower_bound);
  EXPECT_EQ(j["total_bytes"].get<uint64_t>(), report.total_bytes());
  EXPECT_EQ(j["chunks"]["ffn"], 1);
  EXPECT_FALSE(j.contains("budget_bytes"));
  EXPECT_FALSE(j.contains("timeline"));
}

TEST(PlanJson, StreamedWeightsOnlyWhenStreamed) {
  PlanRequest request{.model = "llada-8b", .lengths = {1024}, .candidates = {512}};
  EXPECT_FALSE(nlohmann::json::parse(plan_report_json(plan_step(request))).contains("streamed_weights"));
  request.weights = "host";
  const PlanReport report = plan_step(request);
  const auto j = nlohmann::json::parse(plan_report_json(report));
  EXPECT_EQ(j["streamed_weights"]["placement"], "host");
  EXPECT_EQ(j["streamed_weights"]["layers"], 32);
  EXPECT_EQ(j["streamed_weights"]["host_weight_bytes"].get<uint64_t>(), report.host_weight_bytes);
  EXPECT_EQ(j["streamed_weights"]["device_weight_bytes"].get<uint64_t>(), report.device_weight_bytes);
  EXPECT_EQ(j["total_bytes"].get<uint64_t>(), report.total_bytes());
  EXPECT_GT(j["live_at_peak"]["weights"].get<uint64_t>(), 0u);
}

TEST(PlanJson, TimelineOnRequest) {
  const PlanReport report = plan_step({.model = "dream-7b", .lengths = {512}, .candidates = {256}});
  const auto j = nlohmann::json::parse(plan_report_json(report, /*with_timeline=*/true));
  ASSERT_EQ(j["timeline"].size(), report.timeline.size());
  EXPECT_EQ(j["op_names"].size(), report.op_names.size());
  EXPECT_EQ(j["categories"].size(), report.categories.size());
  EXPECT_EQ(j["timeline"][0].size(), report.categories.size());
}

TEST(PlanJson, LmaxNamesTheRequestAndThePlanAtLmax) {
  // A report as find_lmax writes it, without the search.
  PlanRequest request{.model = "llada-8b", .budget = uint64_t{24} << 30};
  LmaxReport lmax{.l_max = 2048, .steps_tried = 3};
  PlanRequest at = request;
  at.lengths = {2048};
  at.candidates = {1024};
  lmax.at_l_max = plan_step(at);
  const auto j = nlohmann::json::parse(lmax_report_json(lmax, request));
  EXPECT_EQ(j["model"], "llada-8b");
  EXPECT_EQ(j["budget_bytes"].get<uint64_t>(), uint64_t{24} << 30);
  EXPECT_EQ(j["l_max"], 2048);
  EXPECT_EQ(j["steps_tried"], 3);
  EXPECT_EQ(j["at_l_max"]["tokens"], 2048);
  EXPECT_EQ(j["at_l_max"]["budget_bytes"].get<uint64_t>(), uint64_t{24} << 30);
  lmax.l_max = 0;
  EXPECT_FALSE(nlohmann::json::parse(lmax_report_json(lmax, request)).contains("at_l_max"));
}

}  // namespace
}  // namespace mosaic
