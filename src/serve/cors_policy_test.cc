#include "serve/cors_policy.h"

#include <gtest/gtest.h>

#include "mosaic/error.h"

namespace mosaic::serve {
namespace {

TEST(CorsPolicy, OffByDefault) {
  const CorsPolicy off = CorsPolicy::parse("");
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.allow_origin("https://a.example"), std::nullopt);
}

TEST(CorsPolicy, OnlyListedOriginsAreEchoed) {
  const CorsPolicy policy = CorsPolicy::parse("https://a.example, http://localhost:3000");
  EXPECT_TRUE(policy.enabled());
  EXPECT_EQ(policy.allow_origin("https://a.example"), "https://a.example");
  EXPECT_EQ(policy.allow_origin("HTTPS://A.example"), "HTTPS://A.example");  // origins compare without case
  EXPECT_EQ(policy.allow_origin("http://localhost:3000"), "http://localhost:3000");
  EXPECT_EQ(policy.allow_origin("http://localhost:3001"), std::nullopt);
  EXPECT_EQ(policy.allow_origin("https://a.example.evil"), std::nullopt);
  EXPECT_EQ(policy.allow_origin(""), std::nullopt);
}

TEST(CorsPolicy, AStarAllowsEveryOrigin) {
  const CorsPolicy policy = CorsPolicy::parse("*");
  EXPECT_EQ(policy.allow_origin("https://anything.example"), "*");
  EXPECT_EQ(policy.allow_origin(""), std::nullopt);  // not a cross-origin request
}

TEST(CorsPolicy, AMalformedEntryIsAnErrorNamingIt) {
  for (const char* bad : {"https://a.example/", "a.example", "https://a.example/path", "https://", "*, ftp:/x"}) {
    try {
      CorsPolicy::parse(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("--allowed-origins"), std::string::npos) << error.what();
    }
  }
}

TEST(CorsPolicy, PreflightHeadersAreEchoedWhenTheyAreHeaderNames) {
  EXPECT_EQ(CorsPolicy::allow_headers("authorization, content-type, x-stainless-os"),
            "authorization, content-type, x-stainless-os");
  EXPECT_EQ(CorsPolicy::allow_headers(""), "Authorization, Content-Type, X-Request-Id");
  EXPECT_EQ(CorsPolicy::allow_headers("a\r\nInjected: 1"), "Authorization, Content-Type, X-Request-Id");
}

}  // namespace
}  // namespace mosaic::serve
