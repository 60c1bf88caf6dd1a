#include "serve/scheduler.h"

#include <algorithm>

#include "core/log.h"

namespace mosaic::serve {
namespace {

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

ApiError shutting_down() {
  return ApiError(503, "server_error", "the server is shutting down", "", "shutting_down");
}

}  // namespace

Scheduler::Scheduler(const Engine& engine, SchedulerOptions options, ServeMetrics& metrics)
    : engine_(engine),
      options_(options),
      max_batch_(options.max_batch > 0 ? options.max_batch : options.mode == BatchingMode::fixed ? 16 : 0),
      metrics_(metrics) {
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { stop(); }

std::shared_ptr<Ticket> Scheduler::submit(std::vector<int32_t> prompt_ids, GenerationOptions options, bool stream,
                                          std::vector<int32_t> suffix_ids, StopCheck stop_when) {
  auto ticket = std::make_shared<Ticket>(std::move(prompt_ids), std::move(options), stream, std::move(suffix_ids),
                                         std::move(stop_when));
  {
    std::lock_guard lock(mutex_);
    if (draining_ || stopping_) throw shutting_down();
    if (static_cast<int64_t>(waiting_.size()) >= options_.max_queue)
      throw ApiError(429, "rate_limit_error",
                     fmt::format("the server is at capacity ({} requests waiting); retry later", waiting_.size()),
                     "", "queue_full");
    waiting_.push_back(ticket);
    load_.arrival(ticket->arrival);
    metrics_.set_load(static_cast<int64_t>(waiting_.size()), running_count_);
  }
  wake_.notify_all();
  return ticket;
}

void Scheduler::begin_drain() {
  std::lock_guard lock(mutex_);
  draining_ = true;
}

bool Scheduler::draining() const {
  std::lock_guard lock(mutex_);
  return draining_;
}

void Scheduler::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return (waiting_.empty() && running_count_ == 0) || stopping_; });
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  idle_.notify_all();
  if (thread_.joinable()) thread_.join();
}

RequestRecord Scheduler::record_of(const Running& r, Clock::time_point now) const {
  RequestRecord record;
  record.queue_s = seconds_between(r.ticket->arrival, r.admitted);
  if (r.first_token) record.first_token_s = seconds_between(r.ticket->arrival, *r.first_token);
  record.total_s = seconds_between(r.ticket->arrival, now);
  record.largest_batch = r.largest_batch;
  return record;
}

void Scheduler::drop_cancelled_waiting() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (!(*it)->cancel_requested()) {
      ++it;
      continue;
    }
    RequestRecord record;
    record.queue_s = record.total_s = seconds_between((*it)->arrival, Clock::now());
    (*it)->fail(ApiError(499, "cancelled", "the client closed the connection"), record);
    metrics_.finished(Outcome::cancelled, record, 0, 0, 0);
    it = waiting_.erase(it);
  }
}

// Fixed batching: whether to start a batch now; if not, when to look again.
bool Scheduler::ready_to_admit(Clock::time_point now, Clock::time_point idle_since, Clock::time_point& wake_at) {
  if (options_.mode == BatchingMode::continuous) return true;
  const double rate = load_.arrival_rate(now);
  const BatchStartRule rule = options_.batch_timeout_s
                                  ? fixed_batch_start(*options_.batch_timeout_s, max_batch_)
                                  : auto_batch_start(rate, load_.shared_service_seconds(), max_batch_);
  metrics_.set_batch_start(rate, rule.timeout_s, rule.fill);
  const Clock::time_point since = std::max(idle_since, waiting_.front()->arrival);
  const int64_t waiting = std::min<int64_t>(static_cast<int64_t>(waiting_.size()), max_batch_);
  if (rule.should_start(waiting, seconds_between(since, now))) return true;
  wake_at = since + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(rule.timeout_s));
  return false;
}

void Scheduler::admit(BatchSession& session, std::map<int64_t, Running>& running) {
  while (!waiting_.empty()) {
    if (max_batch_ > 0 && session.unfinished() >= max_batch_) return;
    const std::shared_ptr<Ticket>& ticket = waiting_.front();
    // A suffix's positions are computed like the prompt's (BatchSession::add).
    const int64_t prompt_tokens = static_cast<int64_t>(ticket->prompt_ids.size() + ticket->suffix_ids.size());
    try {
      const MemoryFit fit = session.fit(prompt_tokens, ticket->options);
      if (!fit.fits && session.unfinished() > 0) return;  // waits for room, in arrival order
      if (!fit.fits)
        throw ApiError(400, "invalid_request_error",
                       fmt::format("the request needs {} bytes of memory; the budget is {} bytes", fit.bytes_needed,
                                   fit.budget), "prompt", "prompt_too_large");
      const int64_t id = session.add(ticket->prompt_ids, ticket->options, ticket->suffix_ids);
      running.emplace(id, Running{ticket, Clock::now(), std::nullopt, 0});
    } catch (const ApiError& error) {
      const RequestRecord record;
      ticket->fail(error, record);
      metrics_.finished(Outcome::rejected_too_large, record, 0, 0, 0);
    } catch (const std::exception& error) {  // options are checked before submit(): not expected
      const RequestRecord record;
      ticket->fail(ApiError(400, "invalid_request_error", error.what()), record);
      metrics_.finished(Outcome::rejected_invalid, record, 0, 0, 0);
    }
    waiting_.pop_front();
  }
}

