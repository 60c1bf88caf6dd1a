// The parts of a tokenizer.json, assembled and indexed: what a Tokenizer shares between copies.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/json_node.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace mosaic::tokenizer {

struct Pipeline {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  PostProcessor post_processor;
  Decoder decoder;

  std::vector<AddedToken> added_tokens;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized=false
  AddedTokenMatcher normalized_matcher;  // added tokens with normalized=true
  // The same without the special tokens: for text whose special-token text is plain
  // (Tokenizer::SpecialText::plain, Hugging Face's split_special_tokens).
  AddedTokenMatcher raw_plain_matcher;
  AddedTokenMatcher normalized_plain_matcher;
  StringMap<int32_t> added_token_ids;    // content -> id

  // Indexed by id: the token's string (empty for ids no token has) and whether
  // decode(skip_special_tokens=true) leaves it out. The strings are views of `model`'s
  // vocabulary and of `added_tokens`, which never change after loading.
  std::vector<std::string_view> token_of_id;
  std::vector<bool> is_special_id;
};

// Builds the pipeline from a parsed tokenizer.json; `root.origin()` names the file in errors.
std::shared_ptr<const Pipeline> build_pipeline(const JsonNode& root);

}  // namespace mosaic::tokenizer
