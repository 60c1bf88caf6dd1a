#include "serve/request_id.h"

#include <gtest/gtest.h>

#include <set>

namespace mosaic::serve {
namespace {

TEST(RequestId, AClientIdKeepsOnlySafeCharactersAndIsBounded) {
  EXPECT_EQ(sanitize_request_id("3f2a-11ee:b9d1/x+y=z@host_1.2"), "3f2a-11ee:b9d1/x+y=z@host_1.2");
  EXPECT_EQ(sanitize_request_id("abc\r\nX-Injected: 1"), "abcX-Injected:1");  // CR, LF and space dropped
  EXPECT_EQ(sanitize_request_id("\"quoted\" <id>"), "quotedid");
  EXPECT_EQ(sanitize_request_id(" \t\x01"), "");
  EXPECT_EQ(sanitize_request_id(std::string(1000, 'a')), std::string(kMaxRequestIdLength, 'a'));
}

TEST(RequestId, MadeIdsCarryTheProcessTagAndACounter) {
  IdMaker ids(0x0123456789abcdefULL);
  EXPECT_EQ(ids.next("cmpl"), "cmpl-0123456789abcdef00000001");
  EXPECT_EQ(ids.next("chatcmpl"), "chatcmpl-0123456789abcdef00000002");
}

TEST(RequestId, TwoProcessStartsDrawDifferentTags) {
  // Each IdMaker stands for one process start: its first id must differ from every other's.
  std::set<std::string> first_ids;
  for (int i = 0; i < 64; ++i) first_ids.insert(IdMaker().next("cmpl"));
  EXPECT_EQ(first_ids.size(), 64u);
}

}  // namespace
}  // namespace mosaic::serve
