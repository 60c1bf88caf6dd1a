// A regular expression for pre-tokenizer patterns: PCRE2 compiled for UTF-8 with Unicode
// properties (UCP) and JIT. Hugging Face runs these patterns with Oniguruma; both engines give
// the same matches for what tokenizer patterns use (\p{L}, \p{N}, \s, (?i:...), (?!...)).
// RE2 cannot: it has no lookahead. PCRE2 is linked statically (the GPU machines lack it).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace mosaic::tokenizer {

struct MatchRange {
  size_t begin;
  size_t end;
};

class Regex {
 public:
  // Compiles `pattern` (taken literally when `literal`). Returns nullopt and sets `error` to
  // PCRE2's message, with the offset, when the pattern does not compile.
  static std::optional<Regex> compile(std::string_view pattern, bool literal, std::string* error);

  // The first match that starts at or after `start` in `subject`, or nullopt. `subject` must be
  // valid UTF-8 and `start` a character boundary: the UTF check is skipped for speed.
  // Safe to call from several threads at once.
  std::optional<MatchRange> find(std::string_view subject, size_t start) const;

 private:
  struct Compiled;
  explicit Regex(std::shared_ptr<const Compiled> compiled) : compiled_(std::move(compiled)) {}
  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace mosaic::tokenizer
