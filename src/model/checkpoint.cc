#include "model/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/json_parse.h"
#include "core/log.h"
#include "core/printable.h"
#include "core/regular_file.h"
#include "model/safetensors.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// A shard index names every tensor; the largest released ones (hundreds of thousands of
// tensors) are a few MiB.
constexpr uint64_t kIndexMaxBytes = uint64_t{64} << 20;

// weight_map of the index: tensor name -> shard file name (a plain name inside the folder).
std::map<std::string, std::string> read_weight_map(const RegularFile& index_file) {
  const std::string source = printable_path(index_file.path());
  const json root = parse_json(index_file.read_all(kIndexMaxBytes), source);
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

// `dir` must be a folder we can look into; anything else is named with the system's reason.
void check_folder(const fs::path& dir) {
  std::error_code error;
  const fs::file_status status = fs::status(dir, error);
  if (error && error != std::errc::no_such_file_or_directory && error != std::errc::not_a_directory)
    fail("{}: cannot open: {}", printable_path(dir), error.message());
  if (!fs::is_directory(status))
    fail("{}: not a directory (expected a Hugging Face model folder)", printable_path(dir));
}

bool is_inside(const fs::path& path, const fs::path& folder) {
  const auto [folder_end, path_end] = std::mismatch(folder.begin(), folder.end(), path.begin(), path.end());
  return folder_end == folder.end();
}

// Weights linked in from elsewhere are legitimate (a shared disk), but worth a word: the files
// Mosaic reads are then not the folder's own. huggingface_hub's cache is the exception that must
// stay silent: a snapshot folder models--org--name/snapshots/<rev>/ holds only symlinks into
// ../../blobs/. Checked on the link's target after it opened; a race only changes a warning.
void warn_if_linked_outside(const fs::path& dir, const fs::path& file) {
  std::error_code error;
  if (!fs::is_symlink(fs::symlink_status(file, error)) || error) return;
  const fs::path real_dir = fs::canonical(dir, error);
  if (error) return;
  const fs::path target = fs::canonical(file, error);
  if (error || is_inside(target, real_dir)) return;
  const fs::path snapshots = real_dir.parent_path();
  if (snapshots.filename() == "snapshots" && target.parent_path() == snapshots.parent_path() / "blobs") return;
  log(LogLevel::warn, "{} is a symlink to {}, outside the model folder {}", printable_path(file),
      printable_path(target), printable_path(real_dir));
}

}  // namespace

Checkpoint Checkpoint::open(const fs::path& dir) {
  check_folder(dir);
  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  checkpoint.config_ = load_model_config(dir);
  const std::string folder = printable_path(dir);

  // Which files to open, and (when sharded) which file each tensor must come from.
  std::vector<std::string> file_names;
  std::map<std::string, std::string> weight_map;
  std::optional<RegularFile> single;
  if (std::optional<RegularFile> index = RegularFile::open_if_exists(dir / kIndexFile)) {
    warn_if_linked_outside(dir, index->path());
    weight_map = read_weight_map(*index);
    std::set<std::string_view> listed;
    for (const auto& [name, shard] : weight_map)
      if (listed.insert(shard).second) file_names.push_back(shard);
  } else if ((single = RegularFile::open_if_exists(dir / kSingleFile))) {
    file_names.push_back(kSingleFile);
  } else {
    std::error_code error;
    if (fs::exists(dir / "pytorch_model.bin", error) || fs::exists(dir / "pytorch_model.bin.index.json", error))
      fail("{}: holds PyTorch .bin weights; Mosaic reads safetensors (model.safetensors)", folder);
    fail("{}: no {} or {} in this folder", folder, kSingleFile, kIndexFile);
  }

  for (const std::string& file_name : file_names) {
    const fs::path path = dir / file_name;
    const std::string source = printable_path(path);
    std::optional<RegularFile> opened = single ? std::exchange(single, std::nullopt) : RegularFile::open_if_exists(path);
    if (!opened) fail("{}: shard '{}' named by {} does not exist", folder, file_name, kIndexFile);
    warn_if_linked_outside(dir, path);
    MappedFile file = MappedFile::map(*opened);
    const SafetensorsHeader header = parse_safetensors(file.bytes(), source);
    const size_t file_index = checkpoint.files_.size();
    for (const SafetensorsTensor& tensor : header.tensors) {
      if (!weight_map.empty()) {
        const auto listed = weight_map.find(tensor.name);
        if (listed == weight_map.end())
          fail("{}: tensor '{}' is not listed in {}", source, tensor.name, kIndexFile);
        if (listed->second != file_name)
          fail("{}: tensor '{}' is listed in {} under shard '{}'", source, tensor.name,
               kIndexFile, listed->second);
      }
      if (checkpoint.by_name_.contains(tensor.name))
        fail("{}: tensor '{}' also appears in another file", source, tensor.name);
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
           printable_path(dir / shard), name, kIndexFile, shard);
  return checkpoint;
}

const CheckpointTensor* Checkpoint::find(std::string_view name) const {
  const auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace mosaic
