// What the generation loop (BatchStepper) asks of one request's decoder, whatever its algorithm:
// the reference block loops of LLaDA and Dream (SequenceDecoder) or D2F's pipelined blocks
// (D2fDecoder). A decoder runs no model: it says what the next step must predict, and unmasks
// what its rule chooses once the predictions come back.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/block_attention.h"
#include "core/commit_rule.h"
#include "core/head_sampling.h"
#include "gen/host_sampler.h"
#include "model/config.h"
#include "mosaic/generation_options.h"

namespace mosaic {

struct DecoderStep {
  std::vector<int32_t> candidates;            // canvas positions to predict; empty: no forward
  std::vector<HeadRowSampling> sampling;      // one per candidate
  bool needs_logits = false;                  // top-p / top-k filter or CFG
  RowFilter filter;
  std::vector<int32_t> unconditional_canvas;  // CFG: the canvas with the prompt masked
  // A cached step (docs/design/cached-decoding.md §4): the forward computes only positions
  // [begin, end) against the request's KV cache. Not cached: every position, no cache.
  bool cached = false;
  int64_t begin = 0, end = 0;
  BlockLayout layout;                         // how the canvas's queries see keys
};

class RequestDecoder {
 public:
  virtual ~RequestDecoder() = default;

  virtual bool finished() const = 0;
  // Whether the request decodes with a KV cache (it holds one from its first step to its end).
  bool uses_cache() const { return cache_mode() != CacheMode::none; }
  virtual CacheMode cache_mode() const = 0;
  // prompt + generated region (+ suffix)
  virtual const std::vector<int32_t>& canvas() const = 0;
  virtual int64_t prompt_length() const = 0;
  virtual int64_t generation_end() const = 0;  // prompt + gen_length
  virtual int64_t steps_taken() const = 0;
  virtual int64_t forwards() const = 0;        // steps that ran a forward
  virtual int64_t masked() const = 0;          // masks left in the generated region
  virtual bool stopped_at_eos() const = 0;
  virtual double cfg_scale() const = 0;
  // Positions unmasked by the last step, in position order, and the confidence each was ranked by.
  virtual const std::vector<int32_t>& last_committed() const = 0;
  virtual const std::vector<float>& last_committed_confidence() const = 0;
  // With options.logprobs: every committed token's log-probabilities so far, in commit order.
  virtual const std::vector<TokenLogprob>& logprobs() const = 0;

  // What the next step needs. Call once per step, then commit() or commit_from_device().
  virtual const DecoderStep& prepare() = 0;
  virtual const DecoderStep& prepared() const = 0;
  // `stats`: [candidates, kHeadStatCount] from the fused head or the host sampler; null when
  // the step had no candidates.
  virtual void commit(const float* stats) = 0;
  // The prepared step's choice of positions as a rule the runner can apply on the device
  // (docs/design/device-commit.md); nullopt where the host must choose.
  virtual std::optional<CommitRule> device_commit_rule() const = 0;
  // commit() for a step committed on the device by device_commit_rule(): `rows` [candidates].
  virtual void commit_from_device(std::span<const CommittedRow> rows) = 0;
};

// The decoder the (validated) options ask for: D2F's when options.d2f is set, else the family's
// reference loop (LLaDA 2.x: block diffusion). `options` must have passed validate_generation_options (and validate_suffix
// for a suffix).
std::unique_ptr<RequestDecoder> make_request_decoder(const ModelConfig& config, std::vector<int32_t> prompt,
                                                     GenerationOptions options, std::vector<int32_t> suffix = {});

// How a row is sampled by the decoders that follow a reference's sample_tokens (D2F, LLaDA 2.x):
// a token drawn from softmax(logits / T) (the argmax at T = 0), ranked by its probability there;
// the mask token is never a choice (an "unmasking" to it would leave the position masked).
HeadRowSampling tempered_sampling(uint64_t seed, int64_t step, int32_t position, double temperature, int32_t mask);

// A device commit's outcome (RequestDecoder::commit_from_device) in the host's terms: the indices
// of the committed rows, and every row's token and confidence.
struct DeviceCommits {
  std::vector<size_t> chosen;
  std::vector<int32_t> tokens;
  std::vector<double> confidences;
};
DeviceCommits device_commits(std::span<const CommittedRow> rows);

// Writes the chosen candidates' tokens into `canvas` and reports them in position order: their
// positions into `committed`, their confidences into `committed_confidence` (both appended).
void write_commits(std::vector<size_t> chosen, std::span<const int32_t> candidates, std::span<const int32_t> tokens,
                   std::span<const double> confidences, std::vector<int32_t>& canvas, std::vector<int32_t>& committed,
                   std::vector<float>& committed_confidence);

// A committed token's log-probabilities from its row's head statistics (TokenLogprob);
// `position` is the canvas position, reported relative to `prompt_length`.
TokenLogprob token_logprob_from_stats(const float* stats, const HeadRowSampling& how, int32_t position,
                                      int64_t prompt_length);

}  // namespace mosaic
