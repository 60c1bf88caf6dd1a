// Opening a file a user named (a model folder's config.json, weights, tokenizer files): regular
// files only, checked on the open descriptor (open with O_NONBLOCK, then fstat), so neither a
// FIFO (which would block the open forever) nor a device (which never ends) nor a path swapped
// between a check and the open gets through. Errors name the path and the system's reason:
// permission denied, a symlink loop, a directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace mosaic {

class RegularFile {
 public:
  // nullopt when nothing exists at `path` (ENOENT); throws mosaic::Error for every other failure.
  static std::optional<RegularFile> open_if_exists(const std::filesystem::path& path);
  // Also throws when nothing exists at `path`.
  static RegularFile open(const std::filesystem::path& path);

  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

  // The whole file; throws mosaic::Error naming the path and the cap when it holds more than
  // `max_bytes` (checked before anything is allocated), or on a read error.
  std::string read_all(uint64_t max_bytes) const;

 private:
  RegularFile(std::filesystem::path path, int fd, uint64_t size);

  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// RegularFile::open(path).read_all(max_bytes).
std::string read_text_file(const std::filesystem::path& path, uint64_t max_bytes);

}  // namespace mosaic
