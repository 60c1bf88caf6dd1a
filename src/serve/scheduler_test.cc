// The scheduler on a tiny random model: concurrent requests get exactly their solo answers, in
// both batching modes; a full queue answers 429; a cancelled request frees its place; admission
// follows the plan under a budget; draining refuses new requests and finishes the rest.
#include "serve/scheduler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "testing/tiny_model_folder.h"

namespace mosaic::serve {
namespace {

namespace fs = std::filesystem;

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir() = testing_support::write_tiny_llada("mosaic_scheduler_test", 3);
  }
  static void TearDownTestSuite() { fs::remove_all(dir()); }
  static fs::path& dir() {
    static fs::path path;
    return path;
  }

  void SetUp() override { engine_ = Engine::open(dir(), {.device = "cpu"}); }

  GenerationOptions options(uint64_t seed, int64_t length = 16) const {
    GenerationOptions o;
    o.gen_length = length, o.steps = length / 2, o.block_length = length / 2, o.seed = seed;
    o.temperature = seed % 2 ? 0.9 : 0.0;
    return engine_->resolve_options(o);
  }
  static std::vector<int32_t> prompt(int length, int32_t first) {
    std::vector<int32_t> ids;
    for (int i = 0; i < length; ++i) ids.push_back((first + 17 * i) % 290);
    return ids;
  }
  // `count` requests at once, every other one streaming: each gets its solo answer.
  void expect_solo_answers(Scheduler& scheduler, int count, const std::function<GenerationOptions(int)>& options_of) {
    std::vector<std::shared_ptr<Ticket>> tickets;
    for (int i = 0; i < count; ++i) {
      std::vector<int32_t> ids;
      for (int k = 0; k < 3 + i; ++k) ids.push_back((7 * i + 17 * k + 1) % 290);
      tickets.push_back(scheduler.submit(ids, options_of(i), i % 2 == 0));
    }
    int64_t largest = 0;
    for (int i = 0; i < count; ++i) {
      tickets[i]->wait_done();
      ASSERT_FALSE(tickets[i]->error().has_value()) << tickets[i]->error()->what();
      EXPECT_EQ(tickets[i]->result()->output_ids, solo(tickets[i]->prompt_ids, tickets[i]->options)) << "request " << i;
      EXPECT_GE(tickets[i]->record().total_s, tickets[i]->record().queue_s);
      largest = std::max(largest, tickets[i]->record().largest_batch);
    }
    EXPECT_GT(largest, 1) << "the requests shared steps";
  }

  std::vector<int32_t> solo(const std::vector<int32_t>& ids, const GenerationOptions& o) const {
    const GenerateRequest request{"", false, ids};
    return engine_->generate(std::span(&request, 1), o).front().output_ids;
  }

  std::unique_ptr<Engine> engine_;
};

TEST_F(SchedulerTest, ContinuousBatchingGivesEachRequestItsSoloAnswer) {
  ServeMetrics metrics(0);
  Scheduler scheduler(*engine_, {}, metrics);
  expect_solo_answers(scheduler, 6, [&](int i) { return options(i, i % 3 == 0 ? 32 : 16); });
  EXPECT_EQ(metrics.count_of(Outcome::completed), 6u);
}

TEST_F(SchedulerTest, FixedBatchingStartsFullBatchesAndGivesTheSameAnswers) {
  ServeMetrics metrics(0);
  SchedulerOptions o;
  o.mode = BatchingMode::fixed;
  o.max_batch = 3;
  o.batch_timeout_s = 5.0;  // long: only a full batch starts early
  Scheduler scheduler(*engine_, o, metrics);
  expect_solo_answers(scheduler, 3, [&](int i) { return options(i); });
}

TEST_F(SchedulerTest, FixedBatchingTimeoutStartsAPartialBatch) {
  ServeMetrics metrics(0);
  SchedulerOptions o;
  o.mode = BatchingMode::fixed;
  o.max_batch = 8;
  o.batch_timeout_s = 0.2;
  Scheduler scheduler(*engine_, o, metrics);
  auto ticket = scheduler.submit(prompt(4, 1), options(1), false);
  ticket->wait_done();
  ASSERT_TRUE(ticket->result().has_value());
  EXPECT_GE(ticket->record().queue_s, 0.19);
  EXPECT_LT(ticket->record().queue_s, 2.0);
}

TEST_F(SchedulerTest, AFullQueueAnswers429AndLosesNothing) {
  ServeMetrics metrics(0);
  SchedulerOptions o;
  o.max_batch = 1;
  o.max_queue = 1;
  Scheduler scheduler(*engine_, o, metrics);
  std::vector<std::shared_ptr<Ticket>> accepted;
  int refused = 0;
  for (int i = 0; i < 4; ++i) {
    try {
      accepted.push_back(scheduler.submit(prompt(6, i), options(i, 64), false));
    } catch (const ApiError& error) {
      EXPECT_EQ(error.status, 429);
      EXPECT_EQ(error.code, "queue_full");
      ++refused;
    }
  }
  EXPECT_GE(refused, 1);
  for (auto& ticket : accepted) {
    ticket->wait_done();
    EXPECT_TRUE(ticket->result().has_value());
  }
  EXPECT_EQ(metrics.count_of(Outcome::completed), accepted.size());
}

