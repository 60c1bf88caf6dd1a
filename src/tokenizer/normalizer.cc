#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

namespace mosaic::tokenizer {
namespace {

utf8proc_option_t options_of(UnicodeForm form) {
  // STABLE is what utf8proc's own NFC/NFD/... entry points pass; our input has no NUL terminator,
  // so we call utf8proc_map with the same options and an explicit length.
  switch (form) {
    case UnicodeForm::nfc:
      return utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case UnicodeForm::nfd:
      return utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case UnicodeForm::nfkc:
      return utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case UnicodeForm::nfkd:
      return utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return utf8proc_option_t(0);
}

void append_form(const JsonNode& node, std::vector<UnicodeForm>& forms) {
  const std::string_view type = node["type"].as_string();
  if (type == "NFC") {
    forms.push_back(UnicodeForm::nfc);
  } else if (type == "NFD") {
    forms.push_back(UnicodeForm::nfd);
  } else if (type == "NFKC") {
    forms.push_back(UnicodeForm::nfkc);
  } else if (type == "NFKD") {
    forms.push_back(UnicodeForm::nfkd);
  } else if (type == "Sequence") {
    const JsonNode members = node["normalizers"];
    for (size_t i = 0; i < members.array_size(); ++i) append_form(members[i], forms);
  } else {
    node["type"].fail("unsupported normalizer \"{}\" (supported: NFC, NFD, NFKC, NFKD, Sequence)",
                      type);
  }
}

}  // namespace

Normalizer Normalizer::from_json(const JsonNode& node) {
  if (node.is_null()) return Normalizer();
  node.expect_object();
  std::vector<UnicodeForm> forms;
  append_form(node, forms);
  return Normalizer(std::move(forms));
}

std::string_view Normalizer::apply(std::string_view text, std::string& storage) const {
  if (forms_.empty()) return text;
  // Every normalization form leaves ASCII unchanged.
  if (std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; })) return text;
  std::string current(text);
  for (const UnicodeForm form : forms_) {
    utf8proc_uint8_t* result = nullptr;
    const utf8proc_ssize_t length =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(current.data()),
                     static_cast<utf8proc_ssize_t>(current.size()), &result, options_of(form));
    if (length < 0) {
      // Input was validated as UTF-8 before; utf8proc can still run out of memory.
      std::free(result);
      mosaic::fail("Unicode normalization failed: {}", utf8proc_errmsg(length));
    }
    current.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
    std::free(result);
  }
  storage = std::move(current);
  return storage;
}

}  // namespace mosaic::tokenizer
