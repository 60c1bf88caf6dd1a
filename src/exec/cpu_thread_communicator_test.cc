// Threads as ranks: sums in rank order with the same bits on every rank, gathers in rank order,
// and an abort that releases every waiting rank with an error naming the one that failed.
#include "exec/cpu_thread_communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "core/error.h"

namespace mosaic {
namespace {

using ::testing::HasSubstr;

// Runs body(communicator) on one thread per rank; returns each rank's error message ("" if none).
std::vector<std::string> on_ranks(int64_t ranks, const std::function<void(CpuThreadCommunicator&)>& body) {
  CpuThreadGroup group(ranks);
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      CpuThreadCommunicator comm(group, r);
      try {
        body(comm);
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = e.what();
        comm.abort(e.what());
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

TEST(CpuThreadCommunicator, AllReduceSumsInRankOrderOnEveryRank) {
  constexpr int64_t kRanks = 3, kCount = 10;  // 10 does not divide by 3: the last slice is short
  std::vector<std::vector<float>> data(kRanks);
  for (int64_t r = 0; r < kRanks; ++r)
    for (int64_t i = 0; i < kCount; ++i) data[r].push_back(r == 0 ? 1e8f : (r == 1 ? -1e8f : 0.25f * float(i)));
  const auto errors = on_ranks(kRanks, [&](CpuThreadCommunicator& comm) {
    comm.all_reduce_sum(data[static_cast<size_t>(comm.rank())].data(), kCount);
  });
  for (int64_t r = 0; r < kRanks; ++r) {
    EXPECT_EQ(errors[r], "");
    // (1e8 + -1e8) + 0.25 i: rank order; another order would lose the small terms.
    for (int64_t i = 0; i < kCount; ++i) EXPECT_EQ(data[r][i], 0.25f * float(i)) << "rank " << r << " element " << i;
  }
}

TEST(CpuThreadCommunicator, AllGatherPutsEachRanksBytesInRankOrder) {
  constexpr int64_t kRanks = 4;
  std::vector<std::vector<int32_t>> gathered(kRanks, std::vector<int32_t>(2 * kRanks));
  on_ranks(kRanks, [&](CpuThreadCommunicator& comm) {
    const int32_t mine[2] = {static_cast<int32_t>(comm.rank()), static_cast<int32_t>(10 * comm.rank())};
    for (int repeat = 0; repeat < 3; ++repeat)  // back-to-back collectives reuse the group
      comm.all_gather(mine, gathered[static_cast<size_t>(comm.rank())].data(), sizeof mine);
  });
  for (int64_t r = 0; r < kRanks; ++r)
    for (int64_t k = 0; k < kRanks; ++k) {
      EXPECT_EQ(gathered[r][2 * k], k);
      EXPECT_EQ(gathered[r][2 * k + 1], 10 * k);
    }
}

TEST(CpuThreadCommunicator, ARankThatFailsReleasesTheOthersWithItsName) {
  float value = 1;
  const auto errors = on_ranks(3, [&](CpuThreadCommunicator& comm) {
    if (comm.rank() == 1) fail("out of memory in layer 3");
    float mine = value;
    comm.all_reduce_sum(&mine, 1);  // ranks 0 and 2 wait here for rank 1, which never comes
  });
  EXPECT_EQ(errors[1], "out of memory in layer 3");
  for (int r : {0, 2}) EXPECT_THAT(errors[r], HasSubstr("abandoned: rank 1: out of memory in layer 3"));
}

}  // namespace
}  // namespace mosaic
