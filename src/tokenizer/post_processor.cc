#include "tokenizer/post_processor.h"

namespace mosaic::tokenizer {

PostProcessor PostProcessor::from_json(const JsonNode& node) {
  PostProcessor processor;
  if (!node.is_null()) processor.append(node);
  return processor;
}

void PostProcessor::append(const JsonNode& node) {
  node.expect_object();
  const std::string_view type = node["type"].as_string();
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    const JsonNode processors = node["processors"];
    for (size_t i = 0; i < processors.array_size(); ++i) append(processors[i]);
    return;
  }
  if (type != "TemplateProcessing") {
    node["type"].fail(
        "unsupported post-processor \"{}\" (supported: TemplateProcessing, "
        "ByteLevel, Sequence)",
        type);
  }
  // A later template wraps what earlier processors produced.
  std::vector<int32_t> prefix, suffix;
  bool seen_sequence = false;
  const JsonNode single = node["single"];
  const JsonNode special_tokens = node["special_tokens"];
  for (size_t i = 0; i < single.array_size(); ++i) {
    const JsonNode item = single[i];
    item.expect_object();
    if (!item["Sequence"].is_null()) {
      const std::string_view which = item["Sequence"]["id"].as_string();
      if (which != "A" || seen_sequence) {
        item.fail("a single-sequence template holds the sequence A exactly once");
      }
      seen_sequence = true;
      continue;
    }
    const JsonNode name = item["SpecialToken"]["id"];
    const std::string_view token = name.as_string();
    const JsonNode ids = special_tokens[token]["ids"];
    if (ids.is_null()) name.fail("\"{}\" has no entry in special_tokens", token);
    for (size_t k = 0; k < ids.array_size(); ++k) {
      const int64_t id = ids[k].as_int();
      if (id < 0 || id > INT32_MAX) ids[k].fail("token id {} is out of range", id);
      (seen_sequence ? suffix : prefix).push_back(static_cast<int32_t>(id));
    }
  }
  if (!seen_sequence) single.fail("the single-sequence template has no sequence A");
  prefix.insert(prefix.end(), prefix_.begin(), prefix_.end());
  suffix_.insert(suffix_.end(), suffix.begin(), suffix.end());
  prefix_ = std::move(prefix);
}

void PostProcessor::apply(std::vector<int32_t>& ids) const {
  ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
  ids.insert(ids.end(), suffix_.begin(), suffix_.end());
}

}  // namespace mosaic::tokenizer
