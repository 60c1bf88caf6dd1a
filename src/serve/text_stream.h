// What a streaming client receives: as the leftmost positions of the generated region become
// unmasked, the answer's committed prefix grows, and each update yields the text added since the
// last one. The deltas concatenate to the final answer exactly: a prefix cut inside a multi-byte
// character decodes to one trailing U+FFFD, which is held back until the next update.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace mosaic::serve {

class CommittedTextStream {
 public:
  using Decode = std::function<std::string(std::span<const int32_t>)>;

  // `end_ids`: tokens that end the answer (EOS, end of turn); -1 entries are ignored.
  CommittedTextStream(int32_t mask_id, std::vector<int64_t> end_ids, Decode decode);

  // The text newly committed at the left of `output_ids` (the generated region); "" if none.
  std::string update(std::span<const int32_t> output_ids);
  // The rest of `final_text` (the request's whole answer) after what was sent.
  std::string finish(const std::string& final_text);

  const std::string& sent() const { return sent_; }

 private:
  int32_t mask_id_;
  std::vector<int64_t> end_ids_;
  Decode decode_;
  size_t prefix_tokens_ = 0;  // committed tokens decoded so far
  std::string sent_;
};

}  // namespace mosaic::serve
