#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace mosaic::tokenizer {

Decoder Decoder::from_json(const JsonNode& node) {
  Decoder decoder;
  if (node.is_null()) return decoder;
  node.expect_object();
  const std::string_view type = node["type"].as_string();
  if (type != "ByteLevel") {
    node["type"].fail("unsupported decoder \"{}\" (supported: ByteLevel)", type);
  }
  decoder.byte_level_ = true;
  return decoder;
}

std::string Decoder::decode(std::span<const std::string_view> tokens) const {
  std::string text;
  if (!byte_level_) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text.push_back(' ');
      text.append(tokens[i]);
    }
    return text;
  }
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  std::string bytes;
  for (const std::string_view token : tokens) {
    if (!alphabet.append_decoded(bytes, token)) bytes.append(token);
  }
  // Tokens can end inside a UTF-8 sequence; only the joined bytes are judged.
  text.reserve(bytes.size());
  append_utf8_lossy(text, bytes);
  return text;
}

}  // namespace mosaic::tokenizer
