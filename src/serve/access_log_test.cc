#include "serve/access_log.h"

#include <gtest/gtest.h>

namespace mosaic::serve {
namespace {

TEST(AccessLog, AGenerationLineCarriesItsFigures) {
  const GenerationUsage usage{5, 16, 8, 0.25, "length"};
  AccessRecord record;
  record.request_id = "req-1";
  record.method = "POST";
  record.path = "/v1/completions";
  record.remote = "127.0.0.1";
  record.status = 200;
  record.usage = &usage;
  record.total_s = 0.5;
  EXPECT_EQ(access_log_line(record),
            "access request_id=req-1 method=POST path=/v1/completions status=200 remote=127.0.0.1 prompt_tokens=5 "
            "completion_tokens=16 steps=8 finish_reason=length queue_s=0.2500 total_s=0.5000");
}

TEST(AccessLog, OtherRequestsHaveNoGenerationFigures) {
  AccessRecord record;
  record.request_id = "abc";
  record.method = "GET";
  record.path = "/health";
  record.status = 503;
  EXPECT_EQ(access_log_line(record), "access request_id=abc method=GET path=/health status=503 total_s=0.0000");
}

TEST(AccessLog, AClientsBytesCannotForgeALine) {
  EXPECT_EQ(logfmt_value("/a b"), "\"/a b\"");
  EXPECT_EQ(logfmt_value("/x\nmosaic [info] access status=200"), "\"/x\\x0amosaic [info] access status=200\"");
  EXPECT_EQ(logfmt_value("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(logfmt_value("k=v"), "\"k=v\"");
  EXPECT_EQ(logfmt_value(""), "\"\"");
  EXPECT_EQ(logfmt_value(std::string(300, 'a')), "\"" + std::string(256, 'a') + "...\"");
}

}  // namespace
}  // namespace mosaic::serve
