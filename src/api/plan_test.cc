#include "mosaic/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mosaic {
namespace {

using ::testing::HasSubstr;

std::string error_of(PlanRequest request) {
  try {
    plan_step(request);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// Hand count for LLaDA-8B, bf16, one sequence of L tokens, unchunked: the FFN of a layer holds
// x [L, 4096], the FFN norm output [L, 4096], gate and up [L, 12288] each at the `up` projection,
// plus the int32 positions (read by every RoPE) and logit rows; the ids died after the embedding.
TEST(PlanStep, Llada8BPeakIsTheFfn) {
  const int64_t L = 4096;
  const PlanReport report = plan_step({.model = "llada-8b", .lengths = {L}, .candidates = {L / 2}});
  const uint64_t expected = 2ull * L * (4096 + 4096 + 12288 + 12288) + 4ull * L + 4ull * (L / 2);
  EXPECT_EQ(report.lower_bound, expected);
  EXPECT_EQ(report.activation_peak, report.lower_bound);
  EXPECT_EQ(report.weight_bytes, 2ull * (2 * 126464ull * 4096 + 4096 +
                                         32 * (4 * 4096ull * 4096 + 3 * 4096ull * 12288 + 2 * 4096)));
  EXPECT_THAT(report.peak_op_name, HasSubstr("linear(up)"));
  ASSERT_FALSE(report.live_at_peak.empty());
  EXPECT_EQ(report.live_at_peak[0].category, "ffn");
  EXPECT_EQ(report.timeline.size(), static_cast<size_t>(report.op_count));
  EXPECT_GT(report.par, 1.0);
}

TEST(PlanStep, ChunkingLowersThePeak) {
  PlanRequest request{.model = "dream-7b", .lengths = {8192}, .candidates = {4096}};
  const uint64_t unchunked = plan_step(request).activation_peak;
  request.ffn_chunks = 8;
  request.attention_chunks = 4;
  const uint64_t chunked = plan_step(request).activation_peak;
  EXPECT_LT(chunked * 2, unchunked);
}

TEST(PlanStep, SvgHasOneBandPerLiveCategory) {
  const PlanReport report = plan_step({.model = "llada-8b", .lengths = {512}, .candidates = {256}});
  const std::string svg = plan_timeline_svg(report);
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("planned peak"));
  size_t polygons = 0;
  for (size_t at = svg.find("<polygon"); at != std::string::npos; at = svg.find("<polygon", at + 1)) ++polygons;
  EXPECT_EQ(polygons, 8u);  // input residual norm query kv attention ffn head
}

TEST(PlanStep, BadRequests) {
  EXPECT_THAT(error_of({.model = "llama-70b", .lengths = {8}, .candidates = {4}}),
              HasSubstr("'llama-70b' is neither a preset"));
  EXPECT_THAT(error_of({.model = "llada-8b", .lengths = {0}, .candidates = {0}}),
              HasSubstr("sequence 0 has length 0"));
  EXPECT_THAT(error_of({.model = "llada-8b", .lengths = {8}, .candidates = {9}}),
              HasSubstr("9 candidate rows for 8 tokens"));
  EXPECT_THAT(error_of({.model = "llada-8b", .lengths = {8}, .candidates = {4}, .activations = "int8"}),
              HasSubstr("activation dtype 'int8'"));
  EXPECT_THAT(error_of({.model = "/nonexistent", .lengths = {8}, .candidates = {4}}),
              HasSubstr("neither a preset"));
}

}  // namespace
}  // namespace mosaic
