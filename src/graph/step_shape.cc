#include "graph/step_shape.h"

#include <fmt/format.h>

#include <numeric>

namespace mosaic {

int64_t StepShape::tokens() const { return std::accumulate(lengths.begin(), lengths.end(), int64_t{0}); }

int64_t StepShape::total_candidates() const {
  return std::accumulate(candidates.begin(), candidates.end(), int64_t{0});
}

std::string ChunkConfig::to_string() const {
  return fmt::format("qkv={} attention={} ffn={} head={}", qkv, attention, ffn, head);
}

}  // namespace mosaic
