// Where an HTTP/1.x request ends, decided from its bytes before any handler sees them.
//
// ConnectionGuard (connection_guard.h) buffers a client's bytes and asks a RequestFramer after
// each read whether the request is complete, still incomplete, or malformed. Only a complete
// request reaches a worker thread, so a client that sends slowly, or half a request, or nothing,
// holds no thread; and malformed framing is answered at once with the status that fits, instead of
// being read by a worker until a timeout:
//
//   RequestFramer framer(limits);
//   buffer += recv(...);
//   FramingVerdict v = framer.advance(buffer);   // incomplete: read more; invalid: answer v.status
//   if (v.state == FramingState::complete) dispatch(buffer.substr(0, v.length), framer.head());
//
// The rules (RFC 9112, stricter where the RFC allows it):
//  1. Empty lines before the request line are skipped (FramingVerdict::skip), as RFC 9112 §2.2 asks.
//  2. Lines end in CRLF; a bare LF is a 400. The request line is `METHOD SP target SP HTTP/d.d`:
//     another version is 505, a method cpp-httplib does not route is 501, a line over
//     max_request_line is 414 (as soon as that many bytes arrive without its end).
//  3. Header lines are `token ":" value` (no folded lines, no control characters in values); a
//     line over max_header_line, more than max_headers lines or a head over max_head_bytes is 431.
//  4. The body is framed by Content-Length (decimal digits only, equal if repeated; over
//     max_body_bytes is 413 before a byte of it is read) or by `Transfer-Encoding: chunked`
//     (chunk sizes in hex; data over max_body_bytes is 413; no trailers, as cpp-httplib reads
//     none). Both at once is 400 (a smuggling vector); another transfer coding is 501; a POST,
//     PUT or PATCH with neither is 411.
//  5. `Expect: 100-continue` is noted (the guard answers it); another expectation is 417.
// advance() resumes where it stopped, so feeding a request a byte at a time costs linear time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mosaic::serve {

struct FramingLimits {
  size_t max_request_line = 8192;  // cpp-httplib's CPPHTTPLIB_REQUEST_URI_MAX_LENGTH
  size_t max_header_line = 8192;   // cpp-httplib's CPPHTTPLIB_HEADER_MAX_LENGTH
  size_t max_headers = 100;
  size_t max_head_bytes = 64 << 10;
  size_t max_body_bytes = size_t{8} << 20;
};

enum class FramingState { incomplete, complete, invalid };

struct FramingVerdict {
  FramingState state = FramingState::incomplete;
  size_t skip = 0;      // empty lines before the request line, to drop (counted in length)
  size_t length = 0;    // complete: bytes of this request from the buffer's start, skip included
  int status = 0;       // invalid: the HTTP status to answer
  std::string message;  // invalid: what is wrong and what was expected
};

// What the head said, once it is complete.
struct RequestHead {
  std::string method, target, version;
  bool http10 = false;           // HTTP/1.0: answered, then the connection closes
  bool close = false;            // `Connection: close` (or HTTP/1.0)
  bool expect_continue = false;  // `Expect: 100-continue` with a body to come
  std::string request_id;        // the raw X-Request-Id header, if any (sanitised by its user)
  uint64_t content_length = 0;
  bool chunked = false;
};

class RequestFramer {
 public:
  explicit RequestFramer(FramingLimits limits = {});

  // `bytes` holds everything received for this request so far; between calls it may only grow.
  // Once a verdict is complete or invalid it stays so.
  FramingVerdict advance(std::string_view bytes);

  bool head_complete() const { return phase_ > Phase::headers; }
  const RequestHead& head() const { return head_; }
  // Once the head is complete: whether the body is complete too (the guard's 100-continue).
  bool body_pending() const { return phase_ != Phase::done && head_complete(); }

 private:
  enum class Phase { leading, request_line, headers, length_body, chunk_size, chunk_data, chunk_data_end, last_crlf, done, failed };

  FramingVerdict fail(int status, std::string message);
  bool line_at(std::string_view bytes, std::string_view& line, FramingVerdict& verdict, size_t limit,
               int over_limit_status, const char* what);
  bool parse_request_line(std::string_view line, FramingVerdict& verdict);
  bool parse_header(std::string_view line, FramingVerdict& verdict);
  bool finish_head(FramingVerdict& verdict);

  FramingLimits limits_;
  Phase phase_ = Phase::leading;
  size_t pos_ = 0;          // bytes consumed
  size_t skip_ = 0;
  size_t head_start_ = 0;   // where the request line begins
  size_t header_count_ = 0;
  bool has_length_ = false, has_transfer_encoding_ = false;
  std::string transfer_encoding_;
  uint64_t chunk_left_ = 0, body_bytes_ = 0;
  RequestHead head_;
  FramingVerdict final_;
};

}  // namespace mosaic::serve
