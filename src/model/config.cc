#include "model/config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/json_parse.h"
#include "core/printable.h"
#include "core/regular_file.h"

namespace mosaic {
namespace {

using nlohmann::json;

// Typed access to config.json fields with one-line errors that name the file and the field.
class ConfigFields {
 public:
  ConfigFields(const json& root, std::string_view source, std::string_view family)
      : root_(root), source_(source), family_(family) {}

  bool has(const char* name) const { return root_.contains(name) && !root_.at(name).is_null(); }

  int64_t integer(const char* name, int64_t lo, int64_t hi) const {
    if (!has(name)) fail("{}: missing field '{}' ({} config)", source_, name, family_);
    return checked_integer(name, lo, hi);
  }

  int64_t integer_or(const char* name, int64_t fallback, int64_t lo, int64_t hi) const {
    return has(name) ? checked_integer(name, lo, hi) : fallback;
  }

  double number_or(const char* name, double fallback, double lo, double hi) const {
    if (!has(name)) return fallback;
    const json& value = root_.at(name);
    if (!value.is_number())
      fail("{}: field '{}' must be a number, got {}", source_, name, value.dump());
    const double number = value.get<double>();
    if (!(number >= lo && number <= hi))  // also rejects NaN
      fail("{}: field '{}' = {} is out of range [{}, {}]", source_, name, number, lo, hi);
    return number;
  }

  bool boolean_or(const char* name, bool fallback) const {
    if (!has(name)) return fallback;
    const json& value = root_.at(name);
    if (!value.is_boolean())
      fail("{}: field '{}' must be true or false, got {}", source_, name, value.dump());
    return value.get<bool>();
  }

  std::string string_or(const char* name, std::string_view fallback) const {
    if (!has(name)) return std::string(fallback);
    const json& value = root_.at(name);
    if (!value.is_string())
      fail("{}: field '{}' must be a string, got {}", source_, name, value.dump());
    return value.get<std::string>();
  }

  // A feature Mosaic does not implement: the field must be absent, null, or equal `supported`.
  template <typename T>
  void require(const char* name, const T& supported, std::string_view why) const {
    if (!has(name)) return;
    const json& value = root_.at(name);
    if (value != json(supported))
      fail("{}: field '{}' = {} is not supported ({}; expected {})", source_, name, value.dump(),
           why, json(supported).dump());
  }

  void require_null(const char* name, std::string_view why) const {
    if (has(name))
      fail("{}: field '{}' = {} is not supported ({}; expected null)", source_, name,
           root_.at(name).dump(), why);
  }

  std::string_view source() const { return source_; }

 private:
  int64_t checked_integer(const char* name, int64_t lo, int64_t hi) const {
    const json& value = root_.at(name);
    if (!value.is_number_integer())
      fail("{}: field '{}' must be an integer, got {}", source_, name, value.dump());
    if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(hi))
      fail("{}: field '{}' = {} is out of range [{}, {}]", source_, name, value.dump(), lo, hi);
    const int64_t number = value.get<int64_t>();
    if (number < lo || number > hi)
      fail("{}: field '{}' = {} is out of range [{}, {}]", source_, name, number, lo, hi);
    return number;
  }

