#include "core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/format_bytes.h"
#include "core/printable.h"

namespace mosaic {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

RegularFile::RegularFile(std::filesystem::path path, int fd, uint64_t size)
    : path_(std::move(path)), fd_(fd), size_(size) {}

std::optional<RegularFile> RegularFile::open_if_exists(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) return std::nullopt;
    fail("{}: cannot open: {}", printable_path(path), std::strerror(error));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    fail("{}: cannot stat: {}", printable_path(path), std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    fail("{}: is {}, expected a regular file", printable_path(path), kind_of(info.st_mode));
  }
  // Reads of a regular file never block; clear the flag so that they behave as usual.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return RegularFile(path, fd, static_cast<uint64_t>(info.st_size));
}

RegularFile RegularFile::open(const std::filesystem::path& path) {
  std::optional<RegularFile> file = open_if_exists(path);
  if (!file) fail("{}: cannot open: {}", printable_path(path), std::strerror(ENOENT));
  return std::move(*file);
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string RegularFile::read_all(uint64_t max_bytes) const {
  if (size_ > max_bytes)
    fail("{}: is {} ({} bytes), more than the {} that Mosaic reads from such a file", printable_path(path_),
         format_bytes(size_), size_, format_bytes(max_bytes));
  std::string text(size_, '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t got = ::pread(fd_, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail("{}: read error: {}", printable_path(path_), std::strerror(errno));
    if (got == 0) break;  // the file shrank since fstat: read what is there
    done += static_cast<size_t>(got);
  }
  text.resize(done);
  return text;
}

std::string read_text_file(const std::filesystem::path& path, uint64_t max_bytes) {
  return RegularFile::open(path).read_all(max_bytes);
}

}  // namespace mosaic
