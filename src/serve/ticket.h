// One request's handle, shared by its HTTP handler and the scheduler: the scheduler publishes
// each step's generated region (for streaming) and the outcome; the handler waits on it and may
// cancel it (its client went away). Also what the server records per request.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "mosaic/engine.h"
#include "serve/api_error.h"

namespace mosaic::serve {

using Clock = std::chrono::steady_clock;

struct RequestRecord {
  double queue_s = 0;                   // arrival -> joined a batch
  std::optional<double> first_token_s;  // arrival -> the first step that committed a token
  double total_s = 0;                   // arrival -> finished
  int64_t largest_batch = 0;            // most requests it shared a step with (itself included)
};

// Whether a request should end now, from its generated region after a step (a stop string in
// its committed prefix: StopWatcher). Called on the scheduler's thread.
using StopCheck = std::function<bool(std::span<const int32_t> output_ids)>;

class Ticket {
 public:
  Ticket(std::vector<int32_t> prompt_ids, GenerationOptions options, bool stream,
         std::vector<int32_t> suffix_ids = {}, StopCheck stop_when = {});

  const std::vector<int32_t> prompt_ids;
  const GenerationOptions options;  // resolved
  const bool stream;
  const std::vector<int32_t> suffix_ids;  // infilling: after the generated region
  const StopCheck stop_when;              // empty: the request runs to its end
  const Clock::time_point arrival;

  // --- the handler's side
  void cancel() { cancel_requested_.store(true); }
  bool cancel_requested() const { return cancel_requested_.load(); }
  struct Progress {
    int64_t version = 0;               // the step these ids are after
    std::vector<int32_t> output_ids;   // the generated region after that step
    bool done = false;                 // ended, and no step after `seen_version` left to see
  };
  // Waits up to `timeout` for a step after `seen_version`, or the end. A streaming ticket keeps
  // every step its reader has not seen and returns them one at a time (the step seen_version + 1),
  // so a reader that falls behind the steps still sees each step's text as its own piece; other
  // tickets return the latest step.
  Progress wait(int64_t seen_version, std::chrono::milliseconds timeout);
  void wait_done();
  // After the end: the result, or the error that ended it.
  const std::optional<GenerateResult>& result() const { return result_; }
  const std::optional<ApiError>& error() const { return error_; }
  const RequestRecord& record() const { return record_; }

  // --- the scheduler's side
  void publish(std::span<const int32_t> output_ids);
  void complete(GenerateResult result, const RequestRecord& record);
  void fail(ApiError error, const RequestRecord& record);

 private:
  std::atomic<bool> cancel_requested_{false};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int64_t version_ = 0;
  std::vector<int32_t> output_ids_;
  // Streaming tickets: the steps after first_unseen_ - 1, oldest first (step first_unseen_ at 0).
  std::deque<std::vector<int32_t>> unseen_;
  int64_t first_unseen_ = 1;
  bool done_ = false;
  std::optional<GenerateResult> result_;
  std::optional<ApiError> error_;
  RequestRecord record_;
};

}  // namespace mosaic::serve
