// A PEFT LoRA adapter folder as PEFT's save_pretrained writes it: adapter_config.json and
// adapter_model.safetensors (memory-mapped). Tensors are grouped per module; PEFT's key spellings
//   [base_model.model.]<module>.lora_A[.default].weight   [r, in]
//   [base_model.model.]<module>.lora_B[.default].weight   [out, r]
// are all accepted. Nothing here knows the base model: lora_merge.h binds modules to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "model/lora_config.h"

namespace mosaic {

struct LoraTensor {
  std::string name;  // the key in adapter_model.safetensors
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // into the mapped file; not necessarily aligned
};

struct LoraModule {
  std::string module;  // the key's module path, "base_model.model." removed
  LoraTensor a, b;     // lora_A [r, in], lora_B [out, r]
};

class LoraAdapter {
 public:
  // Throws mosaic::Error naming the file and the field or tensor: no adapter_config.json, a
  // .bin-only adapter, a key that is not a LoRA weight, a module with lora_A but no lora_B.
  static LoraAdapter open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& weights_path() const { return file_.path(); }
  const LoraConfig& config() const { return config_; }
  std::span<const LoraModule> modules() const { return modules_; }  // in file order

 private:
  std::filesystem::path dir_;
  LoraConfig config_;
  MappedFile file_;
  std::vector<LoraModule> modules_;
};

}  // namespace mosaic
