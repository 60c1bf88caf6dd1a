#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace mosaic::tokenizer {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                                     const std::vector<std::string>& patterns) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& pattern = patterns[i];
    if (pattern.empty()) continue;
    int32_t node = 0;
    for (const char c : pattern) {
      const auto byte = static_cast<unsigned char>(c);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& children = nodes_[node].children;
        children.insert(
            std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{0})),
            {byte, next});
      }
      node = next;
    }
    // Two tokens with the same pattern: the first one listed wins.
    if (nodes_[node].rule < 0) {
      nodes_[node].rule = static_cast<int32_t>(rules_.size());
      rules_.push_back({tokens[i].id, tokens[i].single_word, tokens[i].lstrip, tokens[i].rstrip});
    }
    can_start_[static_cast<unsigned char>(pattern[0])] = true;
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  for (const auto& [label, target] : nodes_[node].children) {
    if (label == byte) return target;
    if (label > byte) break;
  }
  return -1;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  size_t plain_begin = 0;  // start of the plain text not yet emitted
  size_t pos = 0;
  while (pos < text.size()) {
    if (!can_start_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    // Longest pattern starting here.
    int32_t node = 0;
    int32_t rule_index = -1;
    size_t match_end = pos;
    for (size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (nodes_[node].rule >= 0) {
        rule_index = nodes_[node].rule;
        match_end = i + 1;
      }
    }
    if (rule_index < 0) {
      ++pos;
      continue;
    }
    const Rule& rule = rules_[rule_index];
    size_t begin = pos;
    size_t end = match_end;
    // The next search starts after this match whether or not it is kept, as HF's
    // non-overlapping iterator does.
    pos = match_end;
    size_t length;
    if (rule.single_word) {
      const bool word_before =
          begin > 0 && is_word_character(decode_utf8_before(text, begin, &length));
      const bool word_after =
          end < text.size() && is_word_character(decode_utf8_at(text, end, &length));
      if (word_before || word_after) continue;
    }
    if (rule.lstrip) {
      // Never reach back into what an earlier match already took.
      while (begin > plain_begin &&
             is_unicode_whitespace(decode_utf8_before(text, begin, &length))) {
        begin -= length;
      }
    }
    if (rule.rstrip) {
      while (end < text.size() && is_unicode_whitespace(decode_utf8_at(text, end, &length))) {
        end += length;
      }
    }
    if (begin > plain_begin) out.push_back({plain_begin, begin, -1});
    out.push_back({begin, end, rule.id});
    plain_begin = end;
    pos = std::max(pos, end);
  }
  if (plain_begin < text.size() || text.empty()) out.push_back({plain_begin, text.size(), -1});
}

}  // namespace mosaic::tokenizer
