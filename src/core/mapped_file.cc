#include "core/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/printable.h"

namespace mosaic {

MappedFile MappedFile::open(const std::filesystem::path& path) { return map(RegularFile::open(path)); }

MappedFile MappedFile::map(const RegularFile& source) {
  MappedFile file;
  file.path_ = source.path();
  file.size_ = static_cast<size_t>(source.size());
  if (file.size_ > 0) {
    void* data = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, source.fd(), 0);
    if (data == MAP_FAILED)
      fail("{}: cannot map {} bytes: {}", printable_path(source.path()), file.size_, std::strerror(errno));
    file.data_ = static_cast<const std::byte*>(data);
  }
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace mosaic
