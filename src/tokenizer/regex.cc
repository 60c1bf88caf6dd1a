#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "core/error.h"

namespace mosaic::tokenizer {

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;  // false when this PCRE2 build or platform has no JIT: interpret instead
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

// Per-thread match state, so that one compiled pattern serves concurrent encodes without locks
// and without an allocation per match. The JIT stack grows to 8 MiB: `\s+(?!\S)` over a long
// run of spaces needs more than the 32 KiB default.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(data);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

MatchScratch& match_scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int length = pcre2_get_error_message(code, buffer, sizeof(buffer));
  if (length < 0) return fmt::format("PCRE2 error {}", code);
  return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(length));
}

}  // namespace

std::optional<Regex> Regex::compile(std::string_view pattern, bool literal, std::string* error) {
  // PCRE2 refuses UCP together with LITERAL; a literal needs no character classes anyway.
  const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    *error = fmt::format("{} at offset {}", pcre2_message(error_code), error_offset);
    return std::nullopt;
  }
  auto compiled = std::make_shared<Compiled>();
  compiled->code = code;
  compiled->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return Regex(std::move(compiled));
}

std::optional<MatchRange> Regex::find(std::string_view subject, size_t start) const {
  MatchScratch& scratch = match_scratch();
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  const int result = compiled_->jit
                         ? pcre2_jit_match(compiled_->code, text, subject.size(), start, 0,
                                           scratch.data, scratch.context)
                         : pcre2_match(compiled_->code, text, subject.size(), start,
                                       PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
  if (result == PCRE2_ERROR_NOMATCH) return std::nullopt;
  if (result < 0) {
    // Resource limits (JIT stack, match limit) on pathological input: an error, never a
    // silently different split.
    mosaic::fail("pre-tokenizer regex failed on a {}-byte text: {}", subject.size(),
                 pcre2_message(result));
  }
  const PCRE2_SIZE* offsets = pcre2_get_ovector_pointer(scratch.data);
  return MatchRange{offsets[0], offsets[1]};
}

}  // namespace mosaic::tokenizer
