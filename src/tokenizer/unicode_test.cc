#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

namespace mosaic::tokenizer {
namespace {

std::string lossy(std::string_view bytes) {
  std::string out;
  append_utf8_lossy(out, bytes);
  return out;
}

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(FindInvalidUtf8, AcceptsWellFormedText) {
  EXPECT_EQ(find_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("plain ascii text that is longer than eight bytes"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE4\xBD\xA0 \xF0\x9F\x8D\x95 \xF4\x8F\xBF\xBF"),
            std::nullopt);
}

TEST(FindInvalidUtf8, ReportsTheFirstBadByte) {
  EXPECT_EQ(find_invalid_utf8("abc\xFF"), 3u);
  EXPECT_EQ(find_invalid_utf8("0123456789\xC3"), 10u);   // truncated at the end
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);     // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("ok\x80"), 2u);            // lone continuation byte
}

TEST(AppendUtf8Lossy, ReplacesEachMaximalIllFormedSubpart) {
  EXPECT_EQ(lossy("caf\xC3\xA9"), "caf\xC3\xA9");
  // The first three bytes of a four-byte emoji are one maximal subpart: one replacement.
  EXPECT_EQ(lossy("a\xF0\x9F\x8D"), "a" + kReplacement);
  // A byte that cannot start anything is replaced on its own; so is each of two stray bytes.
  EXPECT_EQ(lossy("\x80\x80"), kReplacement + kReplacement);
  // E0 80: 80 cannot follow E0, so E0 alone is the subpart and 80 is another one.
  EXPECT_EQ(lossy("\xE0\x80z"), kReplacement + kReplacement + "z");
  // A truncated sequence followed by ASCII keeps the ASCII.
  EXPECT_EQ(lossy("\xE4\xBD"
                  "x"),
            kReplacement + "x");
}

TEST(DecodeUtf8, StepsForwardAndBackward) {
  const std::string text = "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x8D\x95";
  size_t length;
  EXPECT_EQ(decode_utf8_at(text, 0, &length), U'a');
  EXPECT_EQ(length, 1u);
  EXPECT_EQ(decode_utf8_at(text, 1, &length), U'\u00E9');
  EXPECT_EQ(length, 2u);
  EXPECT_EQ(decode_utf8_at(text, 3, &length), U'\u4F60');
  EXPECT_EQ(length, 3u);
  EXPECT_EQ(decode_utf8_at(text, 6, &length), U'\U0001F355');
  EXPECT_EQ(length, 4u);
  EXPECT_EQ(decode_utf8_before(text, text.size(), &length), U'\U0001F355');
  EXPECT_EQ(length, 4u);
  EXPECT_EQ(decode_utf8_before(text, 3, &length), U'\u00E9');
}

TEST(AppendUtf8, EncodesEveryLength) {
  std::string out;
  for (const char32_t cp : {U'a', U'\u00E9', U'\u4F60', U'\U0001F355'}) append_utf8(out, cp);
  EXPECT_EQ(out, "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x8D\x95");
}

TEST(CharacterClasses, MatchRustRegexClasses) {
  for (const char32_t cp : {U' ', U'\t', U'\n', U'\u0085', U'\u00A0', U'\u2009', U'\u3000'}) {
    EXPECT_TRUE(is_unicode_whitespace(cp)) << std::hex << uint32_t(cp);
  }
  for (const char32_t cp : {U'a', U'_', U'\u200B', U'\uFEFF', U'\u180E'}) {
    EXPECT_FALSE(is_unicode_whitespace(cp)) << std::hex << uint32_t(cp);
  }
  for (const char32_t cp :
       {U'a', U'Z', U'5', U'_', U'\u00E9', U'\u4F60', U'\u0301', U'\u0663', U'\u216B', U'\u200D'}) {
    EXPECT_TRUE(is_word_character(cp)) << std::hex << uint32_t(cp);
  }
  for (const char32_t cp : {U' ', U'-', U'.', U'<', U'\u00BD', U'\U0001F355', U'\u3002'}) {
    EXPECT_FALSE(is_word_character(cp)) << std::hex << uint32_t(cp);
  }
}

}  // namespace
}  // namespace mosaic::tokenizer
