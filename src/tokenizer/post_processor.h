// The post-processor of a Hugging Face tokenizer, reduced to what encode(add_special_tokens=true)
// does to one sequence: put fixed token ids before and after it. Supported:
//   TemplateProcessing  the "single" template, e.g. [<|begin_of_text|>, $A]
//   ByteLevel           changes only offsets, which Mosaic does not produce: no ids
//   Sequence            the processors in order
// Pair templates are ignored: Mosaic encodes single sequences only.
#pragma once

#include <cstdint>
#include <vector>

#include "tokenizer/json_node.h"

namespace mosaic::tokenizer {

class PostProcessor {
 public:
  PostProcessor() = default;  // adds nothing

  static PostProcessor from_json(const JsonNode& node);

  // `ids` with the template's prefix before and suffix after.
  void apply(std::vector<int32_t>& ids) const;

 private:
  void append(const JsonNode& node);

  std::vector<int32_t> prefix_;
  std::vector<int32_t> suffix_;
};

}  // namespace mosaic::tokenizer
