#include "graph/step_shape.h"

#include <fmt/format.h>

#include <numeric>

#include "core/error.h"

namespace mosaic {

int64_t StepShape::tokens() const { return std::accumulate(lengths.begin(), lengths.end(), int64_t{0}); }

int64_t StepShape::total_candidates() const {
  return std::accumulate(candidates.begin(), candidates.end(), int64_t{0});
}

bool StepShape::block_causal() const {
  for (const BlockLayout& layout : layouts)
    if (layout.block_causal()) return true;
  return false;
}

std::string_view chunk_group_name(ChunkGroup group) {
  switch (group) {
    case ChunkGroup::qkv: return "qkv";
    case ChunkGroup::attention: return "attention";
    case ChunkGroup::ffn: return "ffn";
    case ChunkGroup::head: return "head";
    case ChunkGroup::none: return "none";
  }
  return "?";
}

int64_t& ChunkConfig::count(ChunkGroup group) {
  switch (group) {
    case ChunkGroup::qkv: return qkv;
    case ChunkGroup::attention: return attention;
    case ChunkGroup::ffn: return ffn;
    case ChunkGroup::head: return head;
    case ChunkGroup::none: break;
  }
  MOSAIC_ASSERT(false, "the embedding is not chunkable");
  std::abort();
}

int64_t ChunkConfig::count(ChunkGroup group) const { return const_cast<ChunkConfig*>(this)->count(group); }

std::string ChunkConfig::to_string() const {
  return fmt::format("qkv={} attention={} ffn={} head={}{}{}", qkv, attention, ffn, head,
                     last_layer_all_rows ? " last_layer=all_rows" : "", residual_in_host ? " residual=host" : "");
}

}  // namespace mosaic
