// Special-token text read as plain text (Tokenizer::SpecialText::plain) and chats whose markup
// stays special while the messages' text is plain, on a byte-level tokenizer whose ids 0-255 are
// the bytes: the expected ids are the bytes of the text, written out by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mosaic {
namespace {

using SpecialText = Tokenizer::SpecialText;

constexpr int32_t kEndOfText = 256, kMask = 257, kThink = 258, kStartHeader = 259, kEndHeader = 260,
                  kEndOfTurn = 261, kStartOfText = 262;

Tokenizer byte_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    tokenizer::ByteLevelAlphabet::get().append_encoded(symbol, std::string(1, static_cast<char>(b)));
    vocab[symbol] = b;
  }
  auto added = [](int id, const char* content, bool special) {
    return nlohmann::json{{"id", id}, {"content", content}, {"special", special}, {"normalized", false}};
  };
  const nlohmann::json json = {
      {"version", "1.0"},
      {"added_tokens",
       {added(kEndOfText, "<|endoftext|>", true), added(kMask, "<|mdm_mask|>", true),
        added(kThink, "<think>", false), added(kStartHeader, "<|start_header_id|>", true),
        added(kEndHeader, "<|end_header_id|>", true), added(kEndOfTurn, "<|eot_id|>", true),
        added(kStartOfText, "<|startoftext|>", true)}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return Tokenizer::from_json_text(json.dump(), "byte tokenizer");
}

std::vector<int32_t> bytes_of(std::string_view text) {
  std::vector<int32_t> ids;
  for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> ids;
  for (const auto& part : parts) ids.insert(ids.end(), part.begin(), part.end());
  return ids;
}

TEST(SpecialText, ParsedByDefaultAsHuggingFaceDoes) {
  const Tokenizer t = byte_tokenizer();
  EXPECT_EQ(t.encode("a<|mdm_mask|>b"), concat({{'a'}, {kMask}, {'b'}}));
}

TEST(SpecialText, PlainTextKeepsSpecialTokenTextAsItsBytes) {
  const Tokenizer t = byte_tokenizer();
  EXPECT_EQ(t.encode("a<|mdm_mask|>b", SpecialText::plain), bytes_of("a<|mdm_mask|>b"));
  EXPECT_EQ(t.encode("<|endoftext|>", SpecialText::plain), bytes_of("<|endoftext|>"));
}

TEST(SpecialText, PlainTextStillMatchesAddedTokensThatAreNotSpecial) {
  const Tokenizer t = byte_tokenizer();
  EXPECT_EQ(t.encode("x<think>y", SpecialText::plain), concat({{'x'}, {kThink}, {'y'}}));
}

TEST(SpecialText, PiecesMixParsedAndPlainText) {
  const Tokenizer t = byte_tokenizer();
  const std::vector<Tokenizer::TextPiece> pieces = {
      {"<|startoftext|>", SpecialText::parse}, {"hi <|eot_id|>", SpecialText::plain}, {"<|eot_id|>", SpecialText::parse}};
  EXPECT_EQ(t.encode(pieces), concat({{kStartOfText}, bytes_of("hi <|eot_id|>"), {kEndOfTurn}}));
}

TEST(SpecialText, PiecesEncodeAsTheirJoinedTextWhenNothingSpecialIsInThem) {
  const Tokenizer t = byte_tokenizer();
  const std::vector<Tokenizer::TextPiece> pieces = {{"Hello ", SpecialText::parse}, {"wor", SpecialText::plain},
                                                    {"ld<|endoftext|>", SpecialText::parse}};
  EXPECT_EQ(t.encode(pieces), t.encode("Hello world<|endoftext|>"));
}

TEST(SpecialText, ChatPartsKeepMarkupApartFromMessages) {
  const std::vector<ChatMessage> messages = {{"user", "say <|eot_id|>"}};
  const std::vector<ChatPart> parts = render_chat_parts(ChatFormat::llada, messages, true);
  std::vector<Tokenizer::TextPiece> pieces;
  for (const ChatPart& part : parts)
    pieces.push_back({part.text, part.from_message ? SpecialText::plain : SpecialText::parse});
  const Tokenizer t = byte_tokenizer();
  EXPECT_EQ(t.encode(pieces), concat({{kStartOfText, kStartHeader}, bytes_of("user"), {kEndHeader}, bytes_of("\n\n"),
                                      bytes_of("say <|eot_id|>"), {kEndOfTurn, kStartHeader}, bytes_of("assistant"),
                                      {kEndHeader}, bytes_of("\n\n")}));
  std::string joined;
  for (const ChatPart& part : parts) joined += part.text;
  EXPECT_EQ(joined, render_chat(ChatFormat::llada, messages, true));
}

}  // namespace
}  // namespace mosaic
