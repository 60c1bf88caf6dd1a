#include "tokenizer/byte_level.h"

#include "tokenizer/unicode.h"

namespace mosaic::tokenizer {

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_code_point_.fill(-1);
  // Printable bytes keep their own code point; the rest (controls, space, DEL, NBSP, soft
  // hyphen, ...) take U+0100, U+0101, ... in byte order.
  auto is_printable = [](int byte) {
    return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
           (byte >= 0xAE && byte <= 0xFF);
  };
  char32_t next_stand_in = 0x100;
  for (int byte = 0; byte < 256; ++byte) {
    const char32_t cp = is_printable(byte) ? static_cast<char32_t>(byte) : next_stand_in++;
    byte_of_code_point_[cp] = static_cast<int16_t>(byte);
    std::string utf8;
    append_utf8(utf8, cp);
    utf8_length_of_byte_[byte] = static_cast<uint8_t>(utf8.size());
    for (size_t i = 0; i < utf8.size(); ++i) utf8_of_byte_[byte][i] = utf8[i];
  }
}

void ByteLevelAlphabet::append_encoded(std::string& out, std::string_view bytes) const {
  // Write two bytes per input byte into room made up front, advancing by the true length: no
  // per-byte capacity checks.
  const size_t start = out.size();
  out.resize(start + 2 * bytes.size());
  char* cursor = out.data() + start;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    cursor[0] = utf8_of_byte_[byte][0];
    cursor[1] = utf8_of_byte_[byte][1];
    cursor += utf8_length_of_byte_[byte];
  }
  out.resize(static_cast<size_t>(cursor - out.data()));
}

bool ByteLevelAlphabet::append_decoded(std::string& out, std::string_view token) const {
  const size_t original_size = out.size();
  size_t pos = 0;
  while (pos < token.size()) {
    size_t length;
    const char32_t cp = decode_utf8_at(token, pos, &length);
    if (cp >= kCodePointLimit || byte_of_code_point_[cp] < 0) {
      out.resize(original_size);
      return false;
    }
    out.push_back(static_cast<char>(byte_of_code_point_[cp]));
    pos += length;
  }
  return true;
}

}  // namespace mosaic::tokenizer
