#include "serve/batch_timeout.h"

#include <gtest/gtest.h>

#include <random>

namespace mosaic::serve {
namespace {

TEST(AutoBatchStart, LightLoadStartsAtOnce) {
  for (double load : {0.1, 0.5, 1.0}) {
    const BatchStartRule rule = auto_batch_start(load / 2.0, 2.0, 16);  // λS = load
    EXPECT_EQ(rule.fill, 1) << load;
    EXPECT_EQ(rule.timeout_s, 0) << load;
    EXPECT_TRUE(rule.should_start(1, 0));
  }
}

TEST(AutoBatchStart, WaitsForWhatArrivesInOneServiceTime) {
  // λ = 10/s, S = 0.45 s: 4.5 arrivals per service time -> k* = 5, T = 4 / 10 s.
  const BatchStartRule rule = auto_batch_start(10, 0.45, 16);
  EXPECT_EQ(rule.fill, 5);
  EXPECT_DOUBLE_EQ(rule.timeout_s, 0.4);
  EXPECT_FALSE(rule.should_start(4, 0.39));
  EXPECT_TRUE(rule.should_start(5, 0));
  EXPECT_TRUE(rule.should_start(1, 0.4));
  EXPECT_LT(rule.timeout_s, 0.45);
}

TEST(AutoBatchStart, HeavyLoadFillsTheBatchWithinOneServiceTime) {
  for (double rate : {40.0, 100.0, 1000.0}) {
    const double service = 1.0;
    const BatchStartRule rule = auto_batch_start(rate, service, 16);
    EXPECT_EQ(rule.fill, 16);
    EXPECT_DOUBLE_EQ(rule.timeout_s, 15 / rate);
    EXPECT_LT(rule.timeout_s, service);
  }
}

TEST(AutoBatchStart, UnknownInputsStartAtOnce) {
  EXPECT_EQ(auto_batch_start(0, 1, 8).timeout_s, 0);
  EXPECT_EQ(auto_batch_start(5, 0, 8).timeout_s, 0);
  EXPECT_EQ(auto_batch_start(1.0 / 0.0, 1, 8).fill, 1);
  const BatchStartRule fixed = fixed_batch_start(0.25, 8);
  EXPECT_EQ(fixed.fill, 8);
  EXPECT_EQ(fixed.timeout_s, 0.25);
}

TEST(LoadEstimator, TheSharedPartOfTheServiceTime) {
  LoadEstimator gpu, cpu, unvaried;
  for (LoadEstimator* e : {&gpu, &cpu, &unvaried}) e->batch_served(2.0);
  for (int i = 0; i < 40; ++i) {
    const int64_t batch = 1 + i % 8;
    gpu.step(batch, 0.010 + 0.0001 * batch);  // dispatch-bound: almost all shared
    cpu.step(batch, 0.001 + 0.010 * batch);   // compute-bound: almost nothing shared
    unvaried.step(4, 0.02);
  }
  EXPECT_NEAR(gpu.shared_service_seconds(), 2.0 * 0.010 / 0.01045, 1e-6);
  EXPECT_NEAR(cpu.shared_service_seconds(), 2.0 * 0.001 / 0.046, 1e-6);
  EXPECT_DOUBLE_EQ(unvaried.shared_service_seconds(), 2.0);
  // No gain from batching: even at 10 requests per service time, start at once.
  EXPECT_EQ(auto_batch_start(5.0, cpu.shared_service_seconds(), 16).timeout_s, 0);
  EXPECT_EQ(auto_batch_start(5.0, gpu.shared_service_seconds(), 16).fill, 10);
}

TEST(LoadEstimator, MeasuresPoissonArrivalsAndDecaysInSilence) {
  using Clock = LoadEstimator::Clock;
  LoadEstimator estimator(64);
  std::mt19937_64 rng(3);
  std::exponential_distribution<double> gap(20.0);  // 20 requests/s
  Clock::time_point t{};
  EXPECT_EQ(estimator.arrival_rate(t), 0);
  for (int i = 0; i < 64; ++i) {
    t += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng)));
    estimator.arrival(t);
  }
  EXPECT_NEAR(estimator.arrival_rate(t), 20.0, 4.0);
  EXPECT_LT(estimator.arrival_rate(t + std::chrono::seconds(10)), 5.0);

  estimator.batch_served(1.0);
  EXPECT_DOUBLE_EQ(estimator.service_seconds(), 1.0);
  estimator.batch_served(2.0);
  EXPECT_DOUBLE_EQ(estimator.service_seconds(), 1.3);
}

}  // namespace
}  // namespace mosaic::serve
