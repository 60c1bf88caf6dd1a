#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"

namespace mosaic {

using tokenizer::Pipeline;
using tokenizer::TextSegment;

Tokenizer::Tokenizer(std::shared_ptr<const Pipeline> pipeline) : pipeline_(std::move(pipeline)) {}

Tokenizer Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  return from_json_text(read_text_file(tokenizer_json), tokenizer_json.string());
}

Tokenizer Tokenizer::from_json_text(std::string_view json_text, std::string_view origin) {
  const std::string origin_name(origin);
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& error) {  // parse_error, or out_of_range for 1e999
    fail("{}: malformed JSON: {}", origin_name, error.what());
  }
  return Tokenizer(tokenizer::build_pipeline(tokenizer::JsonNode(root, origin_name)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const std::optional<size_t> bad = tokenizer::find_invalid_utf8(text)) {
    fail("text to encode is not valid UTF-8 (byte {} of {})", *bad, text.size());
  }
  const Pipeline& p = *pipeline_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 4 + 4);
  std::vector<TextSegment> raw_segments, normalized_segments;
  std::string normalized_storage;
  tokenizer::Pieces pieces;

  // Added tokens matched in the raw text, then the normalizer on what lies between them, then
  // added tokens matched in the normalized text, then pre-tokenizer and BPE on the rest.
  auto split_by = [](const tokenizer::AddedTokenMatcher& matcher, std::string_view part,
                     std::vector<TextSegment>& segments) {
    segments.clear();
    if (matcher.empty()) {
      segments.push_back({0, part.size(), -1});
    } else {
      matcher.split(part, segments);
    }
  };
  split_by(p.raw_matcher, text, raw_segments);
  for (const TextSegment& raw : raw_segments) {
    if (raw.token_id >= 0) {
      ids.push_back(raw.token_id);
      continue;
    }
    if (raw.begin == raw.end) continue;
    const std::string_view normalized =
        p.normalizer.apply(text.substr(raw.begin, raw.end - raw.begin), normalized_storage);
    split_by(p.normalized_matcher, normalized, normalized_segments);
    for (const TextSegment& segment : normalized_segments) {
      if (segment.token_id >= 0) {
        ids.push_back(segment.token_id);
        continue;
      }
      if (segment.begin == segment.end) continue;
      p.pre_tokenizer.split(normalized.substr(segment.begin, segment.end - segment.begin), pieces);
      for (size_t i = 0; i < pieces.size(); ++i) p.model.encode_word(pieces[i], ids);
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
