#include "cli/byte_size.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mosaic::cli {
namespace {

TEST(ByteSize, UnitsAndSpellings) {
  EXPECT_EQ(parse_byte_size("24GiB", "--budget"), 24ull << 30);
  EXPECT_EQ(parse_byte_size("24g", "--budget"), 24ull << 30);
  EXPECT_EQ(parse_byte_size("1.5GiB", "--budget"), 3ull << 29);
  EXPECT_EQ(parse_byte_size("512MiB", "--budget"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("80GB", "--budget"), 80'000'000'000ull);
  EXPECT_EQ(parse_byte_size("141GB", "--budget"), 141'000'000'000ull);
  EXPECT_EQ(parse_byte_size("4096", "--budget"), 4096ull);
  EXPECT_EQ(parse_byte_size("2T", "--budget"), 2ull << 40);
}

TEST(ByteSize, Rejects) {
  for (const char* bad : {"", "GiB", "24 GiB", "24XB", "-3G", "0", "1e3", "1..2G", "99999999999T"})
    EXPECT_THROW(parse_byte_size(bad, "--budget"), Error) << bad;
}

}  // namespace
}  // namespace mosaic::cli
