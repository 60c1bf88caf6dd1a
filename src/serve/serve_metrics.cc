#include "serve/serve_metrics.h"

namespace mosaic::serve {
namespace {

constexpr auto kTokenRateWindow = std::chrono::seconds(10);

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

// The bucket bounds vLLM's Prometheus logger uses for the same figures (vllm/v1/metrics/loggers.py),
// so that its dashboards' quantile panels read the same.
std::vector<double> vllm_first_token_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
          2.5,   5.0,   7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> vllm_per_output_token_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}

std::vector<double> vllm_request_latency_buckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
          960.0, 1920.0, 7680.0};
}

// 1, 2, 5, 10, 20, 50, ... up to `max` (vLLM's build_1_2_5_buckets); unknown context: up to 10^6.
std::vector<double> one_two_five_buckets(int64_t max) {
  if (max <= 0) max = 1'000'000;
  std::vector<double> bounds;
  for (double decade = 1;; decade *= 10)
    for (const double m : {1.0, 2.0, 5.0}) {
      if (m * decade > static_cast<double>(max)) return bounds;
      bounds.push_back(m * decade);
    }
}

}  // namespace

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::completed: return "completed";
    case Outcome::cancelled: return "cancelled";
    case Outcome::failed: return "failed";
    case Outcome::rejected_invalid: return "rejected_invalid";
    case Outcome::rejected_too_large: return "rejected_too_large";
    case Outcome::rejected_queue_full: return "rejected_queue_full";
    case Outcome::rejected_draining: return "rejected_draining";
  }
  return "?";
}

ServeMetrics::ServeMetrics(uint64_t budget_bytes, std::string model_name, int64_t max_model_len)
    : budget_bytes_(budget_bytes),
      model_name_(std::move(model_name)),
      step_seconds_(latency_buckets()),
      step_requests_({1, 2, 4, 8, 16, 32, 64, 128, 256}),
      queue_seconds_(latency_buckets()),
      first_token_seconds_(latency_buckets()),
      request_seconds_(latency_buckets()),
      request_nfe_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
      vllm_first_token_(vllm_first_token_buckets()),
      vllm_per_output_token_(vllm_per_output_token_buckets()),
      vllm_e2e_(vllm_request_latency_buckets()),
      vllm_queue_(vllm_request_latency_buckets()),
      vllm_inference_(vllm_request_latency_buckets()),
      vllm_prompt_tokens_(one_two_five_buckets(max_model_len)),
      vllm_generation_tokens_(one_two_five_buckets(max_model_len)),
      vllm_iteration_tokens_({1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}) {}

void ServeMetrics::count(Outcome outcome) {
  std::lock_guard lock(mutex_);
  ++outcomes_[static_cast<size_t>(outcome)];
}

void ServeMetrics::finished(Outcome outcome, const RequestRecord& record, int64_t steps, int64_t forwards,
                            int64_t answer_tokens) {
  std::lock_guard lock(mutex_);
  ++outcomes_[static_cast<size_t>(outcome)];
  queue_seconds_.observe(record.queue_s);
  if (record.first_token_s) first_token_seconds_.observe(*record.first_token_s);
  request_seconds_.observe(record.total_s);
  if (outcome == Outcome::completed) request_nfe_.observe(static_cast<double>(forwards));
  request_steps_ += static_cast<uint64_t>(steps);
  answer_tokens_ += static_cast<uint64_t>(answer_tokens);
  if (outcome == Outcome::cancelled) ++finished_abort_;
}

void ServeMetrics::answered(const std::string& finish_reason, int64_t prompt_tokens, int64_t completion_tokens,
                            const RequestRecord& record) {
  std::lock_guard lock(mutex_);
  ++(finish_reason == "stop" ? finished_stop_ : finished_length_);
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  generation_tokens_ += static_cast<uint64_t>(completion_tokens);
  vllm_prompt_tokens_.observe(static_cast<double>(prompt_tokens));
  vllm_generation_tokens_.observe(static_cast<double>(completion_tokens));
  vllm_e2e_.observe(record.total_s);
  vllm_queue_.observe(record.queue_s);
  vllm_inference_.observe(record.total_s - record.queue_s);
  if (record.first_token_s) {
    vllm_first_token_.observe(*record.first_token_s);
    // vLLM's definition: the time after the first token, shared by the tokens after it.
    if (completion_tokens > 1)
      vllm_per_output_token_.observe((record.total_s - *record.first_token_s) / static_cast<double>(completion_tokens - 1));
  }
}

