// A Hugging Face model folder as users have it: config.json plus model.safetensors, or
// model.safetensors.index.json and the shards it names. Files are memory-mapped; tensors are
// views into them.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "model/config.h"

namespace mosaic {

struct CheckpointTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  uint64_t bytes = 0;
  size_t file = 0;  // index into Checkpoint::files()
};

class Checkpoint {
 public:
  // Throws mosaic::Error naming the file and the tensor or field on any inconsistency.
  static Checkpoint open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  std::span<const CheckpointTensor> tensors() const { return tensors_; }
  const CheckpointTensor* find(std::string_view name) const;
  const std::filesystem::path& file_path(size_t file) const { return files_[file].path(); }

 private:
  std::filesystem::path dir_;
  ModelConfig config_;
  std::vector<MappedFile> files_;
  std::vector<CheckpointTensor> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
};

}  // namespace mosaic