  const json& root_;
  std::string_view source_;
  std::string_view family_;
};

// Generous bounds: they only keep byte arithmetic far from overflow on hostile input.
constexpr int64_t kMaxHidden = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxFfn = int64_t{1} << 22;
constexpr int64_t kMaxExperts = int64_t{1} << 16;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max();
// A released config.json is a few KiB; the cap bounds what a hostile one costs (the parsed form
// takes about twice the text).
constexpr uint64_t kConfigJsonMaxBytes = uint64_t{16} << 20;

// The shape facts every family shares, checked once.
void check_shape(const ModelConfig& config, std::string_view source, const char* hidden_field,
                 const char* heads_field, const char* kv_heads_field) {
  if (config.hidden % config.heads != 0)
    fail("{}: '{}' = {} is not divisible by '{}' = {}", source, hidden_field, config.hidden,
         heads_field, config.heads);
  if (config.heads % config.kv_heads != 0)
    fail("{}: '{}' = {} is not divisible by '{}' = {}", source, heads_field, config.heads,
         kv_heads_field, config.kv_heads);
  if (config.head_dim % 2 != 0)
    fail("{}: head dimension {} ('{}' / '{}') must be even for rotary embeddings", source,
         config.head_dim, hidden_field, heads_field);
}

// Special token ids index the embedding and the logits: one outside the vocabulary would be
// looked up out of bounds or never be produced (generation would not stop at an eos it cannot
// sample). A family default the config did not override is named as such, in the error and in
// config.token_ids_from_family.
void check_token_ids(ModelConfig& config, const ConfigFields& fields) {
  const std::pair<const char*, int64_t> ids[] = {{"mask_token_id", config.mask_token_id},
                                                 {"eos_token_id", config.eos_token_id},
                                                 {"pad_token_id", config.pad_token_id}};
  for (const auto& [name, id] : ids)
    if (id >= config.vocab)
      fail("{}: {} {} is outside the vocabulary of {} tokens{}", fields.source(), name, id, config.vocab,
           fields.has(name) ? "" : fmt::format(" (the family's default: config.json has no '{}')", name));
  config.token_ids_from_family = {!fields.has("mask_token_id"), !fields.has("eos_token_id")};
}

// "block_attention": Mosaic's field for models that attend block-causally (until a family's own
// folder says so: the D2F adapter, the LLaDA 2.x classes).
BlockAttention block_attention_of(const ConfigFields& fields) {
  const std::string kind = fields.string_or("block_attention", "full");
  for (const BlockAttention candidate : {BlockAttention::none, BlockAttention::prompt, BlockAttention::absolute})
    if (kind == block_attention_name(candidate)) return candidate;
  fail("{}: field 'block_attention' = \"{}\" is not a block layout (expected \"prompt\" or \"absolute\", "
       "or no field for full attention)", fields.source(), kind);
}

// The decoder stack's shape under the Hugging Face names (Dream, LLaDA-MoE): hidden_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads; head_dim, when given, must be
// hidden / heads.
void read_hf_layer_shape(const ConfigFields& fields, ModelConfig& config) {
  config.hidden = fields.integer("hidden_size", 1, kMaxHidden);
  config.layers = fields.integer("num_hidden_layers", 1, kMaxLayers);
  config.heads = fields.integer("num_attention_heads", 1, kMaxHeads);
  config.kv_heads = fields.integer_or("num_key_value_heads", config.heads, 1, kMaxHeads);
  config.head_dim = config.hidden / config.heads;
  if (fields.has("head_dim") && fields.integer("head_dim", 1, kMaxHidden) != config.head_dim)
    fail("{}: field 'head_dim' differs from hidden_size / num_attention_heads ({}); not supported", fields.source(),
         config.head_dim);
}

ModelConfig parse_llada(const json& root, std::string_view source, std::string architecture) {
  const ConfigFields fields(root, source, "LLaDA");
  ModelConfig config;
  config.family = Family::llada;
  config.architecture = std::move(architecture);
  config.hidden = fields.integer("d_model", 1, kMaxHidden);
  config.layers = fields.integer("n_layers", 1, kMaxLayers);
  config.heads = fields.integer("n_heads", 1, kMaxHeads);
  config.kv_heads = fields.integer_or("n_kv_heads", config.heads, 1, kMaxHeads);
  if (fields.boolean_or("multi_query_attention", false)) config.kv_heads = 1;
  config.head_dim = config.hidden / config.heads;
  // mlp_hidden_size wins over mlp_ratio when set (LLaDA's configuration class does the same).
  config.ffn = fields.has("mlp_hidden_size")
                   ? fields.integer("mlp_hidden_size", 1, kMaxFfn)
                   : fields.integer_or("mlp_ratio", 4, 1, 64) * config.hidden;
  if (config.ffn > kMaxFfn) fail("{}: MLP width {} is out of range", source, config.ffn);
  const int64_t vocab_size = fields.integer("vocab_size", 1, kMaxVocab);
  config.vocab = fields.integer_or("embedding_size", vocab_size, 1, kMaxVocab);
  if (config.vocab < vocab_size)
    fail("{}: embedding_size {} is smaller than vocab_size {}", source, config.vocab, vocab_size);
  config.rope_theta = fields.number_or("rope_theta", 10000.0, 1.0, 1e12);
  config.rms_eps = fields.number_or("rms_norm_eps", 1e-5, 0.0, 1.0);
  config.qkv_bias = fields.boolean_or("include_qkv_bias", false);
  config.tied_embeddings = fields.boolean_or("weight_tying", false);
  config.mask_token_id = fields.integer_or("mask_token_id", 126336, 0, kMaxTokenId);
  config.eos_token_id = fields.integer_or("eos_token_id", 126081, 0, kMaxTokenId);
  config.pad_token_id = fields.integer_or("pad_token_id", config.eos_token_id, 0, kMaxTokenId);
  config.max_position = fields.integer_or("max_sequence_length", 0, 0, int64_t{1} << 40);
  config.torch_dtype = fields.string_or("torch_dtype", "");

  // LLaDA-8B's architecture: a llama-style block with RMSNorm, SiLU-gated MLP and RoPE. The
  // OLMo configuration class behind LLaDA has switches for other variants; refuse those.
  fields.require("block_type", "llama", "only the llama block of LLaDA-8B is implemented");
  fields.require("activation_type", "silu", "the MLP is SiLU-gated");
  fields.require("layer_norm_type", "rms", "only RMSNorm is implemented");
  fields.require("layer_norm_with_affine", true, "norms carry a weight");
  fields.require("bias_for_layer_norm", false, "norms carry no bias");
  fields.require("rope", true, "positions are rotary");
  fields.require("alibi", false, "ALiBi is not implemented");
  fields.require("attention_layer_norm", false, "no QK layer norm in LLaDA");
  fields.require("scale_logits", false, "logits are not scaled");
  fields.require("input_emb_norm", false, "the embedding is not normalised");
  fields.require("include_bias", false, "only q/k/v biases (include_qkv_bias) are implemented");
  fields.require_null("clip_qkv", "q/k/v clipping is not implemented");
  config.block_attention = block_attention_of(fields);
  check_shape(config, source, "d_model", "n_heads", "n_kv_heads");
  check_token_ids(config, fields);
  return config;
}

ModelConfig parse_dream(const json& root, std::string_view source, std::string architecture) {
  const ConfigFields fields(root, source, "Dream");
  ModelConfig config;
  config.family = Family::dream;
  config.architecture = std::move(architecture);
  read_hf_layer_shape(fields, config);
  config.ffn = fields.integer("intermediate_size", 1, kMaxFfn);
  config.vocab = fields.integer("vocab_size", 1, kMaxVocab);
  config.rope_theta = fields.number_or("rope_theta", 10000.0, 1.0, 1e12);
  config.rms_eps = fields.number_or("rms_norm_eps", 1e-6, 0.0, 1.0);
  config.qkv_bias = true;  // hard-coded in Dream's modeling code, whatever the config says
  config.tied_embeddings = fields.boolean_or("tie_word_embeddings", false);
  config.mask_token_id = fields.integer_or("mask_token_id", 151666, 0, kMaxTokenId);
  config.eos_token_id = fields.integer_or("eos_token_id", 151643, 0, kMaxTokenId);
  config.pad_token_id = fields.integer_or("pad_token_id", 151643, 0, kMaxTokenId);
  config.max_position = fields.integer_or("max_position_embeddings", 0, 0, int64_t{1} << 40);
  config.torch_dtype = fields.string_or("torch_dtype", "");

  fields.require("hidden_act", "silu", "the MLP is SiLU-gated");
  fields.require("use_sliding_window", false, "attention is full and bidirectional");
  fields.require_null("rope_scaling", "rotary scaling is not implemented");
  config.block_attention = block_attention_of(fields);
  check_shape(config, source, "hidden_size", "num_attention_heads", "num_key_value_heads");
  check_token_ids(config, fields);
  return config;
}

// LLaDA-MoE-7B-A1B (moe-models.md section 1): HF field names, no mask id in the released config
// (156895, the id every peer uses), eos 156892. Fields the released forward ignores
// (norm_topk_prob, moe_router_score_function, routed_scaling_factor, router groups) are ignored
// here too; fields that would change the forward are refused unless they hold the released value.
ModelConfig parse_llada_moe(const json& root, std::string_view source, std::string architecture) {
  const ConfigFields fields(root, source, "LLaDA-MoE");
  ModelConfig config;
  config.family = Family::llada_moe;
  config.architecture = std::move(architecture);
  read_hf_layer_shape(fields, config);
  config.experts = fields.integer("num_experts", 1, kMaxExperts);
  config.experts_per_token = fields.integer("num_experts_per_tok", 1, config.experts);
  config.expert_ffn = fields.integer("expert_intermediate_size", 1, kMaxFfn);
  config.ffn = fields.integer_or("dense_intermediate_size", 0, 0, kMaxFfn);  // unused: every layer is MoE
  config.vocab = fields.integer("vocab_size", 1, kMaxVocab);
  config.rope_theta = fields.number_or("rope_theta", 10000.0, 1.0, 1e12);
  config.rms_eps = fields.number_or("rms_norm_eps", 1e-5, 0.0, 1.0);
  config.tied_embeddings = fields.boolean_or("tie_word_embeddings", false);
  config.qk_norm = fields.boolean_or("qk_layernorm", true);
  config.mask_token_id = fields.integer_or("mask_token_id", 156895, 0, kMaxTokenId);
  config.eos_token_id = fields.integer_or("eos_token_id", 156892, 0, kMaxTokenId);
  config.pad_token_id = fields.integer_or("pad_token_id", config.eos_token_id, 0, kMaxTokenId);
  config.max_position = fields.integer_or("max_position_embeddings", 0, 0, int64_t{1} << 40);
  config.torch_dtype = fields.string_or("torch_dtype", "");

  fields.require("hidden_act", "silu", "the experts are SiLU-gated");
  fields.require("attention_bias", false, "the projections carry no bias");
  fields.require("partial_rotary_factor", 1.0, "LLaDA-MoE rotates every dimension");
  fields.require("moe_router_enable_expert_bias", false, "the released router has no expert bias");
  fields.require_null("shared_expert_intermediate_size", "LLaDA-MoE has no shared expert");
  fields.require_null("rope_scaling", "rotary scaling is not implemented");
  fields.require_null("clip_qkv", "q/k/v clipping is not implemented");
  // moe_layer_freq: one entry per layer, 1 for a MoE layer; the released model has no dense layer.
  if (fields.has("moe_layer_freq")) {
    const json& freq = root.at("moe_layer_freq");
    const bool all_moe = freq.is_array() && std::ranges::all_of(freq, [](const json& entry) {
      return entry.is_number_integer() && entry.get<int64_t>() == 1;
    });
    if (!all_moe)
      fail("{}: field 'moe_layer_freq' = {} is not supported (every layer of LLaDA-MoE is a mixture of "
           "experts; expected a list of 1s)", source, freq.dump().substr(0, 200));
  }
  if (!config.qk_norm)
    fail("{}: field 'qk_layernorm' = false is not supported (LLaDA-MoE normalises q and k per head)", source);
  config.block_attention = block_attention_of(fields);
  check_shape(config, source, "hidden_size", "num_attention_heads", "num_key_value_heads");
  check_token_ids(config, fields);
  return config;
}

// LLaDA 2.x (LLaDA2.0-mini / -flash, LLaDA2.1; moe-models.md section 2): Ling-2.0's layout with
// block-causal attention on the absolute block grid. The released configs omit the mask and eos
// ids (156895 and 156892, the generate() defaults) and use_qk_norm (the class default, true: the
// norm tensors exist). The HF forward ignores norm_topk_prob (it always renormalises), router_dtype
// (it always routes in fp32) and the sliding-window fields (its SDPA path applies none), so they
// are ignored here too; what would change the forward is refused unless it holds the released
// value.
ModelConfig parse_llada2(const json& root, std::string_view source, std::string architecture) {
  const ConfigFields fields(root, source, "LLaDA 2.x");
  ModelConfig config;
  config.family = Family::llada2;
  config.architecture = std::move(architecture);
  read_hf_layer_shape(fields, config);
  config.ffn = fields.integer("intermediate_size", 1, kMaxFfn);
  config.experts = fields.integer("num_experts", 2, kMaxExperts);
  config.experts_per_token = fields.integer("num_experts_per_tok", 1, config.experts);
  config.expert_ffn = fields.integer("moe_intermediate_size", 1, kMaxFfn);
  config.shared_expert_ffn = fields.integer_or("num_shared_experts", 0, 0, 64) * config.expert_ffn;
  config.dense_layers = fields.integer_or("first_k_dense_replace", 0, 0, config.layers);
  config.router = RouterKind::sigmoid_grouped;
  config.router_groups = fields.integer_or("n_group", 1, 1, config.experts);
  config.router_top_groups = fields.integer_or("topk_group", config.router_groups, 1, config.router_groups);
  config.routed_scaling = fields.number_or("routed_scaling_factor", 1.0, 1e-6, 1e6);
  config.vocab = fields.integer("vocab_size", 1, kMaxVocab);
  config.rope_theta = fields.number_or("rope_theta", 10000.0, 1.0, 1e12);
  config.rms_eps = fields.number_or("rms_norm_eps", 1e-6, 0.0, 1.0);
  config.tied_embeddings = fields.boolean_or("tie_word_embeddings", false);
  config.qk_norm = fields.boolean_or("use_qk_norm", true);
  config.mask_token_id = fields.integer_or("mask_token_id", 156895, 0, kMaxTokenId);
  config.eos_token_id = fields.integer_or("eos_token_id", 156892, 0, kMaxTokenId);
  config.pad_token_id = fields.integer_or("pad_token_id", config.eos_token_id, 0, kMaxTokenId);
  config.max_position = fields.integer_or("max_position_embeddings", 0, 0, int64_t{1} << 40);
  config.torch_dtype = fields.string_or("torch_dtype", fields.string_or("dtype", ""));

  config.partial_rotary = fields.number_or("partial_rotary_factor", 1.0, 0.0, 1.0);
  const int64_t rotary = config.rotary();
  if (fields.has("rotary_dim") && fields.integer("rotary_dim", 1, config.head_dim) != rotary)
    fail("{}: field 'rotary_dim' disagrees with partial_rotary_factor {} x head_dim {} = {}", source,
         config.partial_rotary, config.head_dim, rotary);
  if (rotary < 2 || rotary % 2 != 0)
    fail("{}: partial_rotary_factor {} x head_dim {} gives {} rotary dimensions; RoPE needs an even number "
         "of at least 2", source, config.partial_rotary, config.head_dim, rotary);

  fields.require("hidden_act", "silu", "the FFNs are SiLU-gated");
  fields.require("use_qkv_bias", false, "the fused QKV projection carries no bias");
  fields.require("use_bias", false, "the projections carry no bias");
  fields.require("score_function", "sigmoid", "the LLaDA 2.x router scores experts with a sigmoid");
  fields.require("norm_head", false, "an L2-normalised LM head is not implemented");
  fields.require_null("rope_scaling", "rotary scaling is not implemented");
  // LLaDA2.2 routes per diffusion block inside a capacity-limited set of experts (moe-models.md
  // 2.8): another router, which this one would silently replace.
  fields.require_null("expert_capacity", "LLaDA2.2's block routing is not implemented");
  if (!config.qk_norm)
    fail("{}: field 'use_qk_norm' = false is not supported (LLaDA 2.x normalises q and k per head)", source);
  if (config.experts % config.router_groups != 0)
    fail("{}: num_experts {} is not divisible by n_group {}", source, config.experts, config.router_groups);
  const int64_t group_size = config.experts / config.router_groups;
  if (group_size < 2)
    fail("{}: n_group {} leaves {} expert per group; a group scores the sum of its two best experts, so it "
         "needs at least 2", source, config.router_groups, group_size);
  if (config.experts_per_token > config.router_top_groups * group_size)
    fail("{}: num_experts_per_tok {} is more than the {} experts of the topk_group = {} groups kept", source,
         config.experts_per_token, config.router_top_groups * group_size, config.router_top_groups);
  // Block-causal on the grid from position 0 is the architecture, not a switch (section 2.3).
  if (fields.has("block_attention") && block_attention_of(fields) != BlockAttention::absolute)
    fail("{}: field 'block_attention' must be \"absolute\" or absent: LLaDA 2.x attends block-causally on "
         "the block grid from position 0", source);
  config.block_attention = BlockAttention::absolute;
  check_shape(config, source, "hidden_size", "num_attention_heads", "num_key_value_heads");
  check_token_ids(config, fields);
  return config;
}

std::string architecture_of(const json& root, std::string_view source) {
  if (root.contains("architectures") && !root.at("architectures").is_null()) {
    const json& list = root.at("architectures");
    if (!list.is_array() || list.empty() || !list.at(0).is_string())
      fail("{}: field 'architectures' must be a non-empty list of strings, got {}", source,
           list.dump());
    return list.at(0).get<std::string>();
  }
  // Older exports carry only model_type; "llada" is shared by LLaDA and LLaDA-MoE.
  const ConfigFields fields(root, source, "model");
  const std::string model_type = fields.string_or("model_type", "");
  if (model_type == "llada") return root.contains("num_experts") ? "LLaDAMoEModelLM" : "LLaDAModelLM";
  if (model_type == "Dream" || model_type == "dream") return "DreamModel";
  if (model_type == "llada2_moe") return "LLaDA2MoeModelLM";
  if (model_type.empty()) fail("{}: missing fields 'architectures' and 'model_type'", source);
  fail("{}: model_type '{}' is not a supported model (expected llada, Dream or llada2_moe)", source, model_type);
}

}  // namespace

