#include "serve/ticket.h"

namespace mosaic::serve {

Ticket::Ticket(std::vector<int32_t> prompt_ids, GenerationOptions options, bool stream,
               std::vector<int32_t> suffix_ids, StopCheck stop_when)
    : prompt_ids(std::move(prompt_ids)),
      options(std::move(options)),
      stream(stream),
      suffix_ids(std::move(suffix_ids)),
      stop_when(std::move(stop_when)),
      arrival(Clock::now()) {}

Ticket::Progress Ticket::wait(int64_t seen_version, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return done_ || version_ > seen_version; });
  if (!stream) return {version_, output_ids_, done_};
  // The reader has seen every step up to seen_version: forget them, hand out the next one.
  while (!unseen_.empty() && first_unseen_ <= seen_version) unseen_.pop_front(), ++first_unseen_;
  if (!unseen_.empty()) return {first_unseen_, unseen_.front(), false};
  return {version_, output_ids_, done_};
}

void Ticket::wait_done() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return done_; });
}

void Ticket::publish(std::span<const int32_t> output_ids) {
  {
    std::lock_guard lock(mutex_);
    output_ids_.assign(output_ids.begin(), output_ids.end());
    ++version_;
    if (stream) unseen_.push_back(output_ids_);
  }
  changed_.notify_all();
}

void Ticket::complete(GenerateResult result, const RequestRecord& record) {
  {
    std::lock_guard lock(mutex_);
    output_ids_ = result.output_ids;
    result_ = std::move(result);
    record_ = record;
    done_ = true;
  }
  changed_.notify_all();
}

void Ticket::fail(ApiError error, const RequestRecord& record) {
  {
    std::lock_guard lock(mutex_);
    error_ = std::move(error);
    record_ = record;
    done_ = true;
  }
  changed_.notify_all();
}

}  // namespace mosaic::serve
