#include "serve/prometheus_text.h"

#include <gtest/gtest.h>

namespace mosaic::serve {
namespace {

TEST(PrometheusText, CountersGaugesAndLabels) {
  PrometheusText out;
  out.family("mosaic_requests_total", "counter", "Requests by outcome.");
  out.sample("mosaic_requests_total", 3, {{"outcome", "completed"}});
  out.sample("mosaic_requests_total", 0, {{"outcome", "we\"ird\\\n"}});
  out.family("mosaic_step_par", "gauge", "PAR.");
  out.sample("mosaic_step_par", 1.25);
  EXPECT_EQ(out.text(),
            "# HELP mosaic_requests_total Requests by outcome.\n"
            "# TYPE mosaic_requests_total counter\n"
            "mosaic_requests_total{outcome=\"completed\"} 3\n"
            "mosaic_requests_total{outcome=\"we\\\"ird\\\\\\n\"} 0\n"
            "# HELP mosaic_step_par PAR.\n"
            "# TYPE mosaic_step_par gauge\n"
            "mosaic_step_par 1.25\n");
}

TEST(PrometheusText, HistogramBucketsAreCumulative) {
  Histogram h({0.25, 0.0625, 1});
  for (double v : {0.03125, 0.0625, 0.125, 0.5, 4.0}) h.observe(v);  // a value on a bound is in it
  PrometheusText out;
  out.histogram("mosaic_step_seconds", "Step latency.", h);
  EXPECT_EQ(out.text(),
            "# HELP mosaic_step_seconds Step latency.\n"
            "# TYPE mosaic_step_seconds histogram\n"
            "mosaic_step_seconds_bucket{le=\"0.0625\"} 2\n"
            "mosaic_step_seconds_bucket{le=\"0.25\"} 3\n"
            "mosaic_step_seconds_bucket{le=\"1\"} 4\n"
            "mosaic_step_seconds_bucket{le=\"+Inf\"} 5\n"
            "mosaic_step_seconds_sum 4.71875\n"
            "mosaic_step_seconds_count 5\n");
}

TEST(PrometheusText, ALabelledHistogramLabelsEverySampleBeforeLe) {
  Histogram h({1});
  h.observe(0.5);
  h.observe(2);
  PrometheusText out;
  out.histogram("vllm:e2e_request_latency_seconds", "Latency.", h, {{"model_name", "tiny"}});
  EXPECT_EQ(out.text(),
            "# HELP vllm:e2e_request_latency_seconds Latency.\n"
            "# TYPE vllm:e2e_request_latency_seconds histogram\n"
            "vllm:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"1\"} 1\n"
            "vllm:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"} 2\n"
            "vllm:e2e_request_latency_seconds_sum{model_name=\"tiny\"} 2.5\n"
            "vllm:e2e_request_latency_seconds_count{model_name=\"tiny\"} 2\n");
}

TEST(PrometheusText, SpecialValues) {
  EXPECT_EQ(format_sample_value(1.0 / 0.0), "+Inf");
  EXPECT_EQ(format_sample_value(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(format_sample_value(0.0 / 0.0), "NaN");
  EXPECT_EQ(format_sample_value(123456789012.0), "123456789012");
}

}  // namespace
}  // namespace mosaic::serve
