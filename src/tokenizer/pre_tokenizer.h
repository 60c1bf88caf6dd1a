// The pre-tokenizer step of a Hugging Face tokenizer: it cuts normalized text into pieces that
// BPE then encodes one at a time (BPE never merges across pieces). Supported, as tokenizer.json
// spells them:
//   Split      {pattern: {Regex|String}, behavior, invert}: every behavior (Removed, Isolated,
//              MergedWithPrevious, MergedWithNext, Contiguous).
//   ByteLevel  {add_prefix_space, use_regex}: optional leading space, optional split by GPT-2's
//              pattern, then each byte written as its byte-level character (byte_level.h).
//   Sequence   {pretokenizers: [...]}: the steps in order, each on every piece of the last.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tokenizer/json_node.h"
#include "tokenizer/regex.h"

namespace mosaic::tokenizer {

// Pieces cut from one text: ranges of `text`, which a ByteLevel step rewrites.
struct Pieces {
  std::string text;
  std::vector<MatchRange> ranges;

  size_t size() const { return ranges.size(); }
  std::string_view operator[](size_t i) const {
    return std::string_view(text).substr(ranges[i].begin, ranges[i].end - ranges[i].begin);
  }
};

enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

class PreTokenizer {
 public:
  PreTokenizer() = default;  // no pre-tokenizer: the whole text is one piece

  // Reads tokenizer.json's "pre_tokenizer"; other types (Whitespace, Metaspace, Digits, ...)
  // fail, naming the field.
  static PreTokenizer from_json(const JsonNode& node);

  // Cuts `text` into `out` (replacing what it held). Empty pieces are dropped, as HF does.
  void split(std::string_view text, Pieces& out) const;

 private:
  struct SplitStep {
    Regex pattern;
    bool empty_pattern;  // a String pattern "" matches nothing
    SplitBehavior behavior;
    bool invert;
  };
  struct ByteLevelStep {
    bool add_prefix_space;
    bool use_regex;
  };
  using Step = std::variant<SplitStep, ByteLevelStep>;

  static void append_steps(const JsonNode& node, std::vector<Step>& steps);
  static void apply(const SplitStep& step, Pieces& pieces);
  static void apply(const ByteLevelStep& step, Pieces& pieces);

  std::vector<Step> steps_;
};

}  // namespace mosaic::tokenizer
