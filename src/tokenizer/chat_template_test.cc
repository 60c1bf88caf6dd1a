#include "tokenizer/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mosaic {
namespace {

const std::vector<ChatMessage> kOneUserMessage = {{"user", "What is 2+2?"}};

// The single-message strings of shared/reference/models.md §3, verbatim.
TEST(ChatTemplate, LladaSingleUserMessage) {
  EXPECT_EQ(render_chat(ChatFormat::llada, kOneUserMessage, true),
            "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, DreamSingleUserMessage) {
  EXPECT_EQ(render_chat(ChatFormat::dream, kOneUserMessage, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, LladaMoeSingleUserMessage) {
  EXPECT_EQ(render_chat(ChatFormat::llada_moe, kOneUserMessage, true),
            "<role>SYSTEM</role>detailed thinking off<|role_end|>"
            "<role>HUMAN</role>What is 2+2?<|role_end|><role>ASSISTANT</role>");
}

TEST(ChatTemplate, WithoutGenerationPrompt) {
  EXPECT_EQ(render_chat(ChatFormat::llada, kOneUserMessage, false),
            "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>");
  EXPECT_EQ(render_chat(ChatFormat::dream, kOneUserMessage, false),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n");
  EXPECT_EQ(render_chat(ChatFormat::llada_moe, kOneUserMessage, false),
            "<role>SYSTEM</role>detailed thinking off<|role_end|>"
            "<role>HUMAN</role>What is 2+2?<|role_end|>");
}

TEST(ChatTemplate, MultiTurnWithOwnSystemPrompt) {
  const std::vector<ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
  EXPECT_EQ(render_chat(ChatFormat::llada, messages, true),
            "<|startoftext|>"
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_chat(ChatFormat::dream, messages, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(ChatFormat::llada_moe, messages, true),
            "<role>SYSTEM</role>Be brief.<|role_end|>"
            "<role>HUMAN</role>Hi<|role_end|>"
            "<role>ASSISTANT</role>Hello.<|role_end|>"
            "<role>HUMAN</role>Bye<|role_end|>"
            "<role>ASSISTANT</role>");
}

TEST(ChatTemplate, NoMessages) {
  EXPECT_EQ(render_chat(ChatFormat::llada, {}, true),
            "<|startoftext|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, LladaMoeRefusesRolesItCannotTag) {
  const std::vector<ChatMessage> messages = {{"user", "Hi"}, {"tool", "42"}};
  EXPECT_THAT([&] { render_chat(ChatFormat::llada_moe, messages, true); },
              ::testing::ThrowsMessage<Error>(
                  ::testing::HasSubstr("chat message 1: role \"tool\" has no LLaDA-MoE tag")));
  // LLaDA and Dream write any role as it is.
  EXPECT_NO_THROW(render_chat(ChatFormat::dream, messages, true));
}

// The Dream prompt is one of the texts whose Qwen ids are golden-tested against Hugging Face.
TEST(ChatTemplate, DreamPromptIsAGoldenText) {
  std::ifstream file(std::filesystem::path(MOSAIC_SOURCE_DIR) / "tests" / "tokenizer" /
                     "texts.json");
  ASSERT_TRUE(file);
  const nlohmann::json texts = nlohmann::json::parse(file)["texts"];
  const std::vector<ChatMessage> messages = {{"user", "Hello!"}};
  const std::string rendered = render_chat(ChatFormat::dream, messages, true);
  EXPECT_NE(std::find(texts.begin(), texts.end(), rendered), texts.end()) << rendered;
}

TEST(ChatTemplate, FormatForArchitecture) {
  EXPECT_EQ(chat_format_for_architecture("LLaDAModelLM"), ChatFormat::llada);
  EXPECT_EQ(chat_format_for_architecture("DreamModel"), ChatFormat::dream);
  EXPECT_EQ(chat_format_for_architecture("LLaDAMoEModelLM"), ChatFormat::llada_moe);
  EXPECT_EQ(chat_format_for_architecture("LLaDA2MoeModelLM"), ChatFormat::llada_moe);
  EXPECT_EQ(chat_format_for_architecture("LlamaForCausalLM"), std::nullopt);
}

}  // namespace
}  // namespace mosaic
