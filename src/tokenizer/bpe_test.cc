#include "tokenizer/bpe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"

namespace mosaic::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kOrigin = "test.json";

BpeModel model_from(const std::string& json_text) {
  const nlohmann::json json = nlohmann::json::parse(json_text);
  return BpeModel::from_json(JsonNode(json, kOrigin, "model"));
}

std::vector<int32_t> encode(const BpeModel& model, std::string_view word) {
  std::vector<int32_t> ids;
  model.encode_word(word, ids);
  return ids;
}

std::string error_of(const std::string& json_text) {
  try {
    model_from(json_text);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

constexpr const char* kAbc =
    R"({"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "aa": 6, "aaaa": 7, "xyz": 8,
        "x": 9, "y": 10, "z": 11, "<unk>": 12})";

TEST(BpeModel, LowestRankMergesFirst) {
  const BpeModel b_c_first =
      model_from(std::string(R"({"vocab": )") + kAbc + R"(, "merges": ["b c", "a b", "a bc"]})");
  EXPECT_THAT(encode(b_c_first, "abc"), ElementsAre(5));  // a + bc, then a·bc
  const BpeModel a_b_first =
      model_from(std::string(R"({"vocab": )") + kAbc + R"(, "merges": ["a b", "b c", "ab c"]})");
  EXPECT_THAT(encode(a_b_first, "abc"), ElementsAre(5));  // ab + c, then ab·c
  const BpeModel no_way_on =
      model_from(std::string(R"({"vocab": )") + kAbc + R"(, "merges": ["a b", "b c", "a bc"]})");
  EXPECT_THAT(encode(no_way_on, "abc"), ElementsAre(3, 2));  // ab c: "ab c" is no merge
}

TEST(BpeModel, EqualRanksMergeLeftmostFirst) {
  const BpeModel model = model_from(std::string(R"({"vocab": )") + kAbc +
                                    R"(, "merges": [["a", "a"], ["aa", "aa"]]})");
  EXPECT_THAT(encode(model, "aaa"), ElementsAre(6, 0));
  EXPECT_THAT(encode(model, "aaaa"), ElementsAre(7));
  EXPECT_THAT(encode(model, "aaaaa"), ElementsAre(7, 0));
}

TEST(BpeModel, ListAndStringMergesAgree) {
  const BpeModel strings =
      model_from(std::string(R"({"vocab": )") + kAbc + R"(, "merges": ["a b", "ab c"]})");
  const BpeModel lists =
      model_from(std::string(R"({"vocab": )") + kAbc + R"(, "merges": [["a", "b"], ["ab", "c"]]})");
  for (const char* word : {"abc", "cab", "abcabc", "ba"}) {
    EXPECT_EQ(encode(strings, word), encode(lists, word)) << word;
  }
}

TEST(BpeModel, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  const std::string vocab = std::string(R"({"vocab": )") + kAbc;
  const BpeModel merging = model_from(vocab + R"(, "merges": [], "ignore_merges": false})");
  const BpeModel ignoring = model_from(vocab + R"(, "merges": [], "ignore_merges": true})");
  EXPECT_THAT(encode(merging, "xyz"), ElementsAre(9, 10, 11));
  EXPECT_THAT(encode(ignoring, "xyz"), ElementsAre(8));
  EXPECT_THAT(encode(ignoring, "xy"), ElementsAre(9, 10));
}

TEST(BpeModel, UnknownCharacters) {
  const std::string vocab = std::string(R"({"vocab": )") + kAbc + R"(, "merges": ["a b"])";
  // Without an unknown token they vanish, as in HF, and their neighbors can then merge.
  EXPECT_THAT(encode(model_from(vocab + "}"),
                     "a\xC3\xA9\xC3\xA9"
                     "b"),
              ElementsAre(3));
  EXPECT_THAT(encode(model_from(vocab + "}"),
                     "\xC3\xA9"
                     "c"),
              ElementsAre(2));
  const BpeModel unfused = model_from(vocab + R"(, "unk_token": "<unk>"})");
  EXPECT_THAT(encode(unfused,
                     "a\xC3\xA9\xC3\xA9"
                     "b"),
              ElementsAre(0, 12, 12, 1));
  const BpeModel fused = model_from(vocab + R"(, "unk_token": "<unk>", "fuse_unk": true})");
  EXPECT_THAT(encode(fused,
                     "a\xC3\xA9\xC3\xA9"
                     "b"),
              ElementsAre(0, 12, 1));
  EXPECT_THAT(encode(fused, "ab\xE2\x82\xAC"), ElementsAre(3, 12));
}

TEST(BpeModel, CachedResultsAreTheSame) {
  const BpeModel model =
      model_from(std::string(R"({"vocab": )") + kAbc + R"(, "merges": ["a b", "ab c"]})");
  const std::vector<int32_t> first = encode(model, "abcab");
  EXPECT_EQ(encode(model, "abcab"), first);
  model.clear_cache();
  EXPECT_EQ(encode(model, "abcab"), first);
}

TEST(BpeModel, LongWordsAreNotQuadratic) {
  const BpeModel model = model_from(std::string(R"({"vocab": )") + kAbc +
                                    R"(, "merges": [["a", "a"], ["aa", "aa"]]})");
  const std::vector<int32_t> ids = encode(model, std::string(400000, 'a'));
  EXPECT_EQ(ids.size(), 100000u);
}

TEST(BpeModel, RefusesWhatItCannotHonor) {
  const std::string vocab = std::string(R"({"vocab": )") + kAbc;
  EXPECT_THAT(error_of(vocab + R"(, "merges": ["a q"]})"),
              HasSubstr("test.json: field 'model.merges[0]': merge of \"a\" and \"q\""));
  EXPECT_THAT(error_of(vocab + R"(, "merges": ["a b", "a  b"]})"),
              HasSubstr("field 'model.merges[1]': expected two tokens separated by one space"));
  EXPECT_THAT(error_of(vocab + R"(, "merges": [["a"]]})"),
              HasSubstr("field 'model.merges[0]': expected a pair"));
  EXPECT_THAT(error_of(vocab + R"(, "merges": [], "dropout": 0.1})"),
              HasSubstr("field 'model.dropout'"));
  EXPECT_THAT(error_of(vocab + R"(, "merges": [], "byte_fallback": true})"),
              HasSubstr("field 'model.byte_fallback'"));
  EXPECT_THAT(error_of(vocab + R"(, "merges": [], "continuing_subword_prefix": "##"})"),
              HasSubstr("field 'model.continuing_subword_prefix'"));
  EXPECT_THAT(error_of(vocab + R"(, "merges": [], "unk_token": "[UNK]"})"),
              HasSubstr("field 'model.unk_token': unknown token \"[UNK]\" is not in the vocab"));
  EXPECT_THAT(error_of(R"({"vocab": {"a": "zero"}, "merges": []})"),
              HasSubstr("field 'model.vocab.a': expected a token id"));
  EXPECT_THAT(error_of(R"({"vocab": {"a": 0}})"),
              HasSubstr("field 'model.merges': expected an array, found null"));
  // Empty affixes and a zero dropout are what real files contain: accepted.
  EXPECT_EQ(error_of(vocab + R"(, "merges": [], "dropout": null, "continuing_subword_prefix": "",
                                "end_of_word_suffix": null})"),
            "(no error)");
}

}  // namespace
}  // namespace mosaic::tokenizer