void ServeMetrics::step(const BatchStep& step, int64_t requests_in_step, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  ++steps_;
  committed_tokens_ += static_cast<uint64_t>(step.committed);
  step_seconds_.observe(step.seconds);
  step_requests_.observe(static_cast<double>(requests_in_step));
  if (step.sequences > 0) vllm_iteration_tokens_.observe(static_cast<double>(step.committed));
  if (step.sequences > 0) {
    arena_bytes_ = step.arena_bytes;
    planned_peak_ = step.planned_peak;
    par_ = step.par;
  }
  cache_pages_used_ = step.cache_pages_used, cache_pages_free_ = step.cache_pages_free;
  cache_bytes_ = step.cache_bytes;
  recent_tokens_.emplace_back(now, step.committed);
  while (!recent_tokens_.empty() && now - recent_tokens_.front().first > kTokenRateWindow) recent_tokens_.pop_front();
}

void ServeMetrics::refused(int status) {
  std::lock_guard lock(mutex_);
  ++refusals_[status];
}

void ServeMetrics::set_connections(size_t open) {
  std::lock_guard lock(mutex_);
  connections_ = open;
}

void ServeMetrics::set_load(int64_t queued, int64_t running) {
  std::lock_guard lock(mutex_);
  queued_ = queued, running_ = running;
}

void ServeMetrics::set_batch_start(double arrival_rate, double timeout_s, int64_t fill) {
  std::lock_guard lock(mutex_);
  arrival_rate_ = arrival_rate, batch_timeout_s_ = timeout_s, batch_fill_ = fill;
}

int64_t ServeMetrics::queued() const {
  std::lock_guard lock(mutex_);
  return queued_;
}

int64_t ServeMetrics::running() const {
  std::lock_guard lock(mutex_);
  return running_;
}

uint64_t ServeMetrics::count_of(Outcome outcome) const {
  std::lock_guard lock(mutex_);
  return outcomes_[static_cast<size_t>(outcome)];
}

