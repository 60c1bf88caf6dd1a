#include "serve/http_framing.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <vector>

namespace mosaic::serve {
namespace {

constexpr size_t kMaxChunkSizeLine = 1024;  // hex size plus extensions
constexpr size_t kMaxQuoted = 64;

// A client's bytes inside an error message: printable ASCII, the rest as \xHH, cut short.
std::string excerpt(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, kMaxQuoted)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '\\' && c != '\'') out += c;
    else out += fmt::format("\\x{:02x}", byte);
  }
  if (text.size() > kMaxQuoted) out += "...";
  return "'" + out + "'";
}

// RFC 9110 §5.6.2 token characters.
bool is_tchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_tchar);
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split_list(std::string_view text) {
  std::vector<std::string_view> items;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    items.push_back(trim(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) return items;
    start = comma + 1;
  }
}

// Decimal digits to a saturating uint64 (an absurd length is then "over the limit", 413).
std::optional<uint64_t> parse_decimal(std::string_view digits) {
  if (digits.empty()) return std::nullopt;
  uint64_t value = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) value = std::numeric_limits<uint64_t>::max();
    else value = value * 10 + digit;
  }
  return value;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The methods cpp-httplib routes; anything else would be a 400 or a 404 there.
bool is_routed_method(std::string_view method) {
  static constexpr std::array<std::string_view, 7> kMethods = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};
  return std::find(kMethods.begin(), kMethods.end(), method) != kMethods.end();
}

bool has_body_method(std::string_view method) { return method == "POST" || method == "PUT" || method == "PATCH"; }

}  // namespace

RequestFramer::RequestFramer(FramingLimits limits) : limits_(limits) {}

FramingVerdict RequestFramer::fail(int status, std::string message) {
  phase_ = Phase::failed;
  final_ = FramingVerdict{FramingState::invalid, skip_, 0, status, std::move(message)};
  return final_;
}

// The next CRLF-terminated line from pos_, without its CRLF. False: incomplete (or `verdict` set
// to the failure when the line is already too long or badly terminated).
bool RequestFramer::line_at(std::string_view bytes, std::string_view& line, FramingVerdict& verdict, size_t limit,
                            int over_limit_status, const char* what) {
  const size_t newline = bytes.find('\n', pos_);
  const size_t length = (newline == std::string_view::npos ? bytes.size() : newline) - pos_;
  if (length > limit + 1) {  // + the CR
    verdict = fail(over_limit_status, fmt::format("{} exceeds {} bytes", what, limit));
    return false;
  }
  if (newline == std::string_view::npos) return false;
  if (length == 0 || bytes[newline - 1] != '\r') {
    verdict = fail(400, fmt::format("{} ends in a bare LF; HTTP lines end in CRLF", what));
    return false;
  }
  line = bytes.substr(pos_, length - 1);
  if (line.find('\r') != std::string_view::npos) {
    verdict = fail(400, fmt::format("{} holds a bare CR", what));
    return false;
  }
  pos_ = newline + 1;
  return true;
}

bool RequestFramer::parse_request_line(std::string_view line, FramingVerdict& verdict) {
  const size_t first = line.find(' ');
  const size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (second == std::string_view::npos || line.find(' ', second + 1) != std::string_view::npos || first == 0 ||
      second == first + 1 || second + 1 == line.size()) {
    verdict = fail(400, fmt::format("the request line must be 'METHOD target HTTP/1.1', got {}", excerpt(line)));
    return false;
  }
  head_.method = std::string(line.substr(0, first));
  head_.target = std::string(line.substr(first + 1, second - first - 1));
  head_.version = std::string(line.substr(second + 1));
  const std::string_view version = head_.version;
  const bool looks_like_http = version.size() == 8 && version.substr(0, 5) == "HTTP/" && hex_digit(version[5]) >= 0 &&
                               hex_digit(version[5]) <= 9 && version[6] == '.' && hex_digit(version[7]) >= 0 &&
                               hex_digit(version[7]) <= 9;
  if (!looks_like_http) {
    verdict = fail(400, fmt::format("the request line ends in {}, not an HTTP version such as HTTP/1.1", excerpt(version)));
    return false;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    verdict = fail(505, fmt::format("{} is not supported; this server speaks HTTP/1.1 and HTTP/1.0", version));
    return false;
  }
  head_.http10 = version == "HTTP/1.0";
  if (!is_token(head_.method)) {
    verdict = fail(400, fmt::format("the method {} is not an HTTP token", excerpt(head_.method)));
    return false;
  }
  if (!is_routed_method(head_.method)) {
    verdict = fail(501, fmt::format("the method {} is not supported", excerpt(head_.method)));
    return false;
  }
  for (const char c : head_.target) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f) {
      verdict = fail(400, fmt::format("the request target {} holds a control character", excerpt(head_.target)));
      return false;
    }
  }
  return true;
}

