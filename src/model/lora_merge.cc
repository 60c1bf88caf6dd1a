#include "model/lora_merge.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "core/half.h"
#include "core/printable.h"

namespace mosaic {
namespace {

// Roles LoRA may change: the decoder's linear projections (LLaDA 2.x's fused QKV as one, each
// expert's own), and an untied LM head.
bool is_projection(WeightRole role) {
  switch (role) {
    case WeightRole::qkv:
    case WeightRole::expert_gate: case WeightRole::expert_up: case WeightRole::expert_down:
    case WeightRole::q: case WeightRole::k: case WeightRole::v: case WeightRole::o:
    case WeightRole::gate: case WeightRole::up: case WeightRole::down: case WeightRole::lm_head:
      return true;
    default: return false;
  }
}

std::string module_of(const WeightSpec& spec) { return spec.name.substr(0, spec.name.size() - std::string_view(".weight").size()); }

std::string_view leaf_of(std::string_view module) {
  const size_t dot = module.rfind('.');
  return dot == std::string_view::npos ? module : module.substr(dot + 1);
}

// The path PEFT matched target_modules against may lack the checkpoint's leading "model.".
bool targeted(const LoraConfig& config, const std::string& module) {
  return config.targets(module) || (module.starts_with("model.") && config.targets(std::string_view(module).substr(6)));
}

// `count` elements of a float dtype at a possibly misaligned address, as fp32.
void read_f32(const void* data, DType dtype, size_t count, float* out) {
  const auto* bytes = static_cast<const std::byte*>(data);
  switch (dtype) {
    case DType::f32: std::memcpy(out, bytes, count * sizeof(float)); return;
    case DType::bf16:
    case DType::f16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes + 2 * i, 2);
        out[i] = dtype == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
      }
      return;
    default: MOSAIC_ASSERT(false, "{} is not a float weight dtype", dtype_name(dtype));
  }
}

std::vector<float> to_f32(const void* data, DType dtype, const std::vector<int64_t>& shape) {
  size_t count = 1;
  for (const int64_t extent : shape) count *= static_cast<size_t>(extent);
  std::vector<float> out(count);
  read_f32(data, dtype, count, out.data());
  return out;
}

}  // namespace

std::vector<LoraTarget> bind_lora(const LoraAdapter& adapter, std::span<const WeightSpec> specs, std::string_view family,
                                  bool tied_embeddings) {
  const LoraConfig& config = adapter.config();
  const std::string source = printable_path(adapter.weights_path());
  const std::string config_source = printable_path(adapter.dir() / "adapter_config.json");

  std::unordered_map<std::string, const WeightSpec*> projections;  // module path -> weight
  std::vector<std::string> leaves;                                // "q_proj", ... for messages
  for (const WeightSpec& spec : specs) {
    if (!is_projection(spec.role)) continue;
    projections.emplace(module_of(spec), &spec);
    const std::string leaf(leaf_of(module_of(spec)));
    if (spec.layer <= 0 && std::find(leaves.begin(), leaves.end(), leaf) == leaves.end()) leaves.push_back(leaf);
  }
  auto modules_named = [&](std::string_view name) {
    for (const auto& [module, spec] : projections)
      if (module == name || (module.ends_with(name) && module[module.size() - name.size() - 1] == '.')) return true;
    return false;
  };
  for (const std::string& name : config.target_names)
    if (!modules_named(name))
      fail("{}: target_modules entry '{}' names no projection of this {} checkpoint (its projections: {})",
           config_source, name, family, fmt::join(leaves, ", "));

  std::set<const WeightSpec*> bound;
  std::vector<LoraTarget> targets;
  for (const LoraModule& module : adapter.modules()) {
    auto found = projections.find(module.module);
    if (found == projections.end()) found = projections.find("model." + module.module);
    if (found == projections.end())
      fail("{}: tensor '{}' is for module '{}', which is no projection of this {} checkpoint (expected a path like "
           "'{}')",
           source, module.a.name, module.module, family, module_of(*projections.begin()->second));
    const WeightSpec& spec = *found->second;
    if (!config.targets(module.module) && !targeted(config, found->first))
      fail("{}: tensor '{}' is for module '{}', which adapter_config.json's target_modules does not select", source,
           module.a.name, module.module);
    if (spec.role == WeightRole::lm_head && tied_embeddings)
      fail("{}: tensor '{}' adapts the LM head, which this checkpoint ties to the embedding; not supported", source,
           module.a.name);
    if (!bound.insert(&spec).second)
      fail("{}: two modules of the adapter adapt '{}' (one is '{}')", source, spec.name, module.module);
    const int64_t out = spec.shape[0], in = spec.shape[1], r = config.rank;
    if (module.a.shape[0] != r)
      fail("{}: tensor '{}' has rank {} (shape [{}]) but adapter_config.json says r = {}: expected [{}, {}]", source,
           module.a.name, module.a.shape[0], fmt::join(module.a.shape, ", "), r, r, in);
    if (module.a.shape != std::vector<int64_t>{r, in})
      fail("{}: tensor '{}' has shape [{}] but base '{}' [{}, {}] needs lora_A [{}, {}]", source, module.a.name,
           fmt::join(module.a.shape, ", "), spec.name, out, in, r, in);
    if (module.b.shape != std::vector<int64_t>{out, r})
      fail("{}: tensor '{}' has shape [{}] but base '{}' [{}, {}] needs lora_B [{}, {}]", source, module.b.name,
           fmt::join(module.b.shape, ", "), spec.name, out, in, out, r);
    targets.push_back({&spec, &module});
  }
  for (const auto& [module, spec] : projections)
    if (targeted(config, module) && !bound.contains(spec))
      fail("{}: missing tensors 'base_model.model.{}.lora_A.weight' and '.lora_B.weight' (target_modules selects '{}'; "
           "expected [{}, {}] and [{}, {}])",
           source, module, module, config.rank, spec->shape[1], spec->shape[0], config.rank);
  return targets;
}

std::vector<float> merge_lora(const WeightView& base, const LoraModule& module, double scaling) {
  MOSAIC_ASSERT(base.shape.size() == 2 && module.a.shape.size() == 2 && module.b.shape.size() == 2,
                "LoRA merge of non-matrices");
  const int64_t out = base.shape[0], in = base.shape[1], r = module.a.shape[0];
  MOSAIC_ASSERT(module.a.shape[1] == in && module.b.shape[0] == out && module.b.shape[1] == r,
                "LoRA shapes not checked by bind_lora");
  std::vector<float> merged = to_f32(base.data, base.dtype, base.shape);
  const std::vector<float> a = to_f32(module.a.data, module.a.dtype, module.a.shape);  // [r, in]
  const std::vector<float> b = to_f32(module.b.data, module.b.dtype, module.b.shape);        // [out, r]
  const float s = static_cast<float>(scaling);
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o) {
    float* row = merged.data() + o * in;
    std::vector<float> delta(static_cast<size_t>(in), 0.0f);  // (B @ A)[o, :]
    for (int64_t k = 0; k < r; ++k) {
      const float coefficient = b[static_cast<size_t>(o * r + k)];
      const float* a_row = a.data() + k * in;
      for (int64_t i = 0; i < in; ++i) delta[static_cast<size_t>(i)] += coefficient * a_row[i];
    }
    for (int64_t i = 0; i < in; ++i) row[i] += s * delta[static_cast<size_t>(i)];
  }
  return merged;
}

}  // namespace mosaic