std::string ServeMetrics::render() const {
  std::lock_guard lock(mutex_);
  PrometheusText out;
  out.family("mosaic_requests_total", "counter", "Requests by outcome.");
  for (int k = 0; k < kOutcomeCount; ++k)
    out.sample("mosaic_requests_total", static_cast<double>(outcomes_[k]), {{"outcome", outcome_name(Outcome(k))}});
  out.family("mosaic_http_refusals_total", "counter",
             "Requests the connection guard answered itself, by status (408 slow, 413 too large, 400 malformed, "
             "503 connection cap, ...).");
  for (const auto& [status, count] : refusals_)
    out.sample("mosaic_http_refusals_total", static_cast<double>(count), {{"status", std::to_string(status)}});
  out.family("mosaic_http_connections", "gauge", "Client connections open (idle, arriving or being answered).");
  out.sample("mosaic_http_connections", static_cast<double>(connections_));
  out.family("mosaic_queue_depth", "gauge", "Requests waiting to join a batch.");
  out.sample("mosaic_queue_depth", static_cast<double>(queued_));
  out.family("mosaic_batch_size", "gauge", "Requests in the running batch.");
  out.sample("mosaic_batch_size", static_cast<double>(running_));
  out.histogram("mosaic_step_batch_size", "Requests per denoising step.", step_requests_);
  out.histogram("mosaic_step_seconds", "Latency of one denoising step of the batch.", step_seconds_);
  out.family("mosaic_steps_total", "counter", "Denoising steps run.");
  out.sample("mosaic_steps_total", static_cast<double>(steps_));
  out.family("mosaic_committed_tokens_total", "counter", "Positions unmasked, over all requests.");
  out.sample("mosaic_committed_tokens_total", static_cast<double>(committed_tokens_));
  out.family("mosaic_request_steps_total", "counter",
             "Steps taken, summed over requests (committed tokens / this = tokens per step).");
  out.sample("mosaic_request_steps_total", static_cast<double>(request_steps_));
  out.family("mosaic_completion_tokens_total", "counter", "Answer tokens returned (before EOS).");
  out.sample("mosaic_completion_tokens_total", static_cast<double>(answer_tokens_));
  double window_tokens = 0;
  for (const auto& [when, tokens] : recent_tokens_) window_tokens += static_cast<double>(tokens);
  const double window_s = recent_tokens_.size() < 2 ? 0
      : std::chrono::duration<double>(recent_tokens_.back().first - recent_tokens_.front().first).count();
  out.family("mosaic_tokens_per_second", "gauge", "Committed tokens per second over the last 10 s of steps.");
  out.sample("mosaic_tokens_per_second", window_s > 0 ? window_tokens / window_s : 0);
  out.family("mosaic_arena_mapped_bytes", "gauge", "Activation arena bytes after the latest step.");
  out.sample("mosaic_arena_mapped_bytes", static_cast<double>(arena_bytes_));
  out.family("mosaic_kv_cache_pages_used", "gauge", "KV cache pages held by requests after the latest step.");
  out.sample("mosaic_kv_cache_pages_used", static_cast<double>(cache_pages_used_));
  if (cache_pages_free_ >= 0) {
    out.family("mosaic_kv_cache_pages_free", "gauge", "KV cache pages a new request could still take under the budget.");
    out.sample("mosaic_kv_cache_pages_free", static_cast<double>(cache_pages_free_));
  }
  out.family("mosaic_kv_cache_bytes", "gauge", "Memory the KV cache holds after the latest step.");
  out.sample("mosaic_kv_cache_bytes", static_cast<double>(cache_bytes_));
  out.family("mosaic_planned_peak_bytes", "gauge", "Planned activation peak of the latest step.");
  out.sample("mosaic_planned_peak_bytes", static_cast<double>(planned_peak_));
  out.family("mosaic_step_par", "gauge", "Planned peak / average live bytes (PAR) of the latest step.");
  out.sample("mosaic_step_par", par_);
  out.family("mosaic_memory_budget_bytes", "gauge", "The engine's memory budget (0: none).");
  out.sample("mosaic_memory_budget_bytes", static_cast<double>(budget_bytes_));
  out.family("mosaic_arrival_rate", "gauge", "Measured request arrival rate (fixed batching), per second.");
  out.sample("mosaic_arrival_rate", arrival_rate_);
  out.family("mosaic_batch_start_timeout_seconds", "gauge", "Fixed batching: how long a batch waits to fill.");
  out.sample("mosaic_batch_start_timeout_seconds", batch_timeout_s_);
  out.family("mosaic_batch_start_fill", "gauge", "Fixed batching: requests a batch waits for.");
  out.sample("mosaic_batch_start_fill", static_cast<double>(batch_fill_));
  out.histogram("mosaic_request_queue_seconds", "Arrival to joining a batch.", queue_seconds_);
  out.histogram("mosaic_request_first_token_seconds", "Arrival to the first committed token.", first_token_seconds_);
  out.histogram("mosaic_request_seconds", "Arrival to the end of the request.", request_seconds_);
  out.histogram("mosaic_request_nfe", "Forwards (NFE) per completed request.", request_nfe_);
  render_vllm(out);
  return out.text();
}

void ServeMetrics::render_vllm(PrometheusText& out) const {
  const Labels model = {{"model_name", model_name_}};
  out.family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
  out.sample("vllm:num_requests_running", static_cast<double>(running_), model);
  out.family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  out.sample("vllm:num_requests_waiting", static_cast<double>(queued_), model);
  out.family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed (prompts of answered requests).");
  out.sample("vllm:prompt_tokens_total", static_cast<double>(prompt_tokens_), model);
  out.family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed (answer tokens returned).");
  out.sample("vllm:generation_tokens_total", static_cast<double>(generation_tokens_), model);
  out.family("vllm:request_success_total", "counter", "Count of successfully processed requests.");
  for (const auto& [reason, count] : {std::pair<const char*, uint64_t>{"stop", finished_stop_},
                                      {"length", finished_length_}, {"abort", finished_abort_}})
    out.sample("vllm:request_success_total", static_cast<double>(count),
               {{"model_name", model_name_}, {"finished_reason", reason}});
  out.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", vllm_first_token_,
                model);
  out.histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                vllm_per_output_token_, model);
  out.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", vllm_e2e_, model);
  out.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                vllm_queue_, model);
  out.histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
                vllm_inference_, model);
  out.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", vllm_prompt_tokens_, model);
  out.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", vllm_generation_tokens_,
                model);
  out.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step (committed per step).",
                vllm_iteration_tokens_, model);
}

}  // namespace mosaic::serve
