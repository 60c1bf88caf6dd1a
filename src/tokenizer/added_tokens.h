// Added tokens (tokenizer.json's "added_tokens": special tokens such as <|im_start|> and plain
// added ones such as <think>) are found in the text before anything else runs, and each match
// becomes its token directly. Matching follows Hugging Face:
//   1. Tokens with normalized=false are searched in the raw text; tokens with normalized=true
//      are searched, with their content normalized, in each remaining piece after the
//      normalizer has run.
//   2. Matches are leftmost-longest and do not overlap.
//   3. single_word drops a match that touches a word character (\w) on either side;
//      lstrip / rstrip make the match swallow the whitespace on its left / right.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mosaic::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A stretch of text: either plain text still to be tokenized, or an added token's match.
struct TextSegment {
  size_t begin;
  size_t end;
  int32_t token_id;  // -1 for plain text
};

// Finds one set of added tokens in text (one per matching pass of step 1).
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is what `tokens[i]` looks like in the text searched (its content, normalized
  // for the second pass). Empty patterns are ignored.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                    const std::vector<std::string>& patterns);

  bool empty() const { return nodes_.size() <= 1; }

  // Appends segments that cover `text` exactly, in order. Plain-text segments may be empty
  // only when `text` is.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  struct Rule {
    int32_t id;
    bool single_word, lstrip, rstrip;
  };
  // A byte trie over the patterns. Children are few except at the root, so they are a short
  // sorted list; `can_start` lets the scan skip bytes that begin no pattern.
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t rule = -1;  // index into rules_ when a pattern ends here
  };
  int32_t child(int32_t node, unsigned char byte) const;

  std::vector<Node> nodes_{Node{}};
  std::vector<Rule> rules_;
  bool can_start_[256] = {};
};

}  // namespace mosaic::tokenizer
