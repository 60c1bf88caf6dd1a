// Every knob of the reference generation algorithms (docs/design/sampling.md), with the
// reference defaults, for LLaDA and Dream alike. Options of the other family left at their
// defaults are ignored; set away from them they are an error.
#pragma once

#include <cstdint>
#include <optional>

namespace mosaic {

enum class Remasking : uint8_t { low_confidence, random };
enum class DreamAlg : uint8_t { origin, maskgit_plus, topk_margin, entropy };
// The KV cache a request decodes with (docs/design/cached-decoding.md): automatic is the exact
// block cache on a block-causal model and none otherwise; prefix and dual are Fast-dLLM's
// approximate caches for full-attention models. Options once resolved name the mode used:
// none, prefix, dual or block (never automatic).
enum class CacheMode : uint8_t { automatic, none, prefix, dual, block };

struct GenerationOptions {
  int64_t gen_length = 128;        // positions appended to the prompt (Dream: max_new_tokens)
  int64_t steps = 128;             // denoising steps (an upper bound with threshold / factor)
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
  // Extensions
  bool stop_at_eos = false;
  int64_t eos_id = -1;             // -1: the config's eos_token_id
  int64_t eot_id = -1;             // end of turn; -1: the tokenizer's (<|eot_id|>, <|im_end|>) if any
};

}  // namespace mosaic
