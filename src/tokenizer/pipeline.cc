#include "tokenizer/pipeline.h"

#include <algorithm>
#include <unordered_set>

namespace mosaic::tokenizer {
namespace {

BpeModel read_model(const JsonNode& model) {
  model.expect_object();
  const JsonNode type = model["type"];
  // Files written by old versions of HF tokenizers may omit the type; merges mean BPE.
  if (type.is_null() && model["merges"].is_null()) {
    model.fail("model has no \"type\" and no merges; Mosaic reads BPE models only");
  }
  if (!type.is_null() && type.as_string() != "BPE") {
    type.fail(
        "unsupported model type \"{}\": Mosaic reads byte-level BPE tokenizers only "
        "(not WordPiece, WordLevel or Unigram)",
        type.as_string());
  }
  return BpeModel::from_json(model);
}

std::vector<AddedToken> read_added_tokens(const JsonNode& list) {
  std::vector<AddedToken> tokens;
  if (list.is_null()) return tokens;
  for (size_t i = 0; i < list.array_size(); ++i) {
    const JsonNode entry = list[i];
    entry.expect_object();
    AddedToken token;
    const int64_t id = entry["id"].as_int();
    if (id < 0 || id >= BpeModel::kTokenIdLimit) {
      entry["id"].fail("token id {} is out of range (0 to 2^24-1)", id);
    }
    token.id = static_cast<int32_t>(id);
    token.content = std::string(entry["content"].as_string());
    token.special = entry.bool_or("special", false);
    token.single_word = entry.bool_or("single_word", false);
    token.lstrip = entry.bool_or("lstrip", false);
    token.rstrip = entry.bool_or("rstrip", false);
    token.normalized = entry.bool_or("normalized", !token.special);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// Special tokens are searched before plain added tokens, each group in file order (HF's order;
// it decides which of two tokens with the same text wins).
std::vector<AddedToken> in_matching_order(const std::vector<AddedToken>& tokens) {
  std::vector<AddedToken> ordered(tokens);
  std::stable_partition(ordered.begin(), ordered.end(),
                        [](const AddedToken& token) { return token.special; });
  return ordered;
}

AddedTokenMatcher make_matcher(const std::vector<AddedToken>& ordered, bool normalized,
                               const Normalizer& normalizer, bool with_special = true) {
  std::vector<AddedToken> tokens;
  std::vector<std::string> patterns;
  for (const AddedToken& token : ordered) {
    if (token.normalized != normalized || (token.special && !with_special)) continue;
    tokens.push_back(token);
    std::string storage;
    patterns.emplace_back(normalized ? normalizer.apply(token.content, storage) : token.content);
  }
  return AddedTokenMatcher(tokens, patterns);
}

}  // namespace

std::shared_ptr<const Pipeline> build_pipeline(const JsonNode& root) {
  root.expect_object();
  Normalizer normalizer = Normalizer::from_json(root["normalizer"]);
  PreTokenizer pre_tokenizer = PreTokenizer::from_json(root["pre_tokenizer"]);
  BpeModel model = read_model(root["model"]);
  PostProcessor post_processor = PostProcessor::from_json(root["post_processor"]);
  Decoder decoder = Decoder::from_json(root["decoder"]);
  // "truncation" and "padding" are ignored: lengths are the engine's business, and transformers
  // overrides both on every call anyway.

  auto pipeline = std::make_shared<Pipeline>(Pipeline{std::move(normalizer),
                                                      std::move(pre_tokenizer),
                                                      std::move(model),
                                                      std::move(post_processor),
                                                      std::move(decoder),
                                                      read_added_tokens(root["added_tokens"]),
                                                      AddedTokenMatcher(),
                                                      AddedTokenMatcher(),
                                                      AddedTokenMatcher(),
                                                      AddedTokenMatcher(),
                                                      {},
                                                      {},
                                                      {}});
  Pipeline& p = *pipeline;

  const std::vector<AddedToken> ordered = in_matching_order(p.added_tokens);
  p.raw_matcher = make_matcher(ordered, false, p.normalizer);
  p.normalized_matcher = make_matcher(ordered, true, p.normalizer);
  p.raw_plain_matcher = make_matcher(ordered, false, p.normalizer, /*with_special=*/false);
  p.normalized_plain_matcher = make_matcher(ordered, true, p.normalizer, /*with_special=*/false);

  int64_t id_limit = 0;
  for (const auto& [token, id] : p.model.vocabulary())
    id_limit = std::max<int64_t>(id_limit, id + 1);
  for (const AddedToken& token : p.added_tokens)
    id_limit = std::max<int64_t>(id_limit, token.id + 1);
  p.token_of_id.assign(static_cast<size_t>(id_limit), std::string_view());
  p.is_special_id.assign(static_cast<size_t>(id_limit), false);
  for (const auto& [token, id] : p.model.vocabulary()) p.token_of_id[id] = token;
  // An added token's text wins over the vocabulary's for the same id, as in HF.
  std::unordered_set<std::string_view> special_texts;
  for (const AddedToken& token : p.added_tokens) {
    p.token_of_id[token.id] = token.content;
    p.added_token_ids.emplace(token.content, token.id);
    if (token.special) special_texts.insert(token.content);
  }
  // HF skips by text: any id whose string is a special token's is left out.
  for (size_t id = 0; id < p.token_of_id.size(); ++id) {
    p.is_special_id[id] = !special_texts.empty() && special_texts.count(p.token_of_id[id]) > 0;
  }
  return pipeline;
}

}  // namespace mosaic::tokenizer
