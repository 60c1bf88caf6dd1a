// UTF-8 and character-class helpers for the tokenizer: validation, code point stepping, the two
// character classes that added-token flags look at, and the lossy decoding that Hugging Face
// applies to a decoder's bytes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mosaic::tokenizer {

// Byte offset of the first ill-formed UTF-8 sequence in `text`, or nullopt if it is all valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// The code point starting at `text[pos]`; `text` must be valid UTF-8. Stores its byte length.
char32_t decode_utf8_at(std::string_view text, size_t pos, size_t* length);

// The code point that ends just before `text[end]` (end > 0); `text` must be valid UTF-8.
// Stores its byte length.
char32_t decode_utf8_before(std::string_view text, size_t end, size_t* length);

void append_utf8(std::string& out, char32_t code_point);

// Unicode White_Space, the class of Rust's regex `\s` (Hugging Face's lstrip/rstrip).
bool is_unicode_whitespace(char32_t code_point);

// Letters, marks, decimal digits, letter numbers, connector punctuation and the joiners: the
// class of Rust's regex `\w` that decides `single_word` (it also counts a few Alphabetic symbols
// such as circled letters, which we do not).
bool is_word_character(char32_t code_point);

// Appends `bytes` as UTF-8, replacing each maximal ill-formed subsequence by one U+FFFD: the
// policy of Rust's String::from_utf8_lossy, which Hugging Face's ByteLevel decoder ends with.
void append_utf8_lossy(std::string& out, std::string_view bytes);

}  // namespace mosaic::tokenizer
