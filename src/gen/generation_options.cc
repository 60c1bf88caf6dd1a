#include "gen/generation_options.h"

#include <cmath>

#include "core/error.h"

namespace mosaic {

std::string_view remasking_name(Remasking remasking) {
  return remasking == Remasking::low_confidence ? "low_confidence" : "random";
}

std::string_view dream_alg_name(DreamAlg alg) {
  switch (alg) {
    case DreamAlg::origin: return "origin";
    case DreamAlg::maskgit_plus: return "maskgit_plus";
    case DreamAlg::topk_margin: return "topk_margin";
    case DreamAlg::entropy: return "entropy";
  }
  return "?";
}

std::optional<Remasking> parse_remasking(std::string_view name) {
  if (name == "low_confidence") return Remasking::low_confidence;
  if (name == "random") return Remasking::random;
  return std::nullopt;
}

std::optional<DreamAlg> parse_dream_alg(std::string_view name) {
  for (DreamAlg alg : {DreamAlg::origin, DreamAlg::maskgit_plus, DreamAlg::topk_margin, DreamAlg::entropy})
    if (dream_alg_name(alg) == name) return alg;
  return std::nullopt;
}

std::string_view cache_mode_name(CacheMode mode) {
  switch (mode) {
    case CacheMode::automatic: return "auto";
    case CacheMode::none: return "none";
    case CacheMode::prefix: return "prefix";
    case CacheMode::dual: return "dual";
    case CacheMode::block: return "block";
  }
  return "?";
}

std::optional<CacheMode> parse_cache_mode(std::string_view name) {
  for (CacheMode mode : {CacheMode::automatic, CacheMode::none, CacheMode::prefix, CacheMode::dual})
    if (cache_mode_name(mode) == name) return mode;
  return std::nullopt;
}

namespace {

template <typename... Args>
[[noreturn]] void fail_option(const char* option, fmt::format_string<Args...> format, Args&&... args) {
  throw OptionError(option, fmt::format(format, std::forward<Args>(args)...));
}

// The mode a request decodes with (cached-decoding.md §3).
CacheMode resolve_cache_mode(const ModelConfig& config, const GenerationOptions& o) {
  const bool block_causal = config.block_attention != BlockAttention::none;
  switch (o.cache) {
    case CacheMode::automatic: return block_causal ? CacheMode::block : CacheMode::none;
    case CacheMode::none: return CacheMode::none;
    case CacheMode::block:
      if (!block_causal) fail_option("cache", "cache block is the exact cache of block-causal models; this model attends fully (use prefix or dual)");
      return CacheMode::block;
    case CacheMode::prefix:
    case CacheMode::dual:
      if (block_causal)
        fail_option("cache", "cache {}: the model is block-causal (block_attention \"{}\") and decodes with its exact block cache "
             "(cache auto); prefix and dual are approximations for full-attention models",
             cache_mode_name(o.cache), block_attention_name(config.block_attention));
      if (o.cfg_scale > 0)
        fail_option("cache", "cache {} cannot run cfg_scale {}: the unconditional canvas has no cache (use cache none)",
             cache_mode_name(o.cache), o.cfg_scale);
      return o.cache;
  }
  fail_option("cache", "unknown cache mode");
}

bool by_rule(const GenerationOptions& o) { return o.threshold.has_value() || o.factor.has_value(); }

// Blocks of B over a generation of G that do not depend on the prompt (all but absolute ones).
void check_blocks(const ModelConfig& config, GenerationOptions& o, bool dream) {
  if (o.block_length == 0) o.block_length = o.gen_length;
  if (o.block_length < 1) fail_option("block_length", "block_length must be at least 1, got {}", o.block_length);
  if (config.block_attention == BlockAttention::absolute) return;  // validate_for_prompt
  if (o.block_length > o.gen_length)
    fail_option("block_length", "block_length {} must be between 1 and gen_length {}", o.block_length, o.gen_length);
  if (o.gen_length % o.block_length != 0)
    fail_option("block_length", "gen_length {} is not a multiple of block_length {}", o.gen_length, o.block_length);
  const int64_t blocks = o.gen_length / o.block_length;
  if (!by_rule(o) && o.steps % blocks != 0)
    fail_option("steps", "steps {} is not divisible by the number of blocks {} (gen_length / block_length)", o.steps, blocks);
  if (dream && !by_rule(o) && o.steps / blocks < 2)
    fail_option("steps", "steps {} over {} blocks: Dream's block decoding needs at least 2 steps per block", o.steps, blocks);
}

}  // namespace

bool decodes_in_blocks(const ModelConfig& config, const GenerationOptions& options) {
  return config.family != Family::dream || options.block_length > 0;
}

BlockLayout block_layout(const ModelConfig& config, int64_t prompt_length, const GenerationOptions& options) {
  return {config.block_attention, prompt_length, options.block_length, prompt_length + options.gen_length};
}

void validate_for_prompt(const ModelConfig& config, int64_t prompt_length, const GenerationOptions& o) {
  if (config.block_attention != BlockAttention::absolute || !decodes_in_blocks(config, o)) return;
  if (config.family == Family::llada2) return;  // steps are per block, any count of blocks
  const int64_t length = prompt_length + o.gen_length, block = o.block_length;
  const int64_t blocks = (length + block - 1) / block - prompt_length / block;
  if (!by_rule(o) && o.steps % blocks != 0)
    fail_option("steps", "steps {} is not divisible by the {} blocks of {} the generation meets (positions {} to {} on a grid from 0)",
         o.steps, blocks, block, prompt_length, length);
  if (config.family == Family::dream && !by_rule(o) && o.steps / blocks < 2)
    fail_option("steps", "steps {} over {} blocks: Dream's block decoding needs at least 2 steps per block", o.steps, blocks);
}

void validate_suffix(const ModelConfig& config, const GenerationOptions& o, int64_t suffix_length) {
  if (suffix_length == 0) return;
  if (o.d2f)
    fail_option("suffix", "a suffix cannot be combined with D2F decoding: its blocks attend block-causally and would "
                "never see the suffix");
  if (config.block_attention != BlockAttention::none)
    fail_option("suffix", "a suffix needs full attention: this model is block-causal (block_attention \"{}\"), so "
                "the generated blocks would never see the suffix", block_attention_name(config.block_attention));
  if (o.cache != CacheMode::none && o.cache != CacheMode::automatic)
    fail_option("suffix", "a suffix decodes without a KV cache (cache none or auto), got cache {}",
                cache_mode_name(o.cache));
  if (o.cfg_scale > 0)
    fail_option("suffix", "a suffix cannot be combined with cfg_scale {} (classifier-free guidance masks the "
                "prompt only)", o.cfg_scale);
}

namespace {

// What every decoder checks: the generation's length, temperature, end ids.
void check_common(const ModelConfig& config, GenerationOptions& o) {
  if (o.gen_length < 1) fail_option("gen_length", "gen_length must be at least 1, got {}", o.gen_length);
  if (o.gen_length > kMaxStepPositions)
    fail_option("gen_length", "gen_length {} exceeds the {} positions a step can hold", o.gen_length, kMaxStepPositions);
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    fail_option("temperature", "temperature must be a finite number >= 0, got {}", o.temperature);
  if (o.temperature > 0 && o.temperature < kMinTemperature)
    fail_option("temperature", "temperature must be 0 (greedy) or at least {}, got {}: smaller values overflow the sampling arithmetic",
         kMinTemperature, o.temperature);
  if (o.eos_id < -1) fail_option("eos_id", "eos_id must be a token id (>= 0, or -1 for the config's), got {}", o.eos_id);
  if (o.eot_id < -1) fail_option("eot_id", "eot_id must be a token id (>= 0, or -1 for the tokenizer's), got {}", o.eot_id);
  if (o.eos_id < 0) o.eos_id = config.eos_token_id;
  if (o.eos_id >= config.vocab) fail_option("eos_id", "eos id {} is outside the vocabulary of {} tokens", o.eos_id, config.vocab);
  if (o.eot_id >= config.vocab) fail_option("eot_id", "eot id {} is outside the vocabulary of {} tokens", o.eot_id, config.vocab);
}

// What a decoder with its own rule over block-causal blocks (D2F, LLaDA 2.x's block diffusion)
// refuses of the block loops' options, and its cache: the exact block cache (auto) or none.
void check_own_block_rule(GenerationOptions& o, std::string_view decoder) {
  if (o.remasking != Remasking::low_confidence)
    fail_option("remasking", "{} ranks by confidence; remasking=random does not apply", decoder);
  if (o.cfg_scale != 0)
    fail_option("cfg_scale", "{} has no classifier-free guidance (cfg_scale must be 0, got {})", decoder, o.cfg_scale);
  if (o.logits_eos_inf || o.confidence_eos_eot_inf)
    fail_option("logits_eos_inf", "logits_eos_inf / confidence_eos_eot_inf are LLaDA's block-loop options; {} does not "
                "use them", decoder);
  if (o.alg != DreamAlg::origin || o.alg_temp || o.top_p || o.top_k || o.eps != 1e-3)
    fail_option("alg", "alg, alg_temp, top_p, top_k and eps are Dream's schedule options; {} does not use them", decoder);
  switch (o.cache) {
    case CacheMode::automatic: case CacheMode::block: o.cache = CacheMode::block; break;
    case CacheMode::none: break;
    default:
      fail_option("cache", "cache {}: {} decodes with its exact block cache (cache auto) or none; prefix and dual are "
                  "approximations for full-attention decoding", cache_mode_name(o.cache), decoder);
  }
}

// D2F's pipelined blocks (docs/design/d2f-decoding.md): its own rule replaces the block loop's.
void check_d2f(const ModelConfig& config, GenerationOptions& o) {
  const D2fOptions& d = *o.d2f;
  const std::pair<const char*, double> thresholds[] = {{"block_add_threshold", d.block_add_threshold},
                                                       {"decoded_token_threshold", d.decoded_token_threshold},
                                                       {"skip_threshold", d.skip_threshold}};
  for (const auto& [name, value] : thresholds)
    if (!(value >= 0 && value <= 1)) fail_option(name, "{} must be in [0, 1], got {}", name, value);
  if (d.max_steps < 1) fail_option("max_steps", "D2F's max_steps must be at least 1, got {}", d.max_steps);
  if (o.block_length == 0) o.block_length = std::min(kD2fDefaultBlockLength, o.gen_length);
  if (o.block_length < 1) fail_option("block_length", "block_length must be at least 1, got {}", o.block_length);
  if (o.block_length > o.gen_length || o.gen_length % o.block_length != 0)
    fail_option("block_length", "D2F: gen_length {} must be a multiple of block_length {} (its blocks are whole)",
                o.gen_length, o.block_length);
  if (config.block_attention == BlockAttention::absolute)
    fail_option("d2f", "D2F decodes blocks from the prompt's end, but this model's blocks lie on a grid from position 0 "
                "(block_attention \"absolute\")");
  if (o.threshold || o.factor)
    fail_option(o.threshold ? "threshold" : "factor",
                "D2F has its own acceptance rule (skip_threshold); threshold and factor do not apply");
  check_own_block_rule(o, "D2F");
}

// LLaDA 2.x's block diffusion (gen/block_diffusion_decoder.h): steps per block, a threshold
// always (the reference's 0.95 unless given), any block length, the exact block cache or none.
void check_block_diffusion(GenerationOptions& o) {
  if (o.block_length == 0) o.block_length = kBlockDiffusionDefaultBlockLength;
  if (o.block_length < 1) fail_option("block_length", "block_length must be at least 1, got {}", o.block_length);
  if (o.steps < 1) fail_option("steps", "steps (per block) must be at least 1, got {}", o.steps);
  if (!o.threshold) o.threshold = kBlockDiffusionDefaultThreshold;
  if (!(*o.threshold >= 0 && *o.threshold <= 1))
    fail_option("threshold", "threshold must be in [0, 1], got {}", *o.threshold);
  if (o.factor) fail_option("factor", "LLaDA 2.x commits by its threshold rule; factor does not apply");
  if (o.editing) {
    const TokenEditing& e = *o.editing;
    if (!(e.editing_threshold >= 0 && e.editing_threshold <= 1))
      fail_option("editing_threshold", "editing_threshold must be in [0, 1], got {}", e.editing_threshold);
    if (e.max_post_steps < 0)
      fail_option("max_post_steps", "max_post_steps must be at least 0, got {}", e.max_post_steps);
    if (e.num_to_transfer < 1)
      fail_option("num_to_transfer", "num_to_transfer must be at least 1, got {}", e.num_to_transfer);
    if (o.logprobs)
      fail_option("logprobs", "logprobs are reported per committed token; token editing replaces tokens already "
                  "reported, so the two cannot be combined");
  }
  check_own_block_rule(o, "LLaDA 2.x");
}

}  // namespace

void validate_generation_options(const ModelConfig& config, GenerationOptions& o) {
  check_common(config, o);
  if (o.editing && config.family != Family::llada2)
    fail_option("editing_threshold", "token editing is LLaDA 2.1's decoding; this model is {}", family_name(config.family));
  if (o.d2f) return check_d2f(config, o);
  if (config.family == Family::llada2) return check_block_diffusion(o);
  if (o.steps < 1) fail_option("steps", "steps must be at least 1, got {}", o.steps);
  if (o.steps > o.gen_length && !by_rule(o))
    fail_option("steps",
                "steps {} exceeds gen_length {}: a step unmasks at least one of the gen_length positions, so more "
                "steps than positions only repeat forwards (with threshold or factor, steps is a cap and may be larger)",
                o.steps, o.gen_length);
  if (o.threshold && o.factor) fail_option("threshold", "give either threshold or factor, not both");
  if (o.threshold && !(*o.threshold >= 0 && *o.threshold <= 1))
    fail_option("threshold", "threshold must be in [0, 1], got {}", *o.threshold);
  if (o.factor && !(*o.factor > 0)) fail_option("factor", "factor must be > 0, got {}", *o.factor);
  if (!(o.cfg_scale >= 0 && o.cfg_scale <= kMaxCfgScale))
    fail_option("cfg_scale", "cfg_scale must be in [0, {}], got {}", kMaxCfgScale, o.cfg_scale);
  o.cache = resolve_cache_mode(config, o);

  if (config.family == Family::dream) {
    if (o.cfg_scale != 0) fail_option("cfg_scale", "cfg_scale applies to LLaDA models, not Dream");
    if (o.remasking != Remasking::low_confidence) fail_option("remasking", "remasking applies to LLaDA models, not Dream (use alg)");
    if (o.logits_eos_inf || o.confidence_eos_eot_inf)
      fail_option("logits_eos_inf", "logits_eos_inf / confidence_eos_eot_inf apply to LLaDA models, not Dream");
    if (!(o.eps > 0 && o.eps < 1)) fail_option("eps", "eps must be in (0, 1), got {}", o.eps);
    // Fast-dLLM's block decoding (cached-decoding.md §2): asked for, or needed by a cache; the
    // whole canvas otherwise (block_length 0).
    if (o.block_length < 0) fail_option("block_length", "block_length must be at least 1, got {}", o.block_length);
    if (o.block_length != 0 || o.cache != CacheMode::none || config.block_attention != BlockAttention::none)
      check_blocks(config, o, true);
    if (o.top_p && !(*o.top_p > 0 && *o.top_p <= 1)) fail_option("top_p", "top_p must be in (0, 1], got {}", *o.top_p);
    if (o.top_k && *o.top_k < 1) fail_option("top_k", "top_k must be at least 1, got {}", *o.top_k);
    if (o.alg_temp && !(*o.alg_temp >= 0)) fail_option("alg_temp", "alg_temp must be >= 0, got {}", *o.alg_temp);
    if ((o.threshold || o.factor) && o.alg == DreamAlg::origin)
      o.alg = DreamAlg::maskgit_plus;  // the rules rank by the chosen token's probability
    return;
  }
  // LLaDA (and LLaDA-MoE once supported).
  if (o.alg != DreamAlg::origin || o.alg_temp || o.top_p || o.top_k || o.eps != 1e-3)
    fail_option("alg", "alg, alg_temp, top_p, top_k and eps apply to Dream models, not LLaDA");
  check_blocks(config, o, false);
  if (o.remasking == Remasking::random && (o.threshold || o.factor))
    fail_option("remasking", "threshold / factor decoding ranks by confidence; it cannot use remasking=random");
}

}  // namespace mosaic