void Scheduler::end(BatchSession& session, std::map<int64_t, Running>& running, int64_t id, Outcome outcome,
                    const ApiError* error) {
  Running& r = running.at(id);
  const RequestRecord record = record_of(r, Clock::now());
  GenerateResult result = session.remove(id);
  const int64_t answer_tokens =
      outcome == Outcome::completed ? static_cast<int64_t>(engine_.answer_ids(result.output_ids, r.ticket->options).size()) : 0;
  metrics_.finished(outcome, record, result.steps, result.forwards, answer_tokens);
  if (error) r.ticket->fail(*error, record);
  else r.ticket->complete(std::move(result), record);
  running.erase(id);
}

void Scheduler::cancel_gone_clients(BatchSession& session, std::map<int64_t, Running>& running) {
  std::vector<int64_t> gone;
  for (const auto& [id, r] : running)
    if (r.ticket->cancel_requested()) gone.push_back(id);
  const ApiError cancelled(499, "cancelled", "the client closed the connection");
  for (const int64_t id : gone) end(session, running, id, Outcome::cancelled, &cancelled);
}

BatchStep Scheduler::run_step(BatchSession& session, std::map<int64_t, Running>& running) {
  BatchStep step;
  try {
    step = session.step();
  } catch (const std::exception& error) {
    log(LogLevel::error, "serve: a step of {} requests failed: {}", running.size(), error.what());
    const ApiError failed(500, "server_error", fmt::format("generation failed: {}", error.what()));
    std::vector<int64_t> ids;
    for (const auto& [id, r] : running) ids.push_back(id);
    for (const int64_t id : ids) end(session, running, id, Outcome::failed, &failed);
    return {};
  }
  const Clock::time_point now = Clock::now();
  metrics_.step(step, static_cast<int64_t>(step.events.size()), now);
  for (const GenerateEvent& event : step.events) {
    Running& r = running.at(event.request);
    r.largest_batch = std::max(r.largest_batch, static_cast<int64_t>(step.events.size()));
    if (!event.committed.empty() && !r.first_token) r.first_token = now;
    if (r.ticket->stream && !event.finished) r.ticket->publish(event.output_ids);
  }
  for (const GenerateEvent& event : step.events) {
    const Running& r = running.at(event.request);
    // A stop string in the committed prefix ends the request now: nothing after it is wanted.
    if (event.finished || (r.ticket->stop_when && r.ticket->stop_when(event.output_ids)))
      end(session, running, event.request, Outcome::completed, nullptr);
  }
  return step;
}

void Scheduler::run() {
  std::unique_ptr<BatchSession> session = engine_.start_batch();
  std::map<int64_t, Running> running;  // by session id
  Clock::time_point idle_since = Clock::now(), batch_start = idle_since;
  std::unique_lock lock(mutex_);
  for (;;) {
    drop_cancelled_waiting();
    if (stopping_) break;
    if (running.empty()) {
      if (waiting_.empty()) {
        running_count_ = 0;
        metrics_.set_load(0, 0);
        idle_.notify_all();
        wake_.wait(lock);
        continue;
      }
      Clock::time_point wake_at;
      if (!ready_to_admit(Clock::now(), idle_since, wake_at)) {
        wake_.wait_until(lock, wake_at);
        continue;
      }
      batch_start = Clock::now();
    }
    if (options_.mode == BatchingMode::continuous || running.empty()) admit(*session, running);
    running_count_ = static_cast<int64_t>(running.size());
    metrics_.set_load(static_cast<int64_t>(waiting_.size()), running_count_);
    lock.unlock();

    cancel_gone_clients(*session, running);
    const bool stepped = !running.empty();
    BatchStep step;
    if (stepped) step = run_step(*session, running);
    lock.lock();
    running_count_ = static_cast<int64_t>(running.size());
    if (!step.events.empty()) load_.step(static_cast<int64_t>(step.events.size()), step.seconds);
    if (stepped && running.empty()) {
      idle_since = Clock::now();
      if (options_.mode == BatchingMode::fixed) load_.batch_served(seconds_between(batch_start, idle_since));
    }
  }
  // Stopping: whatever is left ends now.
  const ApiError gone = shutting_down();
  for (const auto& ticket : waiting_) {
    const RequestRecord record;
    ticket->fail(gone, record);
    metrics_.finished(Outcome::failed, record, 0, 0, 0);
  }
  waiting_.clear();
  lock.unlock();
  std::vector<int64_t> ids;
  for (const auto& [id, r] : running) ids.push_back(id);
  for (const int64_t id : ids) end(*session, running, id, Outcome::failed, &gone);
  lock.lock();
  running_count_ = 0;
  idle_.notify_all();
}

}  // namespace mosaic::serve
