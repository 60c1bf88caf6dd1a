#include "tokenizer/chat_template.h"

#include "core/error.h"

namespace mosaic {
namespace {

constexpr std::string_view kDreamDefaultSystem = "You are a helpful assistant.";
constexpr std::string_view kLladaMoeDefaultSystem = "detailed thinking off";

bool starts_with_system(std::span<const ChatMessage> messages) {
  return !messages.empty() && messages.front().role == "system";
}

// Markup and message text in order; adjacent markup is one part.
class ChatWriter {
 public:
  ChatWriter& markup(std::string_view text) { return add(text, false); }
  ChatWriter& message(std::string_view text) { return add(text, true); }
  std::vector<ChatPart> parts() && { return std::move(parts_); }

 private:
  ChatWriter& add(std::string_view text, bool from_message) {
    if (text.empty()) return *this;
    if (!parts_.empty() && parts_.back().from_message == from_message) parts_.back().text += text;
    else parts_.push_back({std::string(text), from_message});
    return *this;
  }
  std::vector<ChatPart> parts_;
};

std::vector<ChatPart> render_llada(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  ChatWriter out;
  out.markup("<|startoftext|>");
  for (const ChatMessage& message : messages) {
    out.markup("<|start_header_id|>").message(message.role).markup("<|end_header_id|>\n\n");
    out.message(message.content).markup("<|eot_id|>");
  }
  if (add_generation_prompt) out.markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
  return std::move(out).parts();
}

std::vector<ChatPart> render_dream(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  ChatWriter out;
  if (!starts_with_system(messages))
    out.markup("<|im_start|>system\n").markup(kDreamDefaultSystem).markup("<|im_end|>\n");
  for (const ChatMessage& message : messages)
    out.markup("<|im_start|>").message(message.role).markup("\n").message(message.content).markup("<|im_end|>\n");
  if (add_generation_prompt) out.markup("<|im_start|>assistant\n");
  return std::move(out).parts();
}

std::vector<ChatPart> render_llada_moe(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  ChatWriter out;
  if (!starts_with_system(messages))
    out.markup("<role>SYSTEM</role>").markup(kLladaMoeDefaultSystem).markup("<|role_end|>");
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
    out.markup("<role>").markup(tag).markup("</role>").message(messages[i].content).markup("<|role_end|>");
  }
  if (add_generation_prompt) out.markup("<role>ASSISTANT</role>");
  return std::move(out).parts();
}

}  // namespace

std::vector<ChatPart> render_chat_parts(ChatFormat format, std::span<const ChatMessage> messages,
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

ChatSpecials chat_specials(ChatFormat format) {
  switch (format) {
    case ChatFormat::llada: return {"<|start_header_id|>", "<|eot_id|>"};
    case ChatFormat::dream: return {"<|im_start|>", "<|im_end|>"};
    case ChatFormat::llada_moe: return {"<|role_end|>", "<|role_end|>"};
  }
  MOSAIC_ASSERT(false, "unknown chat format {}", static_cast<int>(format));
}

std::string render_chat(ChatFormat format, std::span<const ChatMessage> messages,
                        bool add_generation_prompt) {
  std::string text;
  for (const ChatPart& part : render_chat_parts(format, messages, add_generation_prompt)) text += part.text;
  return text;
}

std::optional<ChatFormat> chat_format_for_architecture(std::string_view architecture) {
  if (architecture == "LLaDAModelLM") return ChatFormat::llada;
  if (architecture == "DreamModel") return ChatFormat::dream;
  // LLaDA 2.x shares LLaDA-MoE's tokenizer and role markup (moe-models.md 2.6).
  if (architecture == "LLaDAMoEModelLM" || architecture == "LLaDA2MoeModelLM") return ChatFormat::llada_moe;
  return std::nullopt;
}

}  // namespace mosaic
