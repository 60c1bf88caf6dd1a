// Chat prompts for the instruct models Mosaic runs, written out as fixed text formats instead of
// running the checkpoints' Jinja templates (there is no C++ Jinja engine here). The formats
// (shared/reference/models.md §3), for one user message with the generation prompt:
//
//   llada      <|startoftext|><|start_header_id|>user<|end_header_id|>\n\n{content}<|eot_id|>
//              <|start_header_id|>assistant<|end_header_id|>\n\n
//   dream      <|im_start|>system\nYou are a helpful assistant.<|im_end|>\n
//              <|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n
//   llada_moe  (LLaDA-MoE and LLaDA 2.x) <role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>{content}
//              <|role_end|><role>ASSISTANT</role>
//
// (lines broken here only). Dream and LLaDA-MoE insert their default system turn when the first
// message is not a system message. The rendered text already holds the BOS where one belongs:
// encode it with add_special_tokens=false. render_chat_parts keeps the format's markup apart
// from what the messages hold (roles and contents), so that special-token text inside a message
// can be encoded as plain text (Tokenizer::SpecialText::plain) while the markup's tokens stay
// special; render_chat joins the parts (encoded whole, message text that spells a special token
// becomes it, as with the Jinja templates).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mosaic {

enum class ChatFormat { llada, dream, llada_moe };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (llada and dream accept any role)
  std::string content;
};

// One stretch of a rendered chat: the format's markup, or text from a message (a role or content).
struct ChatPart {
  std::string text;
  bool from_message = false;
};

// Throws mosaic::Error for a role that the format cannot express (llada_moe knows only system,
// user and assistant).
std::vector<ChatPart> render_chat_parts(ChatFormat format, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt);
std::string render_chat(ChatFormat format, std::span<const ChatMessage> messages,
                        bool add_generation_prompt);

// The special tokens a format's markup is built on: `marker`, one that every rendering holds (a
// tokenizer without it as a single token has no such chat format), and the end of a turn.
struct ChatSpecials {
  std::string_view marker, end_of_turn;
};
ChatSpecials chat_specials(ChatFormat format);

// The format for a config.json "architectures" entry (LLaDAModelLM, DreamModel,
// LLaDAMoEModelLM, LLaDA2MoeModelLM), or nullopt.
std::optional<ChatFormat> chat_format_for_architecture(std::string_view architecture);

}  // namespace mosaic
