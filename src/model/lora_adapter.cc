#include "model/lora_adapter.h"

#include <fmt/ranges.h>

#include <map>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "core/json_parse.h"
#include "core/printable.h"
#include "core/regular_file.h"
#include "model/safetensors.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";
// PEFT's adapter_config.json is about 40 lines.
constexpr uint64_t kConfigMaxBytes = uint64_t{1} << 20;

constexpr std::string_view kPeftPrefix = "base_model.model.";

struct ParsedKey {
  std::string module;
  bool is_a = false;
};

// "<module>.lora_A.weight" / ".lora_A.default.weight" (and B); nullopt for anything else.
std::optional<ParsedKey> parse_key(std::string_view key) {
  struct Suffix {
    std::string_view text;
    bool is_a;
  };
  static constexpr Suffix kSuffixes[] = {{".lora_A.weight", true}, {".lora_A.default.weight", true},
                                         {".lora_B.weight", false}, {".lora_B.default.weight", false}};
  if (key.starts_with(kPeftPrefix)) key.remove_prefix(kPeftPrefix.size());
  for (const Suffix& suffix : kSuffixes)
    if (key.size() > suffix.text.size() && key.ends_with(suffix.text))
      return ParsedKey{std::string(key.substr(0, key.size() - suffix.text.size())), suffix.is_a};
  return std::nullopt;
}

void check_folder(const fs::path& dir) {
  std::error_code error;
  if (!fs::is_directory(fs::status(dir, error)))
    fail("{}: not a directory (expected a PEFT adapter folder: {} + {})", printable_path(dir), kConfigFile,
         kWeightsFile);
}

}  // namespace

LoraAdapter LoraAdapter::open(const fs::path& dir) {
  check_folder(dir);
  LoraAdapter adapter;
  adapter.dir_ = dir;
  const fs::path config_path = dir / kConfigFile;
  std::optional<RegularFile> config_file = RegularFile::open_if_exists(config_path);
  if (!config_file) fail("{}: no {} in this folder (expected a PEFT adapter folder)", printable_path(dir), kConfigFile);
  const std::string config_source = printable_path(config_path);
  adapter.config_ = parse_lora_config(
      parse_json(config_file->read_all(kConfigMaxBytes), config_source, {.refuse_duplicate_keys = true}),
      config_source);

  std::optional<RegularFile> weights = RegularFile::open_if_exists(dir / kWeightsFile);
  if (!weights) {
    std::error_code error;
    if (fs::exists(dir / "adapter_model.bin", error))
      fail("{}: holds PyTorch adapter_model.bin; Mosaic reads safetensors ({}: save the adapter with "
           "safe_serialization=True)",
           printable_path(dir), kWeightsFile);
    fail("{}: no {} in this folder", printable_path(dir), kWeightsFile);
  }
  adapter.file_ = MappedFile::map(*weights);
  const std::string source = printable_path(adapter.file_.path());
  const SafetensorsHeader header = parse_safetensors(adapter.file_.bytes(), source);

  std::map<std::string, size_t> by_module;
  for (const SafetensorsTensor& tensor : header.tensors) {
    const std::optional<ParsedKey> key = parse_key(tensor.name);
    if (!key)
      fail("{}: tensor '{}' is not a LoRA weight (expected base_model.model.<module>.lora_A.weight or "
           ".lora_B.weight; DoRA magnitudes, biases and embedding adapters are not supported)",
           source, tensor.name);
    if (!dtype_is_weight_float(tensor.dtype))
      fail("{}: tensor '{}' has dtype {}; LoRA weights must be F32, F16 or BF16", source, tensor.name,
           dtype_name(tensor.dtype));
    if (tensor.shape.size() != 2)
      fail("{}: tensor '{}' has shape [{}]; LoRA weights are matrices", source, tensor.name,
           fmt::join(tensor.shape, ", "));
    const auto [it, added] = by_module.emplace(key->module, adapter.modules_.size());
    if (added) adapter.modules_.push_back({key->module, {}, {}});
    LoraTensor& slot = key->is_a ? adapter.modules_[it->second].a : adapter.modules_[it->second].b;
    if (slot.data != nullptr)
      fail("{}: tensors '{}' and '{}' are both lora_{} of module '{}'", source, slot.name, tensor.name,
           key->is_a ? "A" : "B", key->module);
    slot = {tensor.name, tensor.dtype, tensor.shape, adapter.file_.bytes().data() + tensor.offset};
  }
  if (adapter.modules_.empty()) fail("{}: holds no LoRA tensors", source);
  for (const LoraModule& module : adapter.modules_) {
    const LoraTensor& present = module.a.data ? module.a : module.b;
    if (!module.a.data || !module.b.data)
      fail("{}: missing tensor '{}' (module '{}' has '{}' but no lora_{})", source,
           fmt::format("{}{}.lora_{}.weight", present.name.starts_with(kPeftPrefix) ? kPeftPrefix : "", module.module,
                       module.a.data ? "B" : "A"),
           module.module, present.name, module.a.data ? "B" : "A");
  }
  return adapter;
}

}  // namespace mosaic
