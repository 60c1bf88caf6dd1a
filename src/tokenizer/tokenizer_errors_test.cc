// What Tokenizer::load refuses, and that each refusal names the file and the field; plus the
// pipeline pieces that the golden files do not reach (no decoder, post-processor sequences).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace mosaic {
namespace {

using ::testing::HasSubstr;

// A minimal valid tokenizer.json with one field replaced by `override_json` (an object merged
// over the defaults).
std::string tokenizer_json(const std::string& override_json = "{}") {
  nlohmann::json json = nlohmann::json::parse(R"({
    "version": "1.0",
    "added_tokens": [
      {"id": 6, "content": "<s>", "special": true, "normalized": false},
      {"id": 7, "content": "</s>", "special": true, "normalized": false},
      {"id": 9, "content": "<extra>", "special": false, "normalized": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4,
                                       "c": 5},
              "merges": ["a b", "\u0120 ab"]}})");
  json.merge_patch(nlohmann::json::parse(override_json));
  return json.dump();
}

std::string error_of(const std::string& json_text) {
  try {
    Tokenizer::from_json_text(json_text, "dir/tokenizer.json");
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(TokenizerLoad, MissingFile) {
  EXPECT_THAT([] { Tokenizer::load("/nonexistent/dir/tokenizer.json"); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("/nonexistent/dir/tokenizer.json: cannot open")));
}

TEST(TokenizerLoad, MalformedJson) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "mosaic_tokenizer_malformed.json";
  std::ofstream(path) << R"({"model": {"type": "BPE", )";
  EXPECT_THAT([&] { Tokenizer::load(path); },
              ::testing::ThrowsMessage<Error>(HasSubstr(path.string() + ": not valid JSON")));
  std::filesystem::remove(path);
}

TEST(TokenizerLoad, RefusesOtherModels) {
  EXPECT_THAT(error_of(tokenizer_json(R"({"model": {"type": "WordPiece"}})")),
              HasSubstr("dir/tokenizer.json: field 'model.type': unsupported model type "
                        "\"WordPiece\""));
  EXPECT_THAT(error_of(R"({"model": {"type": "Unigram", "vocab": []}})"),
              HasSubstr("field 'model.type': unsupported model type \"Unigram\""));
  EXPECT_THAT(error_of(R"({"version": "1.0"})"),
              HasSubstr("field 'model': expected an object, found null"));
  EXPECT_THAT(error_of("[1, 2]"), HasSubstr("field '(root)': expected an object, found array"));
}

TEST(TokenizerLoad, RefusesUnsupportedComponents) {
  EXPECT_THAT(error_of(tokenizer_json(R"({"normalizer": {"type": "Lowercase"}})")),
              HasSubstr("field 'normalizer.type': unsupported normalizer \"Lowercase\""));
  EXPECT_THAT(error_of(tokenizer_json(R"({"pre_tokenizer": {"type": "Metaspace"}})")),
              HasSubstr("field 'pre_tokenizer.type': unsupported pre-tokenizer \"Metaspace\""));
  EXPECT_THAT(error_of(tokenizer_json(R"({"decoder": {"type": "WordPiece"}})")),
              HasSubstr("field 'decoder.type': unsupported decoder \"WordPiece\""));
  EXPECT_THAT(error_of(tokenizer_json(R"({"post_processor": {"type": "BertProcessing"}})")),
              HasSubstr("field 'post_processor.type': unsupported post-processor "
                        "\"BertProcessing\""));
  EXPECT_THAT(
      error_of(tokenizer_json(R"({"post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A"}}],
      "special_tokens": {}}})")),
      HasSubstr("field 'post_processor.single[0].SpecialToken.id': \"<bos>\" has no entry"));
  EXPECT_THAT(error_of(tokenizer_json(R"({"added_tokens": [{"content": "<x>"}]})")),
              HasSubstr("field 'added_tokens[0].id': expected an integer, found null"));
}

TEST(Tokenizer, TemplateProcessingInsideASequence) {
  const Tokenizer tokenizer = Tokenizer::from_json_text(
      tokenizer_json(R"({"post_processor": {"type": "Sequence", "processors": [
          {"type": "ByteLevel"},
          {"type": "TemplateProcessing",
           "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}},
                      {"SpecialToken": {"id": "</s>"}}],
           "special_tokens": {"<s>": {"id": "<s>", "ids": [6], "tokens": ["<s>"]},
                              "</s>": {"id": "</s>", "ids": [7], "tokens": ["</s>"]}}}]}})"),
      "memory");
  EXPECT_EQ(tokenizer.encode("ab ab"), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(tokenizer.encode("ab ab", true), (std::vector<int32_t>{6, 2, 4, 7}));
  EXPECT_EQ(tokenizer.encode("", true), (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{6, 2, 9, 4, 7}), "<s>ab<extra> ab</s>");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{6, 2, 9, 4, 7}, true), "ab<extra> ab");
}

TEST(Tokenizer, WithoutDecoderTokensAreJoinedWithSpaces) {
  const Tokenizer tokenizer =
      Tokenizer::from_json_text(tokenizer_json(R"({"decoder": null})"), "memory");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{2, 4, 5}),
            "ab \xC4\xA0"
            "ab c");
}

TEST(Tokenizer, VocabularyWithGaps) {
  // Ids 8 and 10+ belong to no token: vocab_size still covers the largest id.
  const Tokenizer tokenizer = Tokenizer::from_json_text(tokenizer_json(), "memory");
  EXPECT_EQ(tokenizer.vocab_size(), 10);
  EXPECT_EQ(tokenizer.token_text(9), "<extra>");
  EXPECT_EQ(tokenizer.token_text(4),
            "\xC4\xA0"
            "ab");
  EXPECT_THROW(tokenizer.token_text(8), Error);
  EXPECT_EQ(tokenizer.token_id("<s>"), 6);
  EXPECT_EQ(tokenizer.token_id("ab"), 2);
}

}  // namespace
}  // namespace mosaic
