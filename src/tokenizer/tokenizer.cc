#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "core/json_parse.h"
#include "core/printable.h"
#include "core/regular_file.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"

namespace mosaic {

using tokenizer::Pipeline;
using tokenizer::TextSegment;

Tokenizer::Tokenizer(std::shared_ptr<const Pipeline> pipeline) : pipeline_(std::move(pipeline)) {}

// The largest released tokenizer.json files are about 35 MB (Gemma 3's 262k tokens); the parsed
// form takes several times the text.
constexpr uint64_t kTokenizerJsonMaxBytes = uint64_t{64} << 20;

Tokenizer Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  return from_json_text(read_text_file(tokenizer_json, kTokenizerJsonMaxBytes), printable_path(tokenizer_json));
}

Tokenizer Tokenizer::from_json_text(std::string_view json_text, std::string_view origin) {
  const std::string origin_name(origin);
  const nlohmann::json root = parse_json(json_text, origin_name);
  return Tokenizer(tokenizer::build_pipeline(tokenizer::JsonNode(root, origin_name)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return encode(text, SpecialText::parse, add_special_tokens);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, SpecialText special, bool add_special_tokens) const {
  const TextPiece piece{text, special};
  return encode(std::span(&piece, 1), add_special_tokens);
}

std::vector<int32_t> Tokenizer::encode(std::span<const TextPiece> pieces, bool add_special_tokens) const {
  const Pipeline& p = *pipeline_;
  std::string joined;
  for (const TextPiece& piece : pieces) joined += piece.text;
  const std::string_view text = joined;
  if (const std::optional<size_t> bad = tokenizer::find_invalid_utf8(text)) {
    fail("text to encode is not valid UTF-8 (byte {} of {})", *bad, text.size());
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 4 + 4);
  std::vector<TextSegment> raw_segments, piece_segments, normalized_segments;
  std::string normalized_storage;
  tokenizer::Pieces words;

  auto split_by = [](const tokenizer::AddedTokenMatcher& matcher, std::string_view part,
                     std::vector<TextSegment>& segments) {
    segments.clear();
    if (matcher.empty()) {
      segments.push_back({0, part.size(), -1});
    } else {
      matcher.split(part, segments);
    }
  };
  // Added tokens matched in each piece's raw text (special ones only where they are parsed);
  // plain stretches that meet across pieces are one stretch, as in the joined text.
  size_t offset = 0;
  for (const TextPiece& piece : pieces) {
    const bool parse = piece.special == SpecialText::parse;
    split_by(parse ? p.raw_matcher : p.raw_plain_matcher, piece.text, piece_segments);
    for (const TextSegment& segment : piece_segments) {
      if (segment.token_id < 0 && segment.begin == segment.end) continue;
      const TextSegment shifted{segment.begin + offset, segment.end + offset, segment.token_id};
      if (shifted.token_id < 0 && !raw_segments.empty() && raw_segments.back().token_id < 0 &&
          raw_segments.back().end == shifted.begin)
        raw_segments.back().end = shifted.end;
      else
        raw_segments.push_back(shifted);
    }
    offset += piece.text.size();
  }
  // Whether a plain stretch holds any text of a parsed piece decides which matcher runs on its
  // normalized form: the special tokens are looked for only where every byte may hold them.
  auto all_parsed = [&](const TextSegment& segment) {
    size_t begin = 0;
    for (const TextPiece& piece : pieces) {
      const size_t end = begin + piece.text.size();
      if (piece.special == SpecialText::plain && begin < segment.end && segment.begin < end) return false;
      begin = end;
    }
    return true;
  };

  // Then the normalizer on what lies between them, then added tokens matched in the normalized
  // text, then pre-tokenizer and BPE on the rest.
  for (const TextSegment& raw : raw_segments) {
    if (raw.token_id >= 0) {
      ids.push_back(raw.token_id);
      continue;
    }
    if (raw.begin == raw.end) continue;
    const std::string_view normalized =
        p.normalizer.apply(text.substr(raw.begin, raw.end - raw.begin), normalized_storage);
    split_by(all_parsed(raw) ? p.normalized_matcher : p.normalized_plain_matcher, normalized, normalized_segments);
    for (const TextSegment& segment : normalized_segments) {
      if (segment.token_id >= 0) {
        ids.push_back(segment.token_id);
        continue;
      }
      if (segment.begin == segment.end) continue;
      p.pre_tokenizer.split(normalized.substr(segment.begin, segment.end - segment.begin), words);
      for (size_t i = 0; i < words.size(); ++i) p.model.encode_word(words[i], ids);
    }
  }
  if (add_special_tokens) p.post_processor.apply(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Pipeline& p = *pipeline_;
  std::vector<std::string_view> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= p.token_of_id.size()) continue;
    const std::string_view token = p.token_of_id[id];
    if (token.empty()) continue;
    if (skip_special_tokens && p.is_special_id[id]) continue;
    tokens.push_back(token);
  }
  return p.decoder.decode(tokens);
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  const auto it = pipeline_->added_token_ids.find(token);
  if (it != pipeline_->added_token_ids.end()) return it->second;
  return pipeline_->model.token_id(token);
}

std::string_view Tokenizer::token_text(int32_t id) const {
  const auto& table = pipeline_->token_of_id;
  if (id < 0 || static_cast<size_t>(id) >= table.size() || table[id].empty()) {
    fail("token id {} is not in the tokenizer's vocabulary (ids 0..{})", id, table.size() - 1);
  }
  return table[id];
}

int64_t Tokenizer::vocab_size() const {
  return static_cast<int64_t>(pipeline_->token_of_id.size());
}

}  // namespace mosaic
