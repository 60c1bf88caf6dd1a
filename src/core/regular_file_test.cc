#include "core/regular_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "core/error.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class RegularFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fs::path("mosaic_regular_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }

  std::string error_of(const fs::path& path, uint64_t max_bytes = 1 << 20) {
    try {
      read_text_file(path, max_bytes);
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(RegularFileTest, ReadsAWholeFile) {
  const fs::path path = write("a.json", std::string("{\"x\": 1}\0tail", 13));
  EXPECT_EQ(read_text_file(path, 13), std::string("{\"x\": 1}\0tail", 13));
  EXPECT_EQ(RegularFile::open(path).size(), 13u);
}

TEST_F(RegularFileTest, MissingIsNulloptOrANamedError) {
  EXPECT_FALSE(RegularFile::open_if_exists(dir_ / "missing.json").has_value());
  EXPECT_THAT(error_of(dir_ / "missing.json"), HasSubstr("missing.json: cannot open: No such file or directory"));
}

TEST_F(RegularFileTest, AFifoIsRefusedWithoutBlocking) {
  const fs::path fifo = dir_ / "config.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO for reading without O_NONBLOCK would wait here for a writer, forever.
  EXPECT_THAT(error_of(fifo), HasSubstr("config.json: is a FIFO, expected a regular file"));
  EXPECT_THROW(RegularFile::open_if_exists(fifo), Error);
}

TEST_F(RegularFileTest, DirectoriesAndDevicesAreRefused) {
  fs::create_directory(dir_ / "sub");
  EXPECT_THAT(error_of(dir_ / "sub"), HasSubstr("sub: is a directory, expected a regular file"));
  EXPECT_THAT(error_of("/dev/zero"), HasSubstr("/dev/zero: is a character device, expected a regular file"));
}

TEST_F(RegularFileTest, ASymlinkLoopIsNamed) {
  fs::create_symlink("loop", dir_ / "loop");
  EXPECT_THAT(error_of(dir_ / "loop"), HasSubstr("loop: cannot open: Too many levels of symbolic links"));
  EXPECT_THROW(RegularFile::open_if_exists(dir_ / "loop"), Error);
}

TEST_F(RegularFileTest, ASymlinkToARegularFileIsFollowed) {
  write("target.json", "{}");
  fs::create_symlink("target.json", dir_ / "link.json");
  EXPECT_EQ(read_text_file(dir_ / "link.json", 2), "{}");
}

TEST_F(RegularFileTest, FilesAboveTheCapAreRefusedBeforeReading) {
  const fs::path path = dir_ / "huge.json";
  std::ofstream(path).put('x');
  fs::resize_file(path, uint64_t{3} << 30);  // sparse: nothing is written
  EXPECT_EQ(error_of(path, uint64_t{16} << 20),
            path.string() + ": is 3.000 GiB (3221225472 bytes), more than the 16.00 MiB that Mosaic reads "
                            "from such a file");
}

TEST_F(RegularFileTest, PermissionDeniedIsNamed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode (tests/cli runs this as nobody)";
  const fs::path path = write("secret.json", "{}");
  fs::permissions(path, fs::perms::none);
  EXPECT_THAT(error_of(path), HasSubstr("secret.json: cannot open: Permission denied"));
}

}  // namespace
}  // namespace mosaic