std::string_view family_name(Family family) {
  switch (family) {
    case Family::llada: return "llada";
    case Family::dream: return "dream";
    case Family::llada_moe: return "llada-moe";
    case Family::llada2: return "llada2";
  }
  return "unknown";
}

ModelConfig parse_model_config(std::string_view json_text, std::string_view source) {
  const json root = parse_json(json_text, source);
  if (!root.is_object()) fail("{}: expected a JSON object at the top level", source);

  std::string architecture = architecture_of(root, source);
  if (architecture == "LLaDAModelLM") return parse_llada(root, source, std::move(architecture));
  if (architecture == "DreamModel") return parse_dream(root, source, std::move(architecture));
  if (architecture == "LLaDAMoEModelLM") return parse_llada_moe(root, source, std::move(architecture));
  if (architecture == "LLaDA2MoeModelLM") return parse_llada2(root, source, std::move(architecture));
  fail("{}: architecture '{}' is not supported (expected LLaDAModelLM, DreamModel, LLaDAMoEModelLM or "
       "LLaDA2MoeModelLM)",
       source, architecture);
}

ModelConfig load_model_config(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "config.json";
  const std::optional<RegularFile> file = RegularFile::open_if_exists(path);
  if (!file)
    fail("{}: no config.json in this folder (expected a Hugging Face model folder)", printable_path(model_dir));
  return parse_model_config(file->read_all(kConfigJsonMaxBytes), printable_path(path));
}

}  // namespace mosaic
