#include "tokenizer/chat_template.h"

#include "core/error.h"

namespace mosaic {
namespace {

constexpr std::string_view kDreamDefaultSystem = "You are a helpful assistant.";
constexpr std::string_view kLladaMoeDefaultSystem = "detailed thinking off";

bool starts_with_system(std::span<const ChatMessage> messages) {
  return !messages.empty() && messages.front().role == "system";
}

std::string render_llada(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string text = "<|startoftext|>";
  for (const ChatMessage& message : messages) {
    text += "<|start_header_id|>" + message.role + "<|end_header_id|>\n\n" + message.content +
            "<|eot_id|>";
  }
  if (add_generation_prompt) text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return text;
}

std::string render_dream(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string text;
  auto add_turn = [&text](std::string_view role, std::string_view content) {
    text.append("<|im_start|>").append(role).append("\n").append(content).append("<|im_end|>\n");
  };
  if (!starts_with_system(messages)) add_turn("system", kDreamDefaultSystem);
  for (const ChatMessage& message : messages) add_turn(message.role, message.content);
  if (add_generation_prompt) text += "<|im_start|>assistant\n";
  return text;
}

std::string render_llada_moe(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string text;
  auto add_turn = [&text](std::string_view role, std::string_view content) {
    text.append("<role>").append(role).append("</role>").append(content).append("<|role_end|>");
  };
  if (!starts_with_system(messages)) add_turn("SYSTEM", kLladaMoeDefaultSystem);
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    std::string_view tag;
    if (role == "system") {
      tag = "SYSTEM";
    } else if (role == "user") {
      tag = "HUMAN";
    } else if (role == "assistant") {
      tag = "ASSISTANT";
    } else {
      fail(
          "chat message {}: role \"{}\" has no LLaDA-MoE tag (expected system, user or "
          "assistant)",
          i, role);
    }
    add_turn(tag, messages[i].content);
  }
  if (add_generation_prompt) text += "<role>ASSISTANT</role>";
  return text;
}

}  // namespace

std::string render_chat(ChatFormat format, std::span<const ChatMessage> messages,
                        bool add_generation_prompt) {
  switch (format) {
    case ChatFormat::llada:
      return render_llada(messages, add_generation_prompt);
    case ChatFormat::dream:
      return render_dream(messages, add_generation_prompt);
    case ChatFormat::llada_moe:
      return render_llada_moe(messages, add_generation_prompt);
  }
  MOSAIC_ASSERT(false, "unknown chat format {}", static_cast<int>(format));
}

std::optional<ChatFormat> chat_format_for_architecture(std::string_view architecture) {
  if (architecture == "LLaDAModelLM") return ChatFormat::llada;
  if (architecture == "DreamModel") return ChatFormat::dream;
  if (architecture == "LLaDAMoEModelLM") return ChatFormat::llada_moe;
  return std::nullopt;
}

}  // namespace mosaic
