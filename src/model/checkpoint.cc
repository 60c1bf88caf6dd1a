#include "model/checkpoint.h"

#include <nlohmann/json.hpp>

#include <map>

#include "core/error.h"
#include "model/safetensors.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// weight_map of the index: tensor name -> shard file name (a plain name inside the folder).
std::map<std::string, std::string> read_weight_map(const fs::path& index_path) {
  const std::string source = index_path.string();
  json root;
  try {
    root = json::parse(read_text_file(index_path));
  } catch (const json::exception& error) {  // parse_error, and out_of_range for 1e999
    fail("{}: not valid JSON: {}", source, error.what());
  }
  if (!root.is_object() || !root.contains("weight_map") || !root.at("weight_map").is_object())
    fail("{}: missing object 'weight_map'", source);
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, file] : root.at("weight_map").items()) {
    if (!file.is_string())
      fail("{}: weight_map entry '{}' must be a file name, got {}", source, name, file.dump());
    const std::string shard = file.get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      fail("{}: weight_map entry '{}' names '{}', which is not a file in this folder", source,
           name, shard);
    weight_map.emplace(name, shard);
  }
  if (weight_map.empty()) fail("{}: 'weight_map' is empty", source);
  return weight_map;
}

}  // namespace

Checkpoint Checkpoint::open(const fs::path& dir) {
  if (!fs::is_directory(dir)) fail("{}: not a directory (expected a Hugging Face model folder)", dir.string());
  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  checkpoint.config_ = load_model_config(dir);

  // Which files to open, and (when sharded) which file each tensor must come from.
  std::vector<std::string> file_names;
  std::map<std::string, std::string> weight_map;
  if (fs::exists(dir / kIndexFile)) {
    weight_map = read_weight_map(dir / kIndexFile);
    for (const auto& [name, shard] : weight_map)
      if (std::find(file_names.begin(), file_names.end(), shard) == file_names.end())
        file_names.push_back(shard);
  } else if (fs::exists(dir / kSingleFile)) {
    file_names.push_back(kSingleFile);
  } else if (fs::exists(dir / "pytorch_model.bin") || fs::exists(dir / "pytorch_model.bin.index.json")) {
    fail("{}: holds PyTorch .bin weights; Mosaic reads safetensors (model.safetensors)", dir.string());
  } else {
    fail("{}: no {} or {} in this folder", dir.string(), kSingleFile, kIndexFile);
  }

  for (const std::string& file_name : file_names) {
    const fs::path path = dir / file_name;
    if (!fs::exists(path))
      fail("{}: shard '{}' named by {} does not exist", dir.string(), file_name, kIndexFile);
    MappedFile file = MappedFile::open(path);
    const SafetensorsHeader header = parse_safetensors(file.bytes(), path.string());
    const size_t file_index = checkpoint.files_.size();
    for (const SafetensorsTensor& tensor : header.tensors) {
      if (!weight_map.empty()) {
        const auto listed = weight_map.find(tensor.name);
        if (listed == weight_map.end())
          fail("{}: tensor '{}' is not listed in {}", path.string(), tensor.name, kIndexFile);
        if (listed->second != file_name)
          fail("{}: tensor '{}' is listed in {} under shard '{}'", path.string(), tensor.name,
               kIndexFile, listed->second);
      }
      if (checkpoint.by_name_.contains(tensor.name))
        fail("{}: tensor '{}' also appears in another file", path.string(), tensor.name);
      checkpoint.by_name_.emplace(tensor.name, checkpoint.tensors_.size());
      checkpoint.tensors_.push_back({tensor.name, tensor.dtype, tensor.shape,
                                     file.bytes().data() + tensor.offset, tensor.bytes,
                                     file_index});
    }
    checkpoint.files_.push_back(std::move(file));
  }
  for (const auto& [name, shard] : weight_map)
    if (!checkpoint.by_name_.contains(name))
      fail("{}: tensor '{}' is listed in {} but shard '{}' does not contain it",
           (dir / shard).string(), name, kIndexFile, shard);
  return checkpoint;
}

const CheckpointTensor* Checkpoint::find(std::string_view name) const {
  const auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace mosaic
