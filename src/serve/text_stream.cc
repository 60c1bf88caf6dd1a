#include "serve/text_stream.h"

#include <algorithm>
#include <string_view>

namespace mosaic::serve {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

CommittedTextStream::CommittedTextStream(int32_t mask_id, std::vector<int64_t> end_ids, Decode decode)
    : mask_id_(mask_id), end_ids_(std::move(end_ids)), decode_(std::move(decode)) {}

std::string CommittedTextStream::update(std::span<const int32_t> output_ids) {
  size_t prefix = 0;
  while (prefix < output_ids.size() && output_ids[prefix] != mask_id_ &&
         std::find(end_ids_.begin(), end_ids_.end(), output_ids[prefix]) == end_ids_.end())
    ++prefix;
  if (prefix <= prefix_tokens_) return {};
  prefix_tokens_ = prefix;
  std::string text = decode_(output_ids.first(prefix));
  // A cut inside a character is one maximal ill-formed subpart: exactly the last U+FFFD may still
  // change; any before it are final (bytes that are no UTF-8 at all).
  if (std::string_view(text).ends_with(kReplacement)) text.resize(text.size() - kReplacement.size());
  if (text.size() <= sent_.size() || !std::string_view(text).starts_with(sent_)) return {};
  std::string delta = text.substr(sent_.size());
  sent_ = std::move(text);
  return delta;
}

std::string CommittedTextStream::finish(const std::string& final_text) {
  if (final_text.size() <= sent_.size() || !std::string_view(final_text).starts_with(sent_)) return {};
  std::string delta = final_text.substr(sent_.size());
  sent_ = final_text;
  return delta;
}

}  // namespace mosaic::serve