bool RequestFramer::parse_header(std::string_view line, FramingVerdict& verdict) {
  if (line.front() == ' ' || line.front() == '\t') {
    verdict = fail(400, "a header line starts with whitespace (obsolete line folding is not accepted)");
    return false;
  }
  const size_t colon = line.find(':');
  const std::string_view name = line.substr(0, colon == std::string_view::npos ? 0 : colon);
  if (!is_token(name)) {
    verdict = fail(400, fmt::format("the header line {} is not 'Name: value'", excerpt(line)));
    return false;
  }
  const std::string_view value = trim(line.substr(colon + 1));
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte == 0x7f) {
      verdict = fail(400, fmt::format("the header {} holds a control character", excerpt(name)));
      return false;
    }
  }
  if (iequals(name, "Content-Length")) {
    for (const std::string_view item : split_list(value)) {
      const std::optional<uint64_t> length = parse_decimal(item);
      if (!length) {
        verdict = fail(400, fmt::format("Content-Length must be a number of bytes (decimal digits), got {}", excerpt(value)));
        return false;
      }
      if (has_length_ && *length != head_.content_length) {
        verdict = fail(400, "the request has Content-Length headers that disagree");
        return false;
      }
      head_.content_length = *length;
      has_length_ = true;
    }
  } else if (iequals(name, "Transfer-Encoding")) {
    if (has_transfer_encoding_) transfer_encoding_ += ", ";
    transfer_encoding_ += std::string(value);
    has_transfer_encoding_ = true;
  } else if (iequals(name, "Connection")) {
    for (const std::string_view token : split_list(value))
      if (iequals(token, "close")) head_.close = true;
  } else if (iequals(name, "Expect")) {
    if (!iequals(value, "100-continue")) {
      verdict = fail(417, fmt::format("the expectation {} is not supported (only 100-continue)", excerpt(value)));
      return false;
    }
    head_.expect_continue = true;
  } else if (iequals(name, "X-Request-Id") && head_.request_id.empty()) {
    head_.request_id = std::string(value);
  }
  return true;
}

bool RequestFramer::finish_head(FramingVerdict& verdict) {
  if (head_.http10) head_.close = true;
  if (has_transfer_encoding_) {
    if (head_.http10) {
      verdict = fail(400, "Transfer-Encoding is not defined for HTTP/1.0; send Content-Length");
      return false;
    }
    if (has_length_) {
      verdict = fail(400, "the request has both Content-Length and Transfer-Encoding; its length is ambiguous");
      return false;
    }
    const std::vector<std::string_view> codings = split_list(transfer_encoding_);
    if (codings.size() != 1 || !iequals(codings[0], "chunked")) {
      verdict = fail(501, fmt::format("Transfer-Encoding {} is not supported; send Content-Length or "
                                      "Transfer-Encoding: chunked", excerpt(transfer_encoding_)));
      return false;
    }
    head_.chunked = true;
  } else if (!has_length_ && has_body_method(head_.method)) {
    verdict = fail(411, fmt::format("a {} request needs a Content-Length header (or Transfer-Encoding: chunked)",
                                    head_.method));
    return false;
  }
  if (head_.content_length > limits_.max_body_bytes) {
    verdict = fail(413, fmt::format("the request body of {} bytes exceeds the limit of {} bytes", head_.content_length,
                                    limits_.max_body_bytes));
    return false;
  }
  const bool body = head_.chunked || head_.content_length > 0;
  head_.expect_continue = head_.expect_continue && body;
  phase_ = head_.chunked ? Phase::chunk_size : body ? Phase::length_body : Phase::done;
  return true;
}

