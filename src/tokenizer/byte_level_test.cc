#include "tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include <set>

#include "tokenizer/unicode.h"

namespace mosaic::tokenizer {
namespace {

TEST(ByteLevelAlphabet, KnownStandIns) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  std::string out;
  alphabet.append_encoded(out, " \n\t!A~");
  // Space is U+0120 'Ġ', newline U+010A 'Ċ', tab U+0109 'ĉ'; printable ASCII stays.
  EXPECT_EQ(out, "\xC4\xA0\xC4\x8A\xC4\x89!A~");
  out.clear();
  alphabet.append_encoded(out, "\xC3\xA9");  // the bytes of 'é' become 'Ã' and '©'
  EXPECT_EQ(out, "\xC3\x83\xC2\xA9");
}

TEST(ByteLevelAlphabet, EveryByteRoundTripsThroughADistinctCodePoint) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  std::set<std::string> seen;
  for (int byte = 0; byte < 256; ++byte) {
    const std::string one(1, static_cast<char>(byte));
    std::string encoded;
    alphabet.append_encoded(encoded, one);
    EXPECT_EQ(find_invalid_utf8(encoded), std::nullopt);
    seen.insert(encoded);
    std::string decoded;
    ASSERT_TRUE(alphabet.append_decoded(decoded, encoded));
    EXPECT_EQ(decoded, one);
  }
  EXPECT_EQ(seen.size(), 256u);
}

TEST(ByteLevelAlphabet, RefusesCharactersOutsideTheAlphabet) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  std::string out = "kept";
  EXPECT_FALSE(alphabet.append_decoded(out, "ab\xE2\x96\x81"));  // U+2581 is not a stand-in
  EXPECT_EQ(out, "kept");
  EXPECT_FALSE(alphabet.append_decoded(out, "\xC5\x84"));  // U+0144, just past the last one
}

}  // namespace
}  // namespace mosaic::tokenizer
