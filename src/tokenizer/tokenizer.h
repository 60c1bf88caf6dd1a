// Text <-> token ids for the models Mosaic runs, read from a Hugging Face tokenizer.json with a
// byte-level BPE model (LLaDA-8B, Dream-7B/Qwen2.5, Llama-3-style files). The ids are the ones
// Hugging Face tokenizers produces: tests compare with it on real files (docs/design/tokenizer.md
// lists what is supported and what is refused).
//
//   Tokenizer tokenizer = Tokenizer::load(model_dir / "tokenizer.json");
//   std::vector<int32_t> ids = tokenizer.encode(render_chat(ChatFormat::dream, messages, true));
//   std::string text = tokenizer.decode(ids, /*skip_special_tokens=*/true);
//
// encode: added/special tokens are found in the text first (so "<|im_end|>" in a prompt is one
// token), then normalizer -> pre-tokenizer -> BPE on the rest; add_special_tokens applies the
// post-processor's template (e.g. a BOS). Text whose special-token text must stay plain (what a
// user typed: "<|mdm_mask|>" there is twelve characters, not the mask token) is a piece with
// SpecialText::plain: special tokens are not looked for in it (Hugging Face's
// split_special_tokens; plain added tokens still match). Pieces are joined before the
// normalizer and BPE run, so a plain piece encodes as it would inside the whole text. decode: token strings through the decoder; ids that
// are not in the vocabulary are skipped, as Hugging Face does.
//
// A Tokenizer is immutable and cheap to copy (copies share their tables); encode and decode may
// be called from several threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mosaic {

namespace tokenizer {
struct Pipeline;
}

class Tokenizer {
 public:
  enum class SpecialText { parse, plain };
  struct TextPiece {
    std::string_view text;
    SpecialText special = SpecialText::parse;
  };

  // Throws mosaic::Error naming the file and field for a missing or malformed file, a model
  // other than BPE (WordPiece, Unigram, ...) and any unsupported component.
  static Tokenizer load(const std::filesystem::path& tokenizer_json);
  // The same from JSON text already in memory; `origin` names it in error messages.
  static Tokenizer from_json_text(std::string_view json_text, std::string_view origin);

  // Throws mosaic::Error when `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  std::vector<int32_t> encode(std::string_view text, SpecialText special, bool add_special_tokens = false) const;
  // The pieces' text in order, each read as its `special` says.
  std::vector<int32_t> encode(std::span<const TextPiece> pieces, bool add_special_tokens = false) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The id of a token string (added tokens first, then the BPE vocabulary), e.g. "<|mdm_mask|>".
  std::optional<int32_t> token_id(std::string_view token) const;
  // The string of a token id, as the vocabulary spells it ("Ġworld" for " world").
  // Throws mosaic::Error for an id outside the vocabulary.
  std::string_view token_text(int32_t id) const;
  // One more than the largest token id: the number of rows an embedding needs at least.
  int64_t vocab_size() const;

 private:
  explicit Tokenizer(std::shared_ptr<const tokenizer::Pipeline> pipeline);
  std::shared_ptr<const tokenizer::Pipeline> pipeline_;
};

}  // namespace mosaic
