#include "cli/list_parse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"

namespace mosaic::cli {
namespace {

using ::testing::ElementsAre;

TEST(ParseIntList, ValuesAndRanges) {
  EXPECT_THAT(parse_int_list("1,2,3", "--ids"), ElementsAre(1, 2, 3));
  EXPECT_THAT(parse_int_list(" 4 , 0-2,9", "--ids"), ElementsAre(4, 0, 1, 2, 9));
  EXPECT_THAT(parse_int_list("-1", "--ids"), ElementsAre(-1));
}

TEST(ParseIntList, AnEmptyListIsAnError) {
  EXPECT_THROW(parse_int_list("", "--rows"), Error);
  EXPECT_THROW(parse_int_list("  ", "--rows"), Error);
}

TEST(ParseUint64, TheWholeRangeAndNothingElse) {
  EXPECT_EQ(parse_uint64("0", "--seed"), 0u);
  EXPECT_EQ(parse_uint64("18446744073709551615", "--seed"), 18446744073709551615ull);
  for (const char* bad : {"", "-1", "18446744073709551616", "1.5", "0x10", " 3", "3 "}) {
    try {
      parse_uint64(bad, "--seed");
      ADD_FAILURE() << bad;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), ::testing::StartsWith("--seed: '"));
    }
  }
}

TEST(ParseIntList, ErrorsNameTheFlagAndItem) {
  EXPECT_THROW(parse_int_list("1,x", "--ids"), Error);
  try {
    parse_int_list("1,,2", "--rows");
    FAIL();
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "--rows: empty item in the list");
  }
  try {
    parse_int_list("7-3", "--rows");
    FAIL();
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "--rows: range '7-3' runs backwards");
  }
  EXPECT_THROW(parse_int_list("99999999999", "--ids"), Error);
}

}  // namespace
}  // namespace mosaic::cli
