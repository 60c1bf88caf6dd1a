#include "exec/cpu_thread_communicator.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace mosaic {

CpuThreadGroup::CpuThreadGroup(int64_t ranks) : buffers(static_cast<size_t>(ranks)), ranks_(ranks) {
  MOSAIC_ASSERT(ranks >= 1, "a group of {} ranks", ranks);
}

void CpuThreadGroup::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  if (failure_) fail("step abandoned: {}", *failure_);
  const uint64_t generation = generation_;
  if (++waiting_ == ranks_) {
    waiting_ = 0;
    ++generation_;
    arrived_.notify_all();
    return;
  }
  arrived_.wait(lock, [&] { return generation_ != generation || failure_.has_value(); });
  if (generation_ == generation) {
    --waiting_;
    fail("step abandoned: {}", *failure_);
  }
}

void CpuThreadGroup::abort(int64_t rank, const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (!failure_) failure_ = fmt::format("rank {}: {}", rank, reason);
  arrived_.notify_all();
}

void CpuThreadGroup::reset() {
  std::lock_guard lock(mutex_);
  MOSAIC_ASSERT(waiting_ == 0, "a reset while {} ranks wait in a collective", waiting_);
  failure_.reset();
}

std::optional<std::string> CpuThreadGroup::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void CpuThreadCommunicator::all_reduce_sum(float* data, int64_t count) {
  const int64_t ranks = group_.ranks();
  if (ranks == 1) return;
  group_.buffers[static_cast<size_t>(rank_)] = data;
  group_.arrive_and_wait();  // every buffer published
  const int64_t per_rank = (count + ranks - 1) / ranks;
  const int64_t begin = std::min(count, rank_ * per_rank), end = std::min(count, begin + per_rank);
  const float* first = static_cast<const float*>(group_.buffers[0]);
  slice_.assign(first + begin, first + end);
  for (int64_t k = 1; k < ranks; ++k) {
    const float* from = static_cast<const float*>(group_.buffers[static_cast<size_t>(k)]);
    for (int64_t i = begin; i < end; ++i) slice_[static_cast<size_t>(i - begin)] += from[i];
  }
  group_.arrive_and_wait();  // every slice summed: nobody reads the inputs any more
  for (int64_t k = 0; k < ranks; ++k) {
    auto* to = const_cast<float*>(static_cast<const float*>(group_.buffers[static_cast<size_t>(k)]));
    std::copy(slice_.begin(), slice_.end(), to + begin);
  }
  group_.arrive_and_wait();  // every rank's buffer holds every slice
}

void CpuThreadCommunicator::all_gather(const void* send, void* recv, size_t bytes) {
  group_.buffers[static_cast<size_t>(rank_)] = send;
  group_.arrive_and_wait();
  for (int64_t k = 0; k < group_.ranks(); ++k)
    std::memcpy(static_cast<std::byte*>(recv) + static_cast<size_t>(k) * bytes, group_.buffers[static_cast<size_t>(k)],
                bytes);
  group_.arrive_and_wait();  // nobody reads `send` any more
}

}  // namespace mosaic