TEST_F(SchedulerTest, ACancelledRequestFreesItsPlace) {
  ServeMetrics metrics(0);
  SchedulerOptions o;
  o.max_batch = 1;
  Scheduler scheduler(*engine_, o, metrics);
  auto first = scheduler.submit(prompt(8, 1), options(2, 256), true);
  auto second = scheduler.submit(prompt(8, 2), options(4), false);
  const Ticket::Progress progress = first->wait(0, std::chrono::seconds(30));  // it has started
  ASSERT_GE(progress.version, 1);
  first->cancel();
  first->wait_done();
  ASSERT_TRUE(first->error().has_value());
  EXPECT_EQ(first->error()->status, 499);
  second->wait_done();
  EXPECT_EQ(second->result()->output_ids, solo(second->prompt_ids, second->options));
  EXPECT_EQ(metrics.count_of(Outcome::cancelled), 1u);
  EXPECT_EQ(metrics.count_of(Outcome::completed), 1u);
}

TEST_F(SchedulerTest, AdmissionFollowsThePlanUnderABudget) {
  const uint64_t weights = engine_->info().weight_bytes;
  engine_ = Engine::open(dir(), {.device = "cpu", .budget = weights + (uint64_t{384} << 10)});
  const GenerationOptions o = options(0, 32);
  // How many such requests the plan admits together.
  auto session = engine_->start_batch();
  int fitting = 0;
  while (session->fit(40, o).fits && fitting < 64) session->add(prompt(40, fitting++), o);
  ASSERT_GE(fitting, 2);
  ASSERT_LT(fitting, 64);  // the budget binds

  ServeMetrics metrics(0);
  Scheduler scheduler(*engine_, {}, metrics);
  std::vector<std::shared_ptr<Ticket>> tickets;
  for (int i = 0; i < fitting + 3; ++i) tickets.push_back(scheduler.submit(prompt(40, 100 + i), o, false));
  int64_t largest = 0;
  for (auto& ticket : tickets) {
    ticket->wait_done();
    ASSERT_TRUE(ticket->result().has_value());
    largest = std::max(largest, ticket->record().largest_batch);
  }
  EXPECT_LE(largest, fitting);
  EXPECT_GE(largest, 2);
}

TEST_F(SchedulerTest, DrainingRefusesNewRequestsAndFinishesTheRest) {
  ServeMetrics metrics(0);
  Scheduler scheduler(*engine_, {}, metrics);
  auto running = scheduler.submit(prompt(5, 1), options(1, 32), false);
  scheduler.begin_drain();
  EXPECT_TRUE(scheduler.draining());
  try {
    scheduler.submit(prompt(5, 2), options(2), false);
    ADD_FAILURE() << "accepted while draining";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status, 503);
  }
  scheduler.wait_idle();
  ASSERT_TRUE(running->result().has_value());
  EXPECT_FALSE(running->result()->cancelled);
}

TEST_F(SchedulerTest, StoppingEndsEveryRequestWith503) {
  ServeMetrics metrics(0);
  SchedulerOptions o;
  o.max_batch = 1;
  auto scheduler = std::make_unique<Scheduler>(*engine_, o, metrics);
  auto a = scheduler->submit(prompt(5, 1), options(1, 512), false);
  auto b = scheduler->submit(prompt(5, 2), options(2, 512), false);
  scheduler->stop();
  for (auto& ticket : {a, b}) {
    ticket->wait_done();
    ASSERT_TRUE(ticket->error().has_value());
    EXPECT_EQ(ticket->error()->status, 503);
  }
}


TEST_F(SchedulerTest, AStopCheckEndsTheRequestAtTheStepItFires) {
  ServeMetrics metrics(0);
  Scheduler scheduler(*engine_, {}, metrics);
  int calls = 0;
  const GenerationOptions o = options(2, 16);  // 2 blocks of 8 in 8 steps
  const auto ticket = scheduler.submit(prompt(5, 3), o, false, {}, [&](std::span<const int32_t>) { return ++calls == 2; });
  ticket->wait_done();
  ASSERT_FALSE(ticket->error().has_value()) << ticket->error()->what();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(ticket->result()->steps, 2);  // not the 8 it would have run
  EXPECT_TRUE(ticket->result()->cancelled);  // unfinished in the session's terms: masks are left
  const std::vector<int32_t> whole = solo(ticket->prompt_ids, o);
  // What it committed so far is what the whole run commits at those positions.
  for (size_t p = 0; p < whole.size(); ++p) {
    if (ticket->result()->output_ids[p] != engine_->info().mask_token_id) {
      EXPECT_EQ(ticket->result()->output_ids[p], whole[p]) << p;
    }
  }
}

TEST_F(SchedulerTest, ASuffixIsContextAfterTheSpan) {
  ServeMetrics metrics(0);
  Scheduler scheduler(*engine_, {}, metrics);
  const GenerationOptions o = options(4, 8);
  const std::vector<int32_t> suffix = prompt(4, 9);
  const auto ticket = scheduler.submit(prompt(5, 3), o, true, suffix);
  ticket->wait_done();
  ASSERT_FALSE(ticket->error().has_value()) << ticket->error()->what();
  GenerateRequest request{"", false, prompt(5, 3)};
  request.suffix_ids = suffix;
  EXPECT_EQ(ticket->result()->output_ids, engine_->generate(std::span(&request, 1), o).front().output_ids);
  EXPECT_EQ(ticket->result()->output_ids.size(), 8u);  // the span only
}

}  // namespace
}  // namespace mosaic::serve
