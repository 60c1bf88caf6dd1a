// The decoder of a Hugging Face tokenizer: token strings back to text. Supported:
//   ByteLevel  each token's characters back to the bytes they stand for (a token with a character
//              outside the byte alphabet, such as an added token, contributes its own UTF-8),
//              all bytes joined, then ill-formed UTF-8 replaced by U+FFFD
//   null       tokens joined with spaces (HF's behavior without a decoder)
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "tokenizer/json_node.h"

namespace mosaic::tokenizer {

class Decoder {
 public:
  static Decoder from_json(const JsonNode& node);

  std::string decode(std::span<const std::string_view> tokens) const;

 private:
  bool byte_level_ = false;
};

}  // namespace mosaic::tokenizer
