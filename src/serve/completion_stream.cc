#include "serve/completion_stream.h"

#include <algorithm>
#include <string_view>

#include "serve/stop_strings.h"

namespace mosaic::serve {

CompletionStream::CompletionStream(const Engine& engine, std::vector<std::shared_ptr<Ticket>> tickets,
                                   StreamSettings settings)
    : engine_(engine), settings_(std::move(settings)) {
  const ModelInfo& info = engine.info();
  for (std::shared_ptr<Ticket>& ticket : tickets) {
    CommittedTextStream text(static_cast<int32_t>(info.mask_token_id), {info.eos_token_id, ticket->options.eot_id},
                             [&engine](std::span<const int32_t> ids) { return engine.decode(ids); });
    choices_.push_back(Choice{std::move(ticket), std::move(text)});
  }
}

void CompletionStream::cancel() {
  for (Choice& choice : choices_) choice.ticket->cancel();
}

void CompletionStream::start(std::string& out) {
  started_ = true;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const int64_t index = static_cast<int64_t>(i);
    if (settings_.endpoint == Endpoint::chat_completions) out += sse_event(stream_role_chunk(settings_.identity, index));
    if (!settings_.shape.echo.empty())
      out += sse_event(stream_chunk(settings_.endpoint, settings_.identity, index, settings_.shape.echo));
  }
}

void CompletionStream::advance(Choice& choice, int64_t index, const Ticket::Progress& progress, std::string& out) {
  if (progress.version <= choice.version) return;
  choice.version = progress.version;
  choice.text.update(progress.output_ids);
  // The committed text, up to a stop string in it, less a tail that may still become one.
  std::string_view ready = choice.text.sent();
  const std::vector<std::string>& stops = settings_.shape.stop;
  if (const std::optional<size_t> stop = find_stop(ready, stops)) ready = ready.substr(0, *stop);
  else ready.remove_suffix(held_back(ready, stops));
  if (ready.size() <= choice.sent.size()) return;
  const std::string delta(ready.substr(choice.sent.size()));
  choice.sent += delta;
  out += sse_event(stream_chunk(settings_.endpoint, settings_.identity, index, delta));
}

void CompletionStream::finish(Choice& choice, int64_t index, std::string& out) {
  choice.done = true;
  choice.answer = choice_answer(engine_, *choice.ticket, settings_.shape);
  // The rest of the choice's text after what was sent (its answer text starts with the echo).
  const std::string_view text = std::string_view(choice.answer->text).substr(settings_.shape.echo.size());
  const std::string delta = text.starts_with(choice.sent) ? std::string(text.substr(choice.sent.size())) : "";
  choice.sent += delta;
  if (settings_.endpoint != Endpoint::generate && !delta.empty())
    out += sse_event(stream_chunk(settings_.endpoint, settings_.identity, index, delta));
  const std::string last = settings_.endpoint == Endpoint::generate ? delta : std::string();
  out += sse_event(
      stream_chunk(settings_.endpoint, settings_.identity, index, last, &*choice.answer, settings_.prompt_tokens));
}

std::optional<Answer> CompletionStream::answer() const {
  Answer answer;
  answer.prompt_tokens = settings_.prompt_tokens;
  answer.logprobs = settings_.shape.logprobs;
  for (const Choice& choice : choices_) {
    if (!choice.answer) return std::nullopt;
    answer.choices.push_back(*choice.answer);
  }
  return answer;
}

bool CompletionStream::next(std::chrono::milliseconds poll, std::string& out) {
  if (complete_) return true;
  if (!started_) start(out);
  bool waited = false;
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& choice = choices_[i];
    if (choice.done) continue;
    // Wait on the first open choice only; the others are looked at as they are.
    const Ticket::Progress progress =
        choice.ticket->wait(choice.version, waited ? std::chrono::milliseconds(0) : poll);
    waited = true;
    if (!progress.done) {
      advance(choice, static_cast<int64_t>(i), progress, out);
      continue;
    }
    if (const std::optional<ApiError>& error = choice.ticket->error()) {
      // One choice failed: the request has failed; the others stop too.
      out += sse_event(error_body(*error));
      cancel();
      out += kSseDone;
      complete_ = true;
      return true;
    }
    finish(choice, static_cast<int64_t>(i), out);
  }
  if (!std::all_of(choices_.begin(), choices_.end(), [](const Choice& c) { return c.done; })) return false;
  if (settings_.include_usage) out += sse_event(stream_usage_chunk(settings_.endpoint, settings_.identity, *answer()));
  out += kSseDone;
  complete_ = true;
  return true;
}

}  // namespace mosaic::serve
