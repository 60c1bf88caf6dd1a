// What `GET /metrics` reports, in Prometheus text: requests by outcome, queue depth, batch size,
// step latency, committed tokens per second, the arena's mapped bytes, the planned peak and PAR
// of the latest step, and per-request queue time, time to first committed token, NFE and tokens
// per step. Updated by the scheduler and the HTTP handlers; thread-safe.
//
// Beside Mosaic's own mosaic_* figures, the vLLM family of the same events, under vLLM's names
// and label (model_name), so dashboards and autoscalers written for vLLM work unchanged:
// vllm:num_requests_running / _waiting, vllm:prompt_tokens_total, vllm:generation_tokens_total,
// vllm:request_success_total{finished_reason="stop"|"length"|"abort"},
// vllm:time_to_first_token_seconds, vllm:time_per_output_token_seconds,
// vllm:e2e_request_latency_seconds, vllm:request_queue_time_seconds,
// vllm:request_inference_time_seconds, vllm:request_prompt_tokens, vllm:request_generation_tokens
// and vllm:iteration_tokens_total (tokens committed per step). Why these names: docs/design/serving.md.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>
#include <utility>

#include "mosaic/batch_session.h"
#include "serve/prometheus_text.h"
#include "serve/ticket.h"

namespace mosaic::serve {

enum class Outcome {
  completed,            // answered in full
  cancelled,            // the client went away before the end
  failed,               // a step failed (server error)
  rejected_invalid,     // 400: malformed or out-of-range request
  rejected_too_large,   // 400: the request cannot fit the memory budget
  rejected_queue_full,  // 429
  rejected_draining,    // 503: the server is shutting down
};
inline constexpr int kOutcomeCount = 7;
const char* outcome_name(Outcome outcome);

class ServeMetrics {
 public:
  // `model_name` labels the vLLM family; `max_model_len` (0: unknown) bounds its token buckets.
  explicit ServeMetrics(uint64_t budget_bytes, std::string model_name = "mosaic", int64_t max_model_len = 0);

  void count(Outcome outcome);
  // A request that ran: its outcome plus what it recorded. A cancelled one counts as
  // finished_reason="abort".
  void finished(Outcome outcome, const RequestRecord& record, int64_t steps, int64_t forwards,
                int64_t answer_tokens);
  // An answer handed to its client: `finish_reason` "stop" or "length", as the response says.
  void answered(const std::string& finish_reason, int64_t prompt_tokens, int64_t completion_tokens,
                const RequestRecord& record);
  void step(const BatchStep& step, int64_t requests_in_step, Clock::time_point now);
  // A request the connection guard answered itself (408, 413, 400, 503 at the connection cap, ...).
  void refused(int status);
  void set_connections(size_t open);
  void set_load(int64_t queued, int64_t running);
  void set_batch_start(double arrival_rate, double timeout_s, int64_t fill);

  int64_t queued() const;
  int64_t running() const;
  uint64_t count_of(Outcome outcome) const;
  std::string render() const;

 private:
  void render_vllm(PrometheusText& out) const;

  mutable std::mutex mutex_;
  uint64_t budget_bytes_;
  std::string model_name_;
  std::array<uint64_t, kOutcomeCount> outcomes_{};
  std::map<int, uint64_t> refusals_;  // by HTTP status
  size_t connections_ = 0;
  int64_t queued_ = 0, running_ = 0;
  uint64_t steps_ = 0, committed_tokens_ = 0, request_steps_ = 0, answer_tokens_ = 0;
  uint64_t arena_bytes_ = 0, planned_peak_ = 0;
  int64_t cache_pages_used_ = 0, cache_pages_free_ = -1;
  uint64_t cache_bytes_ = 0;
  double par_ = 0;
  double arrival_rate_ = 0, batch_timeout_s_ = 0;
  int64_t batch_fill_ = 0;
  std::deque<std::pair<Clock::time_point, int64_t>> recent_tokens_;  // committed per step, last 10 s
  Histogram step_seconds_, step_requests_, queue_seconds_, first_token_seconds_, request_seconds_, request_nfe_;
  // The vLLM family
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0, finished_stop_ = 0, finished_length_ = 0, finished_abort_ = 0;
  Histogram vllm_first_token_, vllm_per_output_token_, vllm_e2e_, vllm_queue_, vllm_inference_, vllm_prompt_tokens_,
      vllm_generation_tokens_, vllm_iteration_tokens_;
};

}  // namespace mosaic::serve
