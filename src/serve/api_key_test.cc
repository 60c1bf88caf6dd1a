#include "serve/api_key.h"

#include <gtest/gtest.h>

namespace mosaic::serve {
namespace {

TEST(ApiKey, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(constant_time_equals("sk-secret", "sk-secret"));
  EXPECT_FALSE(constant_time_equals("sk-secrez", "sk-secret"));
  EXPECT_FALSE(constant_time_equals("sk-secre", "sk-secret"));    // a prefix
  EXPECT_FALSE(constant_time_equals("sk-secret1", "sk-secret"));  // longer
  EXPECT_FALSE(constant_time_equals("", "sk-secret"));
  EXPECT_TRUE(constant_time_equals("", ""));
  EXPECT_FALSE(constant_time_equals(std::string_view("sk-secret\0x", 11), "sk-secret"));
}

TEST(ApiKey, BearerHeaders) {
  EXPECT_EQ(check_bearer_key("Bearer sk-1", "sk-1"), KeyCheck::accepted);
  EXPECT_EQ(check_bearer_key("bearer  sk-1 ", "sk-1"), KeyCheck::accepted);
  EXPECT_EQ(check_bearer_key("BEARER sk-1", "sk-1"), KeyCheck::accepted);
  EXPECT_EQ(check_bearer_key("", "sk-1"), KeyCheck::missing);
  EXPECT_EQ(check_bearer_key("   ", "sk-1"), KeyCheck::missing);
  EXPECT_EQ(check_bearer_key("Bearer sk-2", "sk-1"), KeyCheck::wrong);
  EXPECT_EQ(check_bearer_key("Basic c2stMQ==", "sk-1"), KeyCheck::wrong);
  EXPECT_EQ(check_bearer_key("sk-1", "sk-1"), KeyCheck::wrong);
  EXPECT_EQ(check_bearer_key("Bearer", "sk-1"), KeyCheck::wrong);
}

}  // namespace
}  // namespace mosaic::serve
