// Stop strings on committed text: where the first one begins, what a stream must hold back, and
// the watcher that ends a request once its committed prefix holds one.
#include "serve/stop_strings.h"

#include <gtest/gtest.h>

namespace mosaic::serve {
namespace {

TEST(StopStrings, TheEarliestOccurrenceOfAny) {
  const std::vector<std::string> stops = {"END", "\n\n"};
  EXPECT_EQ(find_stop("one\n\ntwo END", stops), 3u);
  EXPECT_EQ(find_stop("one END\n\n", stops), 4u);
  EXPECT_FALSE(find_stop("one two", stops).has_value());
  EXPECT_FALSE(find_stop("anything", {}).has_value());
}

TEST(StopStrings, HeldBackIsTheLongestTailThatBeginsAStopString) {
  const std::vector<std::string> stops = {"STOP", "\n\n"};
  EXPECT_EQ(held_back("text ST", stops), 2u);
  EXPECT_EQ(held_back("text STO", stops), 3u);
  EXPECT_EQ(held_back("text\n", stops), 1u);
  EXPECT_EQ(held_back("text S.", stops), 0u);
  EXPECT_EQ(held_back("", stops), 0u);
  EXPECT_EQ(held_back("ST", {}), 0u);
}

// Ids are characters; 0 is the mask and 1 the end of the answer.
CommittedTextStream letters() {
  return CommittedTextStream(0, {1}, [](std::span<const int32_t> ids) {
    std::string text;
    for (const int32_t id : ids) text += static_cast<char>(id);
    return text;
  });
}

TEST(StopWatcher, StopsOnceTheCommittedPrefixHoldsAStopString) {
  StopWatcher watcher({"ab"}, letters());
  const int32_t a = 'a', b = 'b', x = 'x';
  EXPECT_FALSE(watcher.stopped(std::vector<int32_t>{x, a, 0, b}));  // "xa": the b is not committed text yet
  EXPECT_TRUE(watcher.stopped(std::vector<int32_t>{x, a, b, b}));
  StopWatcher ended({"ab"}, letters());
  EXPECT_FALSE(ended.stopped(std::vector<int32_t>{x, 1, a, b}));  // after the end: not the answer
}

}  // namespace
}  // namespace mosaic::serve
