// The server-sent events of one streamed request, all its choices together: the chat role chunk
// (or, with echo, the prompt) first, then each choice's newly committed text as its steps come
// (text_stream.h), held back where it may be the start of a stop string and cut before one, each
// choice's last chunk (finish_reason, usage, mosaic) as it ends, the usage chunk when
// stream_options.include_usage asks, and [DONE]. The deltas of a choice concatenate to its
// non-streamed text exactly.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mosaic/engine.h"
#include "serve/choice_answer.h"
#include "serve/openai_json.h"
#include "serve/text_stream.h"
#include "serve/ticket.h"

namespace mosaic::serve {

struct StreamSettings {
  Endpoint endpoint = Endpoint::completions;
  ResponseIdentity identity;
  AnswerShape shape;
  bool include_usage = false;
  int64_t prompt_tokens = 0;  // prompt + suffix
};

class CompletionStream {
 public:
  CompletionStream(const Engine& engine, std::vector<std::shared_ptr<Ticket>> tickets, StreamSettings settings);

  // Appends the events that are ready to `out`, waiting up to `poll` for a step when none is.
  // Returns true once the stream is complete ([DONE] appended).
  bool next(std::chrono::milliseconds poll, std::string& out);
  bool complete() const { return complete_; }
  // Once complete without an error: every choice's answer (for the metrics and the access log).
  std::optional<Answer> answer() const;
  void cancel();  // every choice (the client went away)

 private:
  struct Choice {
    std::shared_ptr<Ticket> ticket;
    CommittedTextStream text;
    std::string sent;  // what the client has of the generated text (echo not counted)
    int64_t version = 0;
    bool done = false;
    std::optional<ChoiceAnswer> answer;
  };
  void start(std::string& out);
  void advance(Choice& choice, int64_t index, const Ticket::Progress& progress, std::string& out);
  void finish(Choice& choice, int64_t index, std::string& out);

  const Engine& engine_;
  StreamSettings settings_;
  std::vector<Choice> choices_;
  bool started_ = false, complete_ = false;
};

}  // namespace mosaic::serve
