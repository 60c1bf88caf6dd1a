#include "serve/choice_answer.h"

#include <algorithm>

#include "serve/stop_strings.h"

namespace mosaic::serve {

std::vector<int32_t> committed_prefix(const Engine& engine, std::span<const int32_t> output_ids,
                                      const GenerationOptions& options) {
  const int64_t mask = engine.info().mask_token_id, eos = engine.info().eos_token_id;
  std::vector<int32_t> prefix;
  for (const int32_t id : output_ids) {
    if (id == mask || id == eos || (options.eot_id >= 0 && id == options.eot_id)) break;
    prefix.push_back(id);
  }
  return prefix;
}

ChoiceAnswer choice_answer(const Engine& engine, const Ticket& ticket, const AnswerShape& shape) {
  const GenerateResult& result = *ticket.result();
  ChoiceAnswer answer;
  answer.result = &result;
  answer.record = &ticket.record();
  answer.seed = ticket.options.seed;
  // A request the scheduler ended at a stop string (not finished: cancelled in the session's
  // terms) keeps only its committed prefix: what lies after its first mask is not text yet.
  const std::vector<int32_t> ids = result.cancelled ? committed_prefix(engine, result.output_ids, ticket.options)
                                                    : engine.answer_ids(result.output_ids, ticket.options);
  std::string text = result.cancelled ? engine.decode(ids) : result.text;
  const int64_t eos = engine.info().eos_token_id, eot = ticket.options.eot_id;
  const bool ended = std::any_of(result.output_ids.begin(), result.output_ids.end(),
                                 [&](int32_t id) { return id == eos || (eot >= 0 && id == eot); });
  answer.finish_reason = ended ? "stop" : "length";
  const std::optional<size_t> stop = find_stop(text, shape.stop);
  if (stop) {
    text.resize(*stop);
    answer.finish_reason = "stop";
  }
  // The tokens the kept text is made of: each decoded alone, up to the cut.
  size_t covered = 0;
  std::vector<std::pair<int32_t, std::string>> kept;
  for (const int32_t id : ids) {
    if (stop && covered >= text.size()) break;
    std::string piece = engine.decode(std::span(&id, 1));
    covered += piece.size();
    kept.emplace_back(id, std::move(piece));
  }
  answer.completion_tokens = static_cast<int64_t>(stop ? kept.size() : ids.size());
  answer.text = shape.echo + text;
  if (shape.logprobs) {
    // The kept tokens are the region's in order (masks left out; a stopped request's end at its
    // first mask), so the i-th kept token sits at the i-th such position.
    const int64_t mask = engine.info().mask_token_id;
    std::vector<const TokenLogprob*> at(result.output_ids.size(), nullptr);
    for (const TokenLogprob& lp : result.logprobs)
      if (lp.position >= 0 && lp.position < static_cast<int64_t>(at.size())) at[lp.position] = &lp;
    int64_t offset = static_cast<int64_t>(shape.echo.size());
    size_t next = 0;
    for (size_t p = 0; p < result.output_ids.size() && next < kept.size(); ++p) {
      if (result.output_ids[p] == mask) continue;
      AnswerToken token;
      token.text = kept[next++].second;
      token.offset = offset;
      offset += static_cast<int64_t>(token.text.size());
      if (const TokenLogprob* lp = at[p]) {
        token.logprob = lp->logprob;
        for (size_t t = 0; t < lp->top.size() && static_cast<int64_t>(t) < *shape.logprobs; ++t) {
          const int32_t id = lp->top[t].first;
          token.top.emplace_back(engine.decode(std::span(&id, 1)), lp->top[t].second);
        }
      }
      answer.tokens.push_back(std::move(token));
    }
  }
  return answer;
}

}  // namespace mosaic::serve
