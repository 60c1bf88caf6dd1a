#include "serve/serve_metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace mosaic::serve {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(ServeMetrics, TheVllmFamilyCountsTokensAndFinishReasonsByModel) {
  ServeMetrics metrics(0, "tiny-llada", 256);
  RequestRecord record;
  record.queue_s = 0.5;
  record.first_token_s = 1.0;
  record.total_s = 4.0;
  metrics.answered("stop", 7, 4, record);    // per output token: (4 - 1) / 3 = 1 s
  metrics.answered("length", 3, 16, record);
  metrics.finished(Outcome::cancelled, RequestRecord{}, 2, 2, 0);
  metrics.set_load(3, 2);
  const std::string text = metrics.render();
  EXPECT_TRUE(has_line(text, "vllm:prompt_tokens_total{model_name=\"tiny-llada\"} 10")) << text;
  EXPECT_TRUE(has_line(text, "vllm:generation_tokens_total{model_name=\"tiny-llada\"} 20"));
  EXPECT_TRUE(has_line(text, "vllm:request_success_total{model_name=\"tiny-llada\",finished_reason=\"stop\"} 1"));
  EXPECT_TRUE(has_line(text, "vllm:request_success_total{model_name=\"tiny-llada\",finished_reason=\"length\"} 1"));
  EXPECT_TRUE(has_line(text, "vllm:request_success_total{model_name=\"tiny-llada\",finished_reason=\"abort\"} 1"));
  EXPECT_TRUE(has_line(text, "vllm:num_requests_waiting{model_name=\"tiny-llada\"} 3"));
  EXPECT_TRUE(has_line(text, "vllm:num_requests_running{model_name=\"tiny-llada\"} 2"));
  EXPECT_TRUE(has_line(text, "vllm:time_to_first_token_seconds_count{model_name=\"tiny-llada\"} 2"));
  EXPECT_TRUE(has_line(text, "vllm:time_to_first_token_seconds_sum{model_name=\"tiny-llada\"} 2"));
  // (4 - 1) / (4 - 1) = 1 and (4 - 1) / (16 - 1) = 0.2
  EXPECT_TRUE(has_line(text, "vllm:time_per_output_token_seconds_sum{model_name=\"tiny-llada\"} 1.2"));
  EXPECT_TRUE(has_line(text, "vllm:time_per_output_token_seconds_bucket{model_name=\"tiny-llada\",le=\"0.2\"} 1"));
  EXPECT_TRUE(has_line(text, "vllm:e2e_request_latency_seconds_sum{model_name=\"tiny-llada\"} 8"));
  EXPECT_TRUE(has_line(text, "vllm:request_queue_time_seconds_sum{model_name=\"tiny-llada\"} 1"));
  EXPECT_TRUE(has_line(text, "vllm:request_inference_time_seconds_sum{model_name=\"tiny-llada\"} 7"));
  // Token buckets 1, 2, 5, ..., 200 (up to the context of 256): 3 and 7 prompt tokens fall in le=5 and le=10.
  EXPECT_TRUE(has_line(text, "vllm:request_prompt_tokens_bucket{model_name=\"tiny-llada\",le=\"5\"} 1"));
  EXPECT_TRUE(has_line(text, "vllm:request_prompt_tokens_bucket{model_name=\"tiny-llada\",le=\"10\"} 2"));
  EXPECT_TRUE(has_line(text, "vllm:request_prompt_tokens_bucket{model_name=\"tiny-llada\",le=\"200\"} 2"));
  EXPECT_EQ(text.find("vllm:request_prompt_tokens_bucket{model_name=\"tiny-llada\",le=\"500\"}"), std::string::npos);
  // Mosaic's own figures are still there, unlabelled.
  EXPECT_TRUE(has_line(text, "mosaic_requests_total{outcome=\"cancelled\"} 1"));
}

TEST(ServeMetrics, GuardRefusalsAreCountedByStatus) {
  ServeMetrics metrics(0);
  metrics.refused(408);
  metrics.refused(408);
  metrics.refused(413);
  const std::string text = metrics.render();
  EXPECT_TRUE(has_line(text, "mosaic_http_refusals_total{status=\"408\"} 2")) << text;
  EXPECT_TRUE(has_line(text, "mosaic_http_refusals_total{status=\"413\"} 1"));
}

}  // namespace
}  // namespace mosaic::serve
