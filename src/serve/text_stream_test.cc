#include "serve/text_stream.h"

#include <gtest/gtest.h>

#include <map>

namespace mosaic::serve {
namespace {

constexpr int32_t kMask = 99, kEos = 98;

// Token id -> bytes; a cut inside a UTF-8 character decodes to U+FFFD, as byte-level BPE does.
std::string decode(std::span<const int32_t> ids) {
  static const std::map<int32_t, std::string> bytes = {
      {1, "He"}, {2, "llo"}, {3, " w\xC3"}, {4, "\xA9rld"}, {5, "!"}, {6, "\xE2\x82"}, {7, "\xAC"}};
  std::string text;
  for (int32_t id : ids) text += bytes.at(id);
  // A trailing incomplete character is one replacement character.
  size_t start = text.size();
  while (start > 0 && (static_cast<unsigned char>(text[start - 1]) & 0xC0) == 0x80) --start;
  if (start > 0) {
    const unsigned char lead = static_cast<unsigned char>(text[start - 1]);
    const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (need > 1 && text.size() - (start - 1) < need) text.replace(start - 1, std::string::npos, "\xEF\xBF\xBD");
  }
  return text;
}

TEST(CommittedTextStream, DeltasFollowTheLeftmostCommittedTokens) {
  CommittedTextStream stream(kMask, {kEos, -1}, decode);
  std::vector<int32_t> out = {kMask, 2, kMask, kMask, kMask};
  EXPECT_EQ(stream.update(out), "");           // nothing at the left yet
  out[0] = 1;
  EXPECT_EQ(stream.update(out), "Hello");      // positions 0 and 1
  out[2] = 3;
  EXPECT_EQ(stream.update(out), " w");         // "\xC3" waits for its continuation
  out[4] = 5;
  EXPECT_EQ(stream.update(out), "");           // position 3 still masked
  out[3] = 4;
  EXPECT_EQ(stream.update(out), "\xC3\xA9rld!");
  EXPECT_EQ(stream.finish("Hello w\xC3\xA9rld!"), "");
  EXPECT_EQ(stream.sent(), "Hello w\xC3\xA9rld!");
}

TEST(CommittedTextStream, StopsAtTheEndTokenAndFinishesWithTheRest) {
  CommittedTextStream stream(kMask, {kEos}, decode);
  EXPECT_EQ(stream.update(std::vector<int32_t>{1, 6, kMask, kEos, 5}), "He");
  EXPECT_EQ(stream.update(std::vector<int32_t>{1, 6, 7, kEos, 5}), "\xE2\x82\xAC");
  EXPECT_EQ(stream.finish("He\xE2\x82\xAC"), "");
  CommittedTextStream other(kMask, {kEos}, decode);
  EXPECT_EQ(other.update(std::vector<int32_t>{1, kMask, 2}), "He");
  // Finished with a position still masked (a rule's step bound): the answer skips it.
  EXPECT_EQ(other.finish("Hello"), "llo");
}

TEST(CommittedTextStream, BytesThatAreNoUtf8AreSentAsTheyCome) {
  CommittedTextStream stream(kMask, {kEos}, [](std::span<const int32_t> ids) {
    std::string text;  // every id is an invalid byte: one U+FFFD each
    for (size_t i = 0; i < ids.size(); ++i) text += "\xEF\xBF\xBD";
    return text;
  });
  EXPECT_EQ(stream.update(std::vector<int32_t>{1, 2, 3, kMask}), "\xEF\xBF\xBD\xEF\xBF\xBD");  // the last waits
  EXPECT_EQ(stream.update(std::vector<int32_t>{1, 2, 3, 4}), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.finish("\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"), "\xEF\xBF\xBD");
}

TEST(CommittedTextStream, DeltasConcatenateToTheAnswer) {
  const std::vector<int32_t> final_ids = {1, 2, 3, 4, 6, 7, 5};
  std::vector<int32_t> out(final_ids.size(), kMask);
  CommittedTextStream stream(kMask, {kEos}, decode);
  std::string received;
  for (size_t order : {4u, 0u, 6u, 1u, 3u, 2u, 5u}) {
    out[order] = final_ids[order];
    received += stream.update(out);
  }
  received += stream.finish(decode(final_ids));
  EXPECT_EQ(received, decode(final_ids));
}

}  // namespace
}  // namespace mosaic::serve
