// The collectives a tensor-parallel rank's step needs (graph/tensor_parallel.h), over whatever
// joins the ranks: threads sharing the CPU's memory (exec/cpu_thread_communicator.h) or NCCL
// between GPUs. Every rank calls the same collectives in the same order; a collective returns on
// a rank once that rank's result is in place. A rank that fails calls abort(), and every rank
// waiting in (or later entering) a collective throws mosaic::Error naming the failed rank, so no
// rank waits forever for one that has gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mosaic {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t ranks() const = 0;
  // data[0, count) = its sum over the ranks, added in rank order (the same bits on every rank).
  virtual void all_reduce_sum(float* data, int64_t count) = 0;
  // recv[k * bytes, (k + 1) * bytes) = rank k's `bytes` bytes at send, for every rank k.
  virtual void all_gather(const void* send, void* recv, size_t bytes) = 0;
  // This rank has failed with `reason`: release every rank's collectives with an error.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace mosaic
