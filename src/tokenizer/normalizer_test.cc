// Normalizers against Hugging Face's output for the same configurations
// (tests/tokenizer/golden_normalizers.json, written by make_golden.js).
#include "tokenizer/normalizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace mosaic::tokenizer {
namespace {

const std::string kOrigin = "test.json";

TEST(Normalizer, MatchesHuggingFace) {
  std::ifstream file(std::filesystem::path(MOSAIC_SOURCE_DIR) / "tests" / "tokenizer" /
                     "golden_normalizers.json");
  ASSERT_TRUE(file) << "golden_normalizers.json is missing";
  const nlohmann::json golden = nlohmann::json::parse(file);
  std::vector<Normalizer> normalizers;
  for (const nlohmann::json& config : golden["configs"]) {
    normalizers.push_back(Normalizer::from_json(JsonNode(config, kOrigin, "normalizer")));
  }
  size_t checked = 0;
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string text = c["text"];
    std::string storage;
    EXPECT_EQ(normalizers.at(c["config"]).apply(text, storage), c["normalized"].get<std::string>())
        << golden["configs"][c["config"].get<size_t>()].dump() << " on " << nlohmann::json(text);
    ++checked;
  }
  EXPECT_GT(checked, 400u);
}

TEST(Normalizer, ComposesAndDecomposes) {
  std::string storage;
  const Normalizer nfc({UnicodeForm::nfc});
  EXPECT_EQ(nfc.apply("cafe\xCC\x81", storage), "caf\xC3\xA9");
  const Normalizer nfkd({UnicodeForm::nfkd});
  EXPECT_EQ(nfkd.apply("\xEF\xAC\x81", storage), "fi");  // the ligature ﬁ
  EXPECT_TRUE(Normalizer().is_identity());
  EXPECT_EQ(Normalizer().apply("cafe\xCC\x81", storage), "cafe\xCC\x81");
}

TEST(Normalizer, RefusesOtherNormalizers) {
  const nlohmann::json lowercase = nlohmann::json::parse(
      R"({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]})");
  try {
    Normalizer::from_json(JsonNode(lowercase, kOrigin, "normalizer"));
    FAIL() << "Lowercase was accepted";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(),
                ::testing::HasSubstr("test.json: field 'normalizer.normalizers[1].type': "
                                     "unsupported normalizer \"Lowercase\""));
  }
}

}  // namespace
}  // namespace mosaic::tokenizer
