#include "serve/ticket.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace mosaic::serve {
namespace {

constexpr std::chrono::milliseconds kNoWait{0};

std::vector<int32_t> step_ids(int32_t step) { return {step, step, -1}; }

// A reader that falls behind sees every step, one at a time and in order, then the end.
TEST(Ticket, AStreamingReaderSeesEveryStepInOrder) {
  Ticket ticket({1, 2}, GenerationOptions{}, /*stream=*/true);
  for (int32_t step = 1; step <= 3; ++step) ticket.publish(step_ids(step));
  GenerateResult result;
  result.output_ids = step_ids(4);
  ticket.complete(result, RequestRecord{});
  int64_t seen = 0;
  for (int32_t step = 1; step <= 3; ++step) {
    const Ticket::Progress progress = ticket.wait(seen, kNoWait);
    EXPECT_EQ(progress.version, step);
    EXPECT_EQ(progress.output_ids, step_ids(step));
    EXPECT_FALSE(progress.done) << "step " << step << " of 3 not yet seen";
    seen = progress.version;
  }
  const Ticket::Progress end = ticket.wait(seen, kNoWait);
  EXPECT_TRUE(end.done);
  EXPECT_EQ(end.version, 3);
  EXPECT_EQ(end.output_ids, step_ids(4)) << "the result's ids";
  // Asking again for a step already seen does not bring it back.
  EXPECT_TRUE(ticket.wait(1, kNoWait).done);
}

// Without a step after the one seen, the reader gets the same version back (nothing new).
TEST(Ticket, NothingNewBeforeTheNextStep) {
  Ticket ticket({1}, GenerationOptions{}, /*stream=*/true);
  ticket.publish(step_ids(1));
  EXPECT_EQ(ticket.wait(0, kNoWait).version, 1);
  const Ticket::Progress idle = ticket.wait(1, kNoWait);
  EXPECT_EQ(idle.version, 1);
  EXPECT_FALSE(idle.done);
  std::thread publisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ticket.publish(step_ids(2));
  });
  const Ticket::Progress next = ticket.wait(1, std::chrono::seconds(30));
  publisher.join();
  EXPECT_EQ(next.version, 2);
  EXPECT_EQ(next.output_ids, step_ids(2));
}

// A ticket that does not stream keeps no steps: a reader sees the latest.
TEST(Ticket, ANonStreamingTicketReportsTheLatestStep) {
  Ticket ticket({1}, GenerationOptions{}, /*stream=*/false);
  for (int32_t step = 1; step <= 3; ++step) ticket.publish(step_ids(step));
  const Ticket::Progress progress = ticket.wait(0, kNoWait);
  EXPECT_EQ(progress.version, 3);
  EXPECT_EQ(progress.output_ids, step_ids(3));
}

}  // namespace
}  // namespace mosaic::serve
