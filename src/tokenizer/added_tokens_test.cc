#include "tokenizer/added_tokens.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace mosaic::tokenizer {
namespace {

// Segments rendered as "[text]" for plain text and "<id:text>" for tokens: easy to read in a
// failure message.
std::string render(const AddedTokenMatcher& matcher, std::string_view text) {
  std::vector<TextSegment> segments;
  matcher.split(text, segments);
  std::string out;
  for (const TextSegment& s : segments) {
    const std::string_view part = text.substr(s.begin, s.end - s.begin);
    // fmt rather than operator+: GCC 12 warns falsely (-Wrestrict) on chained string sums.
    out += s.token_id < 0 ? fmt::format("[{}]", part) : fmt::format("<{}:{}>", s.token_id, part);
  }
  return out;
}

AddedTokenMatcher matcher_of(std::vector<AddedToken> tokens) {
  std::vector<std::string> patterns;
  for (const AddedToken& token : tokens) patterns.push_back(token.content);
  return AddedTokenMatcher(tokens, patterns);
}

TEST(AddedTokenMatcher, SplitsAroundMatches) {
  const AddedTokenMatcher matcher =
      matcher_of({{.id = 1, .content = "<|im_start|>"}, {.id = 2, .content = "<|im_end|>"}});
  EXPECT_EQ(render(matcher, "<|im_start|>user\nhi<|im_end|>"),
            "<1:<|im_start|>>[user\nhi]<2:<|im_end|>>");
  EXPECT_EQ(render(matcher, "no tokens < | here"), "[no tokens < | here]");
  EXPECT_EQ(render(matcher, "<|im_start|><|im_end|>"), "<1:<|im_start|>><2:<|im_end|>>");
  EXPECT_EQ(render(matcher, "<|im_start"), "[<|im_start]");
  EXPECT_EQ(render(matcher, ""), "[]");
}

TEST(AddedTokenMatcher, PrefersTheLongestMatchAtTheLeftmostPosition) {
  const AddedTokenMatcher matcher = matcher_of(
      {{.id = 1, .content = "<a>"}, {.id = 2, .content = "<a><b>"}, {.id = 3, .content = "a><b"}});
  EXPECT_EQ(render(matcher, "x<a><b>y"), "[x]<2:<a><b>>[y]");
  EXPECT_EQ(render(matcher, "x<a><c>"), "[x]<1:<a>>[<c>]");
}

TEST(AddedTokenMatcher, SingleWordNeedsNonWordNeighbors) {
  const AddedTokenMatcher matcher =
      matcher_of({{.id = 7, .content = "hello", .single_word = true}});
  EXPECT_EQ(render(matcher, "hello world"), "<7:hello>[ world]");
  EXPECT_EQ(render(matcher, "(hello)"), "[(]<7:hello>[)]");
  EXPECT_EQ(render(matcher, "sayhello"), "[sayhello]");
  EXPECT_EQ(render(matcher, "hello_"), "[hello_]");
  EXPECT_EQ(render(matcher, "hello1"), "[hello1]");
  EXPECT_EQ(render(matcher, "\xC3\xA9hello"), "[\xC3\xA9hello]");  // é is a word character
}

TEST(AddedTokenMatcher, StripsWhitespaceOnTheFlaggedSides) {
  const AddedTokenMatcher matcher =
      matcher_of({{.id = 1, .content = "<L>", .lstrip = true},
                  {.id = 2, .content = "<R>", .rstrip = true},
                  {.id = 3, .content = "<B>", .lstrip = true, .rstrip = true}});
  EXPECT_EQ(render(matcher, "a  <L> b"), "[a]<1:  <L>>[ b]");
  EXPECT_EQ(render(matcher, "a <R>\t\n b"), "[a ]<2:<R>\t\n >[b]");
  EXPECT_EQ(render(matcher,
                   "a\xE3\x80\x80<B>\xC2\xA0"
                   "b"),
            "[a]<3:\xE3\x80\x80<B>\xC2\xA0>[b]");
  // lstrip never takes back whitespace an earlier token already swallowed.
  EXPECT_EQ(render(matcher, "<R>  <L>x"), "<2:<R>  ><1:<L>>[x]");
}

TEST(AddedTokenMatcher, TheFirstOfTwoEqualPatternsWins) {
  const AddedTokenMatcher matcher =
      matcher_of({{.id = 4, .content = "<x>"}, {.id = 5, .content = "<x>"}});
  EXPECT_EQ(render(matcher, "<x>"), "<4:<x>>");
}

}  // namespace
}  // namespace mosaic::tokenizer
