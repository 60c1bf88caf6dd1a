#include "core/json_parse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/error.h"

namespace mosaic {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

std::string error_of(std::string_view text, const JsonParseOptions& options = {}) {
  try {
    parse_json(text, "f.json", options);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonParse, BuildsTheSameValueAsNlohmann) {
  const std::string text =
      R"({"a": [1, -2, 3.5, "x", true, null, {"b": [], "c": {}}], "d": {"e": [[1], [2, [3]]]}, "u": 18446744073709551615})";
  EXPECT_EQ(parse_json(text, "f.json"), json::parse(text));
  EXPECT_EQ(parse_json("7", "f.json"), json(7));
  EXPECT_EQ(parse_json("  \"s\"  \n", "f.json"), json("s"));
}

TEST(JsonParse, TheLastOfTwoEqualKeysWinsUnlessRefused) {
  EXPECT_EQ(parse_json(R"({"k": 1, "k": 2})", "f.json"), json({{"k", 2}}));
  EXPECT_THAT(error_of(R"({"a": {"k": 1, "k": 2}})", {.refuse_duplicate_keys = true}),
              HasSubstr("f.json: key \"k\" appears twice in one object"));
  EXPECT_THAT(error_of(R"({"k": 1, "k": 2})", {.what = "header", .refuse_duplicate_keys = true}),
              HasSubstr("f.json: header: key \"k\" appears twice"));
}

TEST(JsonParse, NestingUpToTheLimitIsAccepted) {
  EXPECT_NO_THROW(parse_json(nested_arrays(kJsonMaxDepth), "f.json"));
  EXPECT_NO_THROW(parse_json(nested_arrays(3), "f.json", {.max_depth = 3}));
}

TEST(JsonParse, DeeperNestingIsRefusedNamingFileAndLimit) {
  EXPECT_EQ(error_of(nested_arrays(kJsonMaxDepth + 1)),
            "f.json: nested deeper than 64 levels, the limit for JSON that Mosaic reads");
  EXPECT_THAT(error_of(R"({"a": {"b": [1]}})", {.what = "header", .max_depth = 2}),
              HasSubstr("f.json: header is nested deeper than 2 levels"));
}

TEST(JsonParse, AHundredThousandLevelsFailFastWithoutRecursion) {
  // The input that overflowed the stack when nlohmann's DOM was dumped or compared.
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "{\"a\":[";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(error_of(text), HasSubstr("nested deeper than 64 levels"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(JsonParse, ANulByteIsNotTheEndOfTheText) {
  // nlohmann's lexer takes NUL for the end of input, so this parsed as {} before.
  EXPECT_EQ(error_of(std::string("{}\0garbage", 10)),
            "f.json: not valid JSON: a NUL byte at offset 2 (JSON text cannot hold one)");
  EXPECT_THAT(error_of(std::string("{}\0", 3), {.what = "header"}),
              HasSubstr("f.json: header is not valid JSON: a NUL byte at offset 2"));
}

TEST(JsonParse, SyntaxErrorsAndOverflowNameTheSource) {
  EXPECT_THAT(error_of("{\"a\": 1"), HasSubstr("f.json: not valid JSON: [json.exception.parse_error"));
  EXPECT_THAT(error_of("{\"a\": 1} x"), HasSubstr("f.json: not valid JSON"));
  EXPECT_THAT(error_of("[1e999]"), HasSubstr("f.json: not valid JSON"));  // nlohmann's out_of_range
  EXPECT_THAT(error_of(""), HasSubstr("f.json: not valid JSON"));
  // Bytes quoted from the text come back printable: one valid UTF-8 line.
  EXPECT_THAT(error_of("{\"a\": \xff\n}"), HasSubstr("\\xFF"));
}

TEST(JsonParse, WideObjectsAreLinear) {
  // nlohmann's callback parser took quadratic time here (it rescans the parent as each member
  // object closes): 100,000 members took minutes.
  std::string text = "{";
  for (int i = 0; i < 100000; ++i) text += fmt::format("{}\"t{}\": {{\"shape\": [0]}}", i ? "," : "", i);
  text += "}";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(parse_json(text, "f.json").size(), 100000u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace mosaic
