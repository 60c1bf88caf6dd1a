#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace mosaic::tokenizer {
namespace {

// The pattern GPT-2 split text with; ByteLevel's use_regex means this one.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const Regex& gpt2_regex() {
  static const Regex regex = [] {
    std::string error;
    std::optional<Regex> compiled = Regex::compile(kGpt2Pattern, false, &error);
    MOSAIC_ASSERT(compiled.has_value(), "GPT-2 pattern does not compile: {}", error);
    return std::move(*compiled);
  }();
  return regex;
}

struct Segment {
  size_t begin;
  size_t end;
  bool is_match;
};

// The matches of `regex` in `text` and the gaps between them, in order, covering all of `text`.
// Empty matches are kept (they can still separate two gaps) but, as in Oniguruma's iterator
// that HF uses, an empty match right where the previous match ended is skipped.
void find_segments(const Regex& regex, std::string_view text, std::vector<Segment>& segments) {
  segments.clear();
  size_t search_from = 0;
  size_t previous_end = 0;
  bool have_previous = false;
  while (search_from <= text.size()) {
    const std::optional<MatchRange> match = regex.find(text, search_from);
    if (!match) break;
    if (match->begin == match->end && have_previous && match->end == previous_end) {
      if (search_from >= text.size()) break;
      size_t length;
      decode_utf8_at(text, search_from, &length);
      search_from += length;
      continue;
    }
    if (match->begin > previous_end) segments.push_back({previous_end, match->begin, false});
    segments.push_back({match->begin, match->end, true});
    previous_end = match->end;
    have_previous = true;
    search_from = match->end;
  }
  if (previous_end < text.size()) segments.push_back({previous_end, text.size(), false});
}

// Applies a Split behavior to segments, in place. Output segments are all pieces to keep except
// those still flagged `is_match` under `removed`.
void apply_behavior(SplitBehavior behavior, std::vector<Segment>& segments) {
  std::vector<Segment> merged;
  merged.reserve(segments.size());
  bool previous_was_match = false;
  switch (behavior) {
    case SplitBehavior::removed:
      return;
    case SplitBehavior::isolated:
      for (Segment& segment : segments) segment.is_match = false;
      return;
    case SplitBehavior::contiguous:
      // Consecutive matches become one piece.
      for (const Segment& segment : segments) {
        if (segment.is_match == previous_was_match && !merged.empty()) {
          merged.back().end = segment.end;
        } else {
          merged.push_back({segment.begin, segment.end, false});
        }
        previous_was_match = segment.is_match;
      }
      break;
    case SplitBehavior::merged_with_previous:
      // A match joins the piece before it, unless that piece was a match too.
      for (const Segment& segment : segments) {
        if (segment.is_match && !previous_was_match && !merged.empty()) {
          merged.back().end = segment.end;
        } else {
          merged.push_back({segment.begin, segment.end, false});
        }
        previous_was_match = segment.is_match;
      }
      break;
    case SplitBehavior::merged_with_next:
      // A match joins the piece after it, unless that piece is a match too: walk backwards.
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->is_match && !previous_was_match && !merged.empty()) {
          merged.back().begin = it->begin;
        } else {
          merged.push_back({it->begin, it->end, false});
        }
        previous_was_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
  }
  segments.swap(merged);
}

SplitBehavior parse_behavior(const JsonNode& node) {
  const std::string_view name = node.as_string();
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  node.fail(
      "unknown split behavior \"{}\" (expected Removed, Isolated, MergedWithPrevious, "
      "MergedWithNext or Contiguous)",
      name);
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const JsonNode& node) {
  PreTokenizer pre_tokenizer;
  if (node.is_null()) return pre_tokenizer;
  append_steps(node, pre_tokenizer.steps_);
  return pre_tokenizer;
}

void PreTokenizer::append_steps(const JsonNode& node, std::vector<Step>& steps) {
  node.expect_object();
  const std::string_view type = node["type"].as_string();
  if (type == "Sequence") {
    const JsonNode members = node["pretokenizers"];
    for (size_t i = 0; i < members.array_size(); ++i) append_steps(members[i], steps);
  } else if (type == "ByteLevel") {
    steps.push_back(
        ByteLevelStep{node.bool_or("add_prefix_space", true), node.bool_or("use_regex", true)});
  } else if (type == "Split") {
    const JsonNode pattern = node["pattern"];
    pattern.expect_object();
    const bool literal = pattern["Regex"].is_null();
    const JsonNode source = literal ? pattern["String"] : pattern["Regex"];
    if (source.is_null()) pattern.fail("expected {{\"Regex\": ...}} or {{\"String\": ...}}");
    const std::string_view text = source.as_string();
    std::string error;
    std::optional<Regex> regex = Regex::compile(text, literal, &error);
    if (!regex) source.fail("pattern does not compile with PCRE2: {}", error);
    steps.push_back(SplitStep{std::move(*regex), text.empty(), parse_behavior(node["behavior"]),
                              node.bool_or("invert", false)});
  } else {
    node["type"].fail("unsupported pre-tokenizer \"{}\" (supported: Split, ByteLevel, Sequence)",
                      type);
  }
}

void PreTokenizer::split(std::string_view text, Pieces& out) const {
  out.text.assign(text);
  out.ranges.clear();
  if (!text.empty()) out.ranges.push_back({0, text.size()});
  for (const Step& step : steps_) {
    std::visit([&](const auto& concrete) { apply(concrete, out); }, step);
  }
}

void PreTokenizer::apply(const SplitStep& step, Pieces& pieces) {
  thread_local std::vector<Segment> segments;
  std::vector<MatchRange> ranges;
  ranges.reserve(pieces.ranges.size() * 2);
  for (const MatchRange& range : pieces.ranges) {
    const std::string_view piece =
        std::string_view(pieces.text).substr(range.begin, range.end - range.begin);
    if (step.empty_pattern) {
      segments.assign({{0, piece.size(), false}});
    } else {
      find_segments(step.pattern, piece, segments);
    }
    if (step.invert) {
      for (Segment& segment : segments) segment.is_match = !segment.is_match;
    }
    apply_behavior(step.behavior, segments);
    for (const Segment& segment : segments) {
      if (segment.is_match || segment.begin == segment.end) continue;  // removed, or empty
      ranges.push_back({range.begin + segment.begin, range.begin + segment.end});
    }
  }
  pieces.ranges.swap(ranges);
}

void PreTokenizer::apply(const ByteLevelStep& step, Pieces& pieces) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  thread_local std::vector<Segment> segments;
  std::string text;
  text.reserve(pieces.text.size() * 2 + pieces.ranges.size());
  std::vector<MatchRange> ranges;
  ranges.reserve(pieces.ranges.size());
  std::string prefixed;
  auto append_piece = [&](std::string_view bytes) {
    if (bytes.empty()) return;
    const size_t begin = text.size();
    alphabet.append_encoded(text, bytes);
    ranges.push_back({begin, text.size()});
  };
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string_view piece = pieces[i];
    if (step.add_prefix_space && piece.front() != ' ') {
      prefixed.assign(1, ' ');
      prefixed.append(piece);
      piece = prefixed;
    }
    if (!step.use_regex) {
      append_piece(piece);
      continue;
    }
    find_segments(gpt2_regex(), piece, segments);
    for (const Segment& segment : segments) {
      append_piece(piece.substr(segment.begin, segment.end - segment.begin));
    }
  }
  pieces.text.swap(text);
  pieces.ranges.swap(ranges);
}

}  // namespace mosaic::tokenizer
