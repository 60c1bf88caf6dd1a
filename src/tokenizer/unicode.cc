#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "core/utf8.h"

namespace mosaic::tokenizer {

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    // Eight ASCII bytes at a time: most text is mostly ASCII.
    if (pos + 8 <= text.size()) {
      uint64_t word;
      std::memcpy(&word, bytes + pos, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        pos += 8;
        continue;
      }
    }
    const int step = utf8_scan(bytes + pos, text.size() - pos);
    if (step < 0) return pos;
    pos += static_cast<size_t>(step);
  }
  return std::nullopt;
}

char32_t decode_utf8_at(std::string_view text, size_t pos, size_t* length) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  if (p[0] < 0x80) {
    *length = 1;
    return p[0];
  }
  if (p[0] < 0xE0) {
    *length = 2;
    return (char32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (p[0] < 0xF0) {
    *length = 3;
    return (char32_t(p[0] & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  *length = 4;
  return (char32_t(p[0] & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
         (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

char32_t decode_utf8_before(std::string_view text, size_t end, size_t* length) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return decode_utf8_at(text, start, length);
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_unicode_whitespace(char32_t cp) {
  static constexpr char32_t kSingles[] = {0x09, 0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                                          0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  return std::find(std::begin(kSingles), std::end(kSingles), cp) != std::end(kSingles);
}

bool is_word_character(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
           cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;  // Join_Control
  constexpr uint32_t kWordCategories =
      (1u << UTF8PROC_CATEGORY_LU) | (1u << UTF8PROC_CATEGORY_LL) | (1u << UTF8PROC_CATEGORY_LT) |
      (1u << UTF8PROC_CATEGORY_LM) | (1u << UTF8PROC_CATEGORY_LO) | (1u << UTF8PROC_CATEGORY_MN) |
      (1u << UTF8PROC_CATEGORY_MC) | (1u << UTF8PROC_CATEGORY_ME) | (1u << UTF8PROC_CATEGORY_ND) |
      (1u << UTF8PROC_CATEGORY_NL) | (1u << UTF8PROC_CATEGORY_PC);
  const utf8proc_category_t category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return (kWordCategories >> category) & 1u;
}

void append_utf8_lossy(std::string& out, std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const int step = utf8_scan(p + pos, bytes.size() - pos);
    if (step > 0) {
      out.append(bytes.data() + pos, static_cast<size_t>(step));
      pos += static_cast<size_t>(step);
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
      pos += static_cast<size_t>(-step);
    }
  }
}

}  // namespace mosaic::tokenizer
