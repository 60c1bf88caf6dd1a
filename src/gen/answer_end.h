// Where a generated answer has ended for stop_at_eos (docs/design/sampling.md): the first end
// token (EOS, or end of turn when eot_id >= 0) of canvas[begin, end) with no mask before it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace mosaic {

inline std::optional<int64_t> answer_end(const std::vector<int32_t>& canvas, int64_t begin, int64_t end,
                                         int32_t mask, int64_t eos_id, int64_t eot_id) {
  for (int64_t p = begin; p < end; ++p) {
    const int32_t token = canvas[static_cast<size_t>(p)];
    if (token == mask) return std::nullopt;  // something before any end token is still open
    if (token == eos_id || (eot_id >= 0 && token == eot_id)) return p;
  }
  return std::nullopt;
}

}  // namespace mosaic
