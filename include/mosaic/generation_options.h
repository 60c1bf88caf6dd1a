// Every knob of the reference generation algorithms (docs/design/sampling.md), with the
// reference defaults, for LLaDA and Dream alike. Options of the other family left at their
// defaults are ignored; set away from them they are an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mosaic/error.h"

namespace mosaic {

enum class Remasking : uint8_t { low_confidence, random };
enum class DreamAlg : uint8_t { origin, maskgit_plus, topk_margin, entropy };
// The KV cache a request decodes with (docs/design/cached-decoding.md): automatic is the exact
// block cache on a block-causal model and none otherwise; prefix and dual are Fast-dLLM's
// approximate caches for full-attention models. Options once resolved name the mode used:
// none, prefix, dual or block (never automatic).
enum class CacheMode : uint8_t { automatic, none, prefix, dual, block };

// D2F's pipelined block decoding (docs/design/d2f-decoding.md), with the reference's defaults.
// Blocks of block_length (0: kD2fDefaultBlockLength, or gen_length if shorter) from the prompt's
// end, attended block-causally; `steps` does not apply (max_steps caps the loop).
inline constexpr int64_t kD2fDefaultBlockLength = 32;
struct D2fOptions {
  double block_add_threshold = 0.5;      // append a block once the last one is this decoded
  double decoded_token_threshold = 0.9;  // fully activate block i + 1 once block i is this decoded
  double skip_threshold = 1.0;           // accept a token whose confidence is above this
  int64_t max_steps = 10000;             // the reference loop's safety cap
};

// LLaDA 2.x's block diffusion (its generate()'s defaults): blocks of 32 on the grid from position
// 0, commit threshold 0.95; `steps` counts the steps of each block (capped at gen_length).
inline constexpr int64_t kBlockDiffusionDefaultBlockLength = 32;
inline constexpr double kBlockDiffusionDefaultThreshold = 0.95;

// LLaDA 2.1's token editing (its generate()'s defaults; docs/design/block-diffusion.md): each step
// of a block commits, of its masked positions, all above `threshold` if num_to_transfer of them are,
// else the num_to_transfer most confident (mask to token), and replaces every already-placed,
// non-prompt token of the block whose new prediction differs with probability above
// editing_threshold (token to token); once the block has no masks it takes up to max_post_steps
// more steps, ending at the first that edits nothing. `steps` does not apply.
struct TokenEditing {
  double editing_threshold = 0.9;
  int64_t max_post_steps = 16;
  int64_t num_to_transfer = 1;
};

struct GenerationOptions {
  int64_t gen_length = 128;        // positions appended to the prompt (Dream: max_new_tokens)
  int64_t steps = 128;             // denoising steps (an upper bound with threshold / factor;
                                   // LLaDA 2.x: per block)
  int64_t block_length = 0;        // semi-autoregressive blocks; 0 = one block (Dream: no blocks)
  double temperature = 0;
  uint64_t seed = 0;
  // LLaDA
  double cfg_scale = 0;
  Remasking remasking = Remasking::low_confidence;
  bool logits_eos_inf = false;
  bool confidence_eos_eot_inf = false;
  // Dream
  DreamAlg alg = DreamAlg::origin;
  std::optional<double> alg_temp;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  double eps = 1e-3;
  // Fast-dLLM parallel decoding (both families)
  std::optional<double> threshold;
  std::optional<double> factor;
  // KV cache (both families)
  CacheMode cache = CacheMode::automatic;
  // D2F decoding (both families; a D2F adapter's model): set, it replaces the block loop and its
  // rule (steps, threshold, factor, remasking do not apply).
  std::optional<D2fOptions> d2f;
  // LLaDA 2.x: set, block diffusion edits placed tokens as LLaDA 2.1 does.
  std::optional<TokenEditing> editing;
  // Extensions
  bool stop_at_eos = false;
  int64_t eos_id = -1;             // -1: the config's eos_token_id
  int64_t eot_id = -1;             // end of turn; -1: the tokenizer's (<|eot_id|>, <|im_end|>) if any
  // Record each committed token's log-probability under the step that committed it, with the
  // step's two most likely tokens (TokenLogprob). Costs nothing on the CPU; on a GPU it keeps
  // the commit on the host, where the fused head's per-row statistics arrive.
  bool logprobs = false;
};

// One committed token's log-probabilities, from the fused LM head's per-row statistics of the
// step that committed it (docs/design/openai-surface.md): log p = logit - log-sum-exp over the
// statistics' set (LLaDA: the raw logits; Dream: logits / temperature; ids banned from the
// statistics are left out; a filter's cut ids too). `top` holds the row's most likely tokens,
// best first: the head keeps the top 2 (kMaxTopLogprobs).
struct TokenLogprob {
  int64_t position = 0;   // in the generated region
  int32_t token = -1;
  double logprob = 0;     // -infinity when the token is outside the statistics' set
  std::vector<std::pair<int32_t, double>> top;
};
inline constexpr int kMaxTopLogprobs = 2;

// A generation option that is wrong: an Error that also names the option (the GenerationOptions
// field, e.g. "steps", "block_length", "gen_length"; "suffix" for the infilling suffix), so that
// a caller can point at its own spelling of it (the server's "max_tokens").
class OptionError : public Error {
 public:
  OptionError(std::string option, const std::string& message) : Error(message), option_(std::move(option)) {}
  const std::string& option() const { return option_; }

 private:
  std::string option_;
};

}  // namespace mosaic
