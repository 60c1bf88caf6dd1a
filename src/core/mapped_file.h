// A read-only memory map of a whole file. Checkpoints are read through this so that weights are
// paged in on demand and never copied.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

#include "core/regular_file.h"

namespace mosaic {

class MappedFile {
 public:
  // Throws mosaic::Error naming the path when the file cannot be opened or mapped (regular
  // files only: see regular_file.h).
  static MappedFile open(const std::filesystem::path& path);
  static MappedFile map(const RegularFile& file);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void release() noexcept;

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mosaic
