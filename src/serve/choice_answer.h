// One choice of an answer, from its finished ticket: the text as the request asked for it (cut
// before the first stop string, after the echoed prompt), why it ended, how many tokens it used,
// and with logprobs the log-probabilities of the tokens it kept (docs/design/openai-surface.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mosaic/engine.h"
#include "serve/ticket.h"

namespace mosaic::serve {

// What shapes every choice of a request.
struct AnswerShape {
  std::vector<std::string> stop;
  std::string echo;                    // text the answer starts with (the prompt, with echo)
  std::optional<int64_t> logprobs;     // top log-probabilities per token, when asked for
};

struct AnswerToken {
  std::string text;                    // the token decoded alone
  double logprob = 0;
  std::vector<std::pair<std::string, double>> top;
  int64_t offset = 0;                  // where it starts in the choice's text
};

struct ChoiceAnswer {
  std::string text;
  // "stop": the answer ended (EOS / end of turn / a stop string); "length": it did not.
  std::string finish_reason;
  int64_t completion_tokens = 0;
  std::vector<AnswerToken> tokens;     // with logprobs: the answer's tokens, in order
  const GenerateResult* result = nullptr;
  const RequestRecord* record = nullptr;
  uint64_t seed = 0;
};

// The committed contiguous prefix of a generated region: the tokens before the first mask, EOS
// or end of turn.
std::vector<int32_t> committed_prefix(const Engine& engine, std::span<const int32_t> output_ids,
                                      const GenerationOptions& options);

// `ticket` must have completed.
ChoiceAnswer choice_answer(const Engine& engine, const Ticket& ticket, const AnswerShape& shape);

}  // namespace mosaic::serve
