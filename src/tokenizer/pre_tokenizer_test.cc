// Pre-tokenizers against Hugging Face's pieces for the same configurations
// (tests/tokenizer/golden_pre_tokenizers.json, written by make_golden.js): every Split behavior
// with and without invert, String and Regex patterns, ByteLevel with each setting, and Qwen's
// Split + ByteLevel sequence.
#include "tokenizer/pre_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace mosaic::tokenizer {
namespace {

const std::string kOrigin = "test.json";

std::vector<std::string> pieces_of(const PreTokenizer& pre_tokenizer, std::string_view text) {
  Pieces pieces;
  pre_tokenizer.split(text, pieces);
  std::vector<std::string> out;
  for (size_t i = 0; i < pieces.size(); ++i) out.emplace_back(pieces[i]);
  return out;
}

PreTokenizer pre_tokenizer_from(const std::string& json_text) {
  const nlohmann::json json = nlohmann::json::parse(json_text);
  return PreTokenizer::from_json(JsonNode(json, kOrigin, "pre_tokenizer"));
}

TEST(PreTokenizer, MatchesHuggingFace) {
  std::ifstream file(std::filesystem::path(MOSAIC_SOURCE_DIR) / "tests" / "tokenizer" /
                     "golden_pre_tokenizers.json");
  ASSERT_TRUE(file) << "golden_pre_tokenizers.json is missing";
  const nlohmann::json golden = nlohmann::json::parse(file);
  std::vector<PreTokenizer> pre_tokenizers;
  for (const nlohmann::json& config : golden["configs"]) {
    pre_tokenizers.push_back(PreTokenizer::from_json(JsonNode(config, kOrigin, "pre_tokenizer")));
  }
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(pieces_of(pre_tokenizers.at(c["config"]), text),
              c["pieces"].get<std::vector<std::string>>())
        << golden["configs"][c["config"].get<size_t>()].dump() << " on " << nlohmann::json(text);
  }
}

TEST(PreTokenizer, NoneKeepsTheWholeText) {
  EXPECT_THAT(pieces_of(PreTokenizer(), "a b"), ::testing::ElementsAre("a b"));
  EXPECT_TRUE(pieces_of(PreTokenizer(), "").empty());
}

TEST(PreTokenizer, SurvivesLongRuns) {
  // A regex engine with a small backtracking stack fails on long runs of one class.
  const PreTokenizer qwen_like = pre_tokenizer_from(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\s+(?!\\S)|\\s+|\\p{L}+"}, "behavior": "Isolated"},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");
  const std::string spaces(1 << 20, ' ');
  // All spaces but the last, the last one, then "x".
  EXPECT_EQ(pieces_of(qwen_like, spaces + "x").size(), 3u);
  const std::string letters(1 << 20, 'a');
  EXPECT_EQ(pieces_of(qwen_like, letters).size(), 1u);
}

TEST(PreTokenizer, RefusesWhatItDoesNotKnow) {
  auto error_of = [](const std::string& json_text) -> std::string {
    try {
      pre_tokenizer_from(json_text);
    } catch (const Error& error) {
      return error.what();
    }
    return "(no error)";
  };
  EXPECT_THAT(error_of(R"({"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}]})"),
              ::testing::HasSubstr("test.json: field 'pre_tokenizer.pretokenizers[0].type': "
                                   "unsupported pre-tokenizer \"Whitespace\""));
  EXPECT_THAT(
      error_of(R"({"type": "Split", "pattern": {"Regex": "(unclosed"},
                          "behavior": "Isolated"})"),
      ::testing::HasSubstr("field 'pre_tokenizer.pattern.Regex': pattern does not compile"));
  EXPECT_THAT(error_of(R"({"type": "Split", "pattern": {"Regex": "x"}, "behavior": "Sideways"})"),
              ::testing::HasSubstr("field 'pre_tokenizer.behavior': unknown split behavior"));
  EXPECT_THAT(error_of(R"({"type": "Split", "pattern": {"Glob": "x"}, "behavior": "Isolated"})"),
              ::testing::HasSubstr("field 'pre_tokenizer.pattern': expected {\"Regex\""));
}

}  // namespace
}  // namespace mosaic::tokenizer
