#include "serve/http_framing.h"

#include <gtest/gtest.h>

#include <string>

namespace mosaic::serve {
namespace {

FramingVerdict frame(std::string_view bytes, FramingLimits limits = {}) {
  RequestFramer framer(limits);
  return framer.advance(bytes);
}

void expect_invalid(std::string_view bytes, int status, std::string_view fragment, FramingLimits limits = {}) {
  const FramingVerdict verdict = frame(bytes, limits);
  EXPECT_EQ(verdict.state, FramingState::invalid) << bytes;
  EXPECT_EQ(verdict.status, status) << bytes;
  EXPECT_NE(verdict.message.find(fragment), std::string::npos) << verdict.message;
}

TEST(RequestFramer, AGetWithoutBodyEndsAtItsBlankLine) {
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  RequestFramer framer;
  const FramingVerdict verdict = framer.advance(request + "GET /next");  // a pipelined request follows
  EXPECT_EQ(verdict.state, FramingState::complete);
  EXPECT_EQ(verdict.length, request.size());
  EXPECT_EQ(framer.head().method, "GET");
  EXPECT_EQ(framer.head().target, "/health");
  EXPECT_FALSE(framer.head().close);
  EXPECT_FALSE(framer.head().http10);
}

TEST(RequestFramer, ABodyFedAByteAtATimeCompletesOnItsLastByte) {
  const std::string request = "POST /v1/completions HTTP/1.1\r\nContent-Length: 11\r\n\r\n{\"prompt\":1}";
  // Content-Length 11 covers `{"prompt":1` ; the closing brace is the next request's first byte.
  RequestFramer framer;
  const size_t body_end = request.size() - 1;
  for (size_t n = 1; n < body_end; ++n) {
    const FramingVerdict verdict = framer.advance(std::string_view(request).substr(0, n));
    ASSERT_EQ(verdict.state, FramingState::incomplete) << n;
  }
  const FramingVerdict verdict = framer.advance(request);
  EXPECT_EQ(verdict.state, FramingState::complete);
  EXPECT_EQ(verdict.length, body_end);
  EXPECT_EQ(framer.head().content_length, 11u);
}

TEST(RequestFramer, ContentLengthMustBeDecimalDigitsThatAgree) {
  expect_invalid("POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400, "Content-Length must be a number");
  expect_invalid("POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400, "'0x10'");
  expect_invalid("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400, "Content-Length");
  expect_invalid("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400, "disagree");
  const FramingVerdict same = frame("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2, 2\r\n\r\nab");
  EXPECT_EQ(same.state, FramingState::complete);
}

TEST(RequestFramer, ABodyOverTheLimitIs413BeforeAByteOfItArrives) {
  FramingLimits limits;
  limits.max_body_bytes = 100;
  expect_invalid("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413, "101 bytes exceeds the limit of 100", limits);
  expect_invalid("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413, "exceeds the limit",
                 limits);
  EXPECT_EQ(frame("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n", limits).state, FramingState::incomplete);
}

TEST(RequestFramer, AmbiguousOrUnknownBodyFramingIsRefused) {
  expect_invalid("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "ambiguous");
  expect_invalid("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "not supported");
  expect_invalid("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0");
  expect_invalid("POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n", 411, "needs a Content-Length");
  EXPECT_EQ(frame("DELETE /x HTTP/1.1\r\n\r\n").state, FramingState::complete);
}

TEST(RequestFramer, AChunkedBodyEndsAfterItsLastChunk) {
  const std::string request = "POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\n\r\n";
  RequestFramer framer;
  EXPECT_EQ(framer.advance(std::string_view(request).substr(0, request.size() - 1)).state, FramingState::incomplete);
  const FramingVerdict verdict = framer.advance(request + "extra");
  EXPECT_EQ(verdict.state, FramingState::complete);
  EXPECT_EQ(verdict.length, request.size());
  EXPECT_TRUE(framer.head().chunked);
}

TEST(RequestFramer, BadChunksAreRefused) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  expect_invalid(head + "zz\r\n", 400, "not a hexadecimal size");
  expect_invalid(head + "3\r\nabcd", 400, "not followed by CRLF");
  expect_invalid(head + "0\r\nX-Trailer: 1\r\n\r\n", 400, "trailer");
  FramingLimits limits;
  limits.max_body_bytes = 10;
  expect_invalid(head + "8\r\n12345678\r\n8\r\n", 413, "exceeds the limit of 10", limits);
  expect_invalid(head + "ffffffffffffffffffffffff\r\n", 413, "exceeds the limit", limits);
}

TEST(RequestFramer, TheRequestLineNamesAMethodATargetAndHttp1) {
  expect_invalid("PRI * HTTP/2.0\r\n\r\n", 505, "HTTP/2.0 is not supported");
  expect_invalid("GET / HTTP/3.0\r\n\r\n", 505, "HTTP/3.0");
  expect_invalid("GET / HTTX/1.1\r\n\r\n", 400, "not an HTTP version");
  expect_invalid("hello\r\n\r\n", 400, "the request line must be");
  expect_invalid("GET  / HTTP/1.1\r\n\r\n", 400, "the request line must be");
  expect_invalid("BREW /pot HTTP/1.1\r\n\r\n", 501, "'BREW' is not supported");
  expect_invalid("G(T / HTTP/1.1\r\n\r\n", 400, "not an HTTP token");
  expect_invalid("GET /a\x01 HTTP/1.1\r\n\r\n", 400, "control character");
}

TEST(RequestFramer, LinesEndInCrlfAndAreBounded) {
  expect_invalid("GET / HTTP/1.1\n\n", 400, "bare LF");
  expect_invalid("GET / HTTP/1.1\r\nHost: x\n\r\n", 400, "bare LF");
  FramingLimits limits;
  limits.max_request_line = 100;
  limits.max_header_line = 50;
  limits.max_headers = 3;
  limits.max_head_bytes = 120;
  // Too long is known before the line ends: the client need not send the rest.
  expect_invalid("GET /" + std::string(200, 'a'), 414, "exceeds 100 bytes", limits);
  expect_invalid("GET / HTTP/1.1\r\nX-Long: " + std::string(60, 'b'), 431, "exceeds 50 bytes", limits);
  expect_invalid("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", 431, "more than 3 header lines", limits);
  expect_invalid("GET / HTTP/1.1\r\nA: " + std::string(40, 'x') + "\r\nB: " + std::string(40, 'x') + "\r\nC: " +
                     std::string(40, 'x') + "\r\n\r\n",
                 431, "head exceeds 120 bytes", limits);
}

TEST(RequestFramer, HeaderLinesAreNameColonValue) {
  expect_invalid("GET / HTTP/1.1\r\nHost: x\r\n  folded\r\n\r\n", 400, "folding");
  expect_invalid("GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400, "is not 'Name: value'");
  expect_invalid("GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n", 400, "is not 'Name: value'");
  expect_invalid("GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n", 400, "control character");
}

TEST(RequestFramer, ExpectationsConnectionAndRequestId) {
  RequestFramer framer;
  const FramingVerdict verdict =
      framer.advance("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 4\r\nX-Request-Id: abc-1\r\n"
                     "Connection: keep-alive, close\r\n\r\n");
  EXPECT_EQ(verdict.state, FramingState::incomplete);
  EXPECT_TRUE(framer.head_complete());
  EXPECT_TRUE(framer.body_pending());
  EXPECT_TRUE(framer.head().expect_continue);
  EXPECT_TRUE(framer.head().close);
  EXPECT_EQ(framer.head().request_id, "abc-1");
  expect_invalid("POST / HTTP/1.1\r\nExpect: tea\r\nContent-Length: 1\r\n\r\n", 417, "'tea'");

  RequestFramer old;
  EXPECT_EQ(old.advance("GET / HTTP/1.0\r\n\r\n").state, FramingState::complete);
  EXPECT_TRUE(old.head().http10);
  EXPECT_TRUE(old.head().close);
}

TEST(RequestFramer, EmptyLinesBeforeARequestAreSkipped) {
  const FramingVerdict verdict = frame("\r\n\r\nGET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(verdict.state, FramingState::complete);
  EXPECT_EQ(verdict.skip, 4u);
  EXPECT_EQ(verdict.length, 4u + 18u);
  EXPECT_EQ(frame("\r\n\r").state, FramingState::incomplete);
}

}  // namespace
}  // namespace mosaic::serve
