// GPT-2's byte-level alphabet. Each of the 256 byte values is written as one printable code point
// (printable Latin-1 bytes stand for themselves, the other 68 are moved to U+0100..U+0143), so a
// BPE vocabulary of visible strings covers every possible byte string: no unknown tokens, and
// "Ġ" (U+0120) is the space that starts most words.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace mosaic::tokenizer {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get();

  // Appends the UTF-8 of the code point that stands for each byte of `bytes`.
  void append_encoded(std::string& out, std::string_view bytes) const;

  // Appends the bytes that the characters of `token` stand for. Returns false, leaving `out`
  // as it was, when a character is outside the alphabet (an added token such as "<｜end｜>").
  bool append_decoded(std::string& out, std::string_view token) const;

 private:
  ByteLevelAlphabet();

  static constexpr char32_t kCodePointLimit = 0x144;           // every stand-in is below U+0144
  std::array<int16_t, kCodePointLimit> byte_of_code_point_{};  // -1: not in the alphabet
  std::array<std::array<char, 2>, 256> utf8_of_byte_{};        // one or two UTF-8 bytes
  std::array<uint8_t, 256> utf8_length_of_byte_{};
};

}  // namespace mosaic::tokenizer
