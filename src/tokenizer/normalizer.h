// The normalizer step of a Hugging Face tokenizer: Unicode normalization forms (NFC, NFD, NFKC,
// NFKD), alone or as a Sequence, applied in order. utf8proc does the work; it is linked
// statically because the GPU machines lack Debian's shared libraries.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_node.h"

namespace mosaic::tokenizer {

enum class UnicodeForm { nfc, nfd, nfkc, nfkd };

class Normalizer {
 public:
  Normalizer() = default;  // the identity, for "normalizer": null
  explicit Normalizer(std::vector<UnicodeForm> forms) : forms_(std::move(forms)) {}

  // Reads tokenizer.json's "normalizer" field; anything but the forms above (or a Sequence of
  // them) fails, naming the field, since silently skipping a normalizer changes token ids.
  static Normalizer from_json(const JsonNode& node);

  bool is_identity() const { return forms_.empty(); }

  // The normalized text: `text` itself when nothing changes (pure ASCII always qualifies),
  // otherwise a view of `storage`.
  std::string_view apply(std::string_view text, std::string& storage) const;

 private:
  std::vector<UnicodeForm> forms_;
};

}  // namespace mosaic::tokenizer
