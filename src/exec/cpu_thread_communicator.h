// Ranks that are threads of one process on the CPU (the reference backend's tensor parallelism;
// GPUs go through NCCL): the ranks exchange pointers to their buffers and read one another's
// memory between barriers. Used as
//
//   CpuThreadGroup group(ranks);
//   // on rank r's thread:
//   CpuThreadCommunicator comm(group, r);
//   comm.all_reduce_sum(x, n);
//
// all_reduce_sum is a reduce-scatter then an all-gather in place: rank r sums its slice of every
// rank's buffer in rank order and writes the sum into every rank's buffer, so each rank reads
// and writes 1/R of the data and all ranks end with the same bits.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "exec/communicator.h"

namespace mosaic {

class CpuThreadGroup {
 public:
  explicit CpuThreadGroup(int64_t ranks);
  int64_t ranks() const { return ranks_; }

  // Blocks until every rank has arrived; throws mosaic::Error once any rank has aborted.
  void arrive_and_wait();
  void abort(int64_t rank, const std::string& reason);
  // Forgets a failure, for the next step; only while no rank is in a collective.
  void reset();
  // The first failure, if any: "rank 1: <reason>".
  std::optional<std::string> failure() const;

  // Each rank's published buffer for the collective in progress.
  std::vector<const void*> buffers;

 private:
  int64_t ranks_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  int64_t waiting_ = 0;
  uint64_t generation_ = 0;
  std::optional<std::string> failure_;
};

class CpuThreadCommunicator final : public Communicator {
 public:
  CpuThreadCommunicator(CpuThreadGroup& group, int64_t rank) : group_(group), rank_(rank) {}
  int64_t rank() const override { return rank_; }
  int64_t ranks() const override { return group_.ranks(); }
  void all_reduce_sum(float* data, int64_t count) override;
  void all_gather(const void* send, void* recv, size_t bytes) override;
  void abort(const std::string& reason) override { group_.abort(rank_, reason); }

 private:
  CpuThreadGroup& group_;
  int64_t rank_;
  std::vector<float> slice_;  // this rank's slice of the sum
};

}  // namespace mosaic