FramingVerdict RequestFramer::advance(std::string_view bytes) {
  if (phase_ == Phase::failed) return final_;
  FramingVerdict verdict;
  std::string_view line;
  for (;;) {
    switch (phase_) {
      case Phase::leading: {
        const std::string_view rest = bytes.substr(pos_);
        if (rest.starts_with("\r\n")) {
          pos_ += 2, skip_ = pos_;
          continue;
        }
        if (rest.empty() || rest == "\r") return FramingVerdict{FramingState::incomplete, skip_};
        head_start_ = pos_;
        phase_ = Phase::request_line;
        continue;
      }
      case Phase::request_line:
        if (!line_at(bytes, line, verdict, limits_.max_request_line, 414, "the request line"))
          return phase_ == Phase::failed ? verdict : FramingVerdict{FramingState::incomplete, skip_};
        if (!parse_request_line(line, verdict)) return verdict;
        phase_ = Phase::headers;
        continue;
      case Phase::headers:
        if (!line_at(bytes, line, verdict, limits_.max_header_line, 431, "a header line"))
          return phase_ == Phase::failed ? verdict : FramingVerdict{FramingState::incomplete, skip_};
        if (pos_ - head_start_ > limits_.max_head_bytes)
          return fail(431, fmt::format("the request head exceeds {} bytes", limits_.max_head_bytes));
        if (line.empty()) {
          if (!finish_head(verdict)) return verdict;
          continue;
        }
        if (++header_count_ > limits_.max_headers)
          return fail(431, fmt::format("the request has more than {} header lines", limits_.max_headers));
        if (!parse_header(line, verdict)) return verdict;
        continue;
      case Phase::length_body:
        if (bytes.size() - pos_ < head_.content_length) return FramingVerdict{FramingState::incomplete, skip_};
        pos_ += head_.content_length;
        phase_ = Phase::done;
        continue;
      case Phase::chunk_size: {
        if (!line_at(bytes, line, verdict, kMaxChunkSizeLine, 400, "a chunk-size line"))
          return phase_ == Phase::failed ? verdict : FramingVerdict{FramingState::incomplete, skip_};
        size_t digits = 0;
        uint64_t size = 0;
        while (digits < line.size() && hex_digit(line[digits]) >= 0) {
          size = size * 16 + static_cast<uint64_t>(hex_digit(line[digits++]));
          if (size > limits_.max_body_bytes)  // checked per digit, so `size` cannot overflow
            return fail(413, fmt::format("a chunk of the request body exceeds the limit of {} bytes", limits_.max_body_bytes));
        }
        const std::string_view rest = trim(line.substr(digits));
        if (digits == 0 || (!rest.empty() && rest.front() != ';'))
          return fail(400, fmt::format("the chunk-size line {} is not a hexadecimal size", excerpt(line)));
        if (size > limits_.max_body_bytes - body_bytes_)
          return fail(413, fmt::format("the chunked request body exceeds the limit of {} bytes", limits_.max_body_bytes));
        body_bytes_ += size;
        chunk_left_ = size;
        phase_ = size == 0 ? Phase::last_crlf : Phase::chunk_data;
        continue;
      }
      case Phase::chunk_data: {
        const uint64_t take = std::min<uint64_t>(chunk_left_, bytes.size() - pos_);
        pos_ += take, chunk_left_ -= take;
        if (chunk_left_ > 0) return FramingVerdict{FramingState::incomplete, skip_};
        phase_ = Phase::chunk_data_end;
        continue;
      }
      case Phase::chunk_data_end: {
        const std::string_view end = bytes.substr(pos_, 2);
        if (end != std::string_view("\r\n").substr(0, end.size()))
          return fail(400, "a chunk's data is not followed by CRLF");
        if (end.size() < 2) return FramingVerdict{FramingState::incomplete, skip_};
        pos_ += 2;
        phase_ = Phase::chunk_size;
        continue;
      }
      case Phase::last_crlf:
        if (!line_at(bytes, line, verdict, limits_.max_header_line, 431, "a trailer line"))
          return phase_ == Phase::failed ? verdict : FramingVerdict{FramingState::incomplete, skip_};
        if (!line.empty()) return fail(400, "trailer fields after the last chunk are not supported");
        phase_ = Phase::done;
        continue;
      case Phase::done:
        return FramingVerdict{FramingState::complete, skip_, pos_};
      case Phase::failed:
        return final_;
    }
  }
}

}  // namespace mosaic::serve
