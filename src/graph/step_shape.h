// What a step graph is instantiated for: the batch's shape, how ops are chunked, and which
// dtypes and LM head the backend uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/block_attention.h"
#include "core/dtype.h"
#include "core/head_sampling.h"
#include "core/step_limits.h"

namespace mosaic {

// One sequence of a cached step (docs/design/kv-cache.md): its computed rows are the canvas
// positions [begin, begin + StepShape::lengths[i]); their queries read their keys from the
// sequence's cache pages, which hold the K/V of positions [0, keys) (the step writes its own rows'
// first).
struct CachedSequence {
  int64_t begin = 0;
  int64_t keys = 0;            // the canvas length: the keys of full attention
  std::vector<int32_t> pages;  // cache pages of positions [0, keys): page j holds [j P, (j + 1) P)
};

// A batch of packed sequences: lengths[i] rows of sequence i are computed, candidates[i] of them
// are rows whose prediction is wanted (e.g. the masked positions of the active block).
struct StepShape {
  std::vector<int64_t> lengths;
  std::vector<int64_t> candidates;
  // Per sequence, how its queries see keys (empty: full attention for every sequence). A
  // block-causal layout gives each query the key range of its block (core/block_attention.h).
  std::vector<BlockLayout> layouts;
  // Per candidate row in batch order, the canvas position of the hidden row it reads; needed only
  // with block-causal layouts (the last layer's candidate queries take their rows' key ranges).
  std::vector<int64_t> candidate_positions;
  // A cached step: per sequence, its cache view, and the positions one cache page holds (P).
  // Empty: a full step, whose keys are its own rows (every position of each canvas).
  std::vector<CachedSequence> cached;
  int64_t page_rows = 0;

  int64_t tokens() const;
  int64_t total_candidates() const;
  bool is_cached() const { return !cached.empty(); }
  bool block_causal() const;
  // The canvas position of sequence i's first computed row (0 in a full step).
  int64_t first_position(size_t i) const { return cached.empty() ? 0 : cached[i].begin; }
};

// The most chunks a group may be split into (lazy chunking stops there; a chunk holds >= 1 row).
inline constexpr int64_t kMaxChunksPerGroup = 4096;

// The groups of ops that can be chunked by rows, each with its own count.
enum class ChunkGroup : uint8_t {
  qkv,        // K/V pass: norm + K and V projections over row blocks (K, V stay full length)
  attention,  // query pass: norm + Q projection, attention, output projection, residual add
  ffn,        // norm + gate/up, SwiGLU, down projection, residual add
  head,       // final norm + LM head over candidate-row blocks
  none,       // not chunkable (the embedding)
};
inline constexpr int kChunkGroups = 4;
std::string_view chunk_group_name(ChunkGroup group);

// Chunk counts per chunkable op group; 1 = unchunked (the default: chunking costs latency).
struct ChunkConfig {
  int64_t qkv = 1;        // rows of the K/V projections (only K and V are full length)
  int64_t attention = 1;  // query blocks: Q projection, attention, output projection
  int64_t ffn = 1;        // rows of the MLP
  int64_t head = 1;       // candidate rows of the LM head
  // The last layer over every row even where GraphOptions::last_layer_candidates_only is on: the
  // candidates' gathered residual rows (M x hidden) are live beside x, K and V at the gather, so a
  // step at the memory floor may fit only without it (chunk_search.h).
  bool last_layer_all_rows = false;
  // The residual stream x in pinned host memory, its rows staged into the arena for each chunk's
  // ops and copied back after (graph/residual_staging.h): the same results, without x's T rows on
  // the device. Chosen by the chunk search only where the step cannot fit otherwise.
  bool residual_in_host = false;

  int64_t& count(ChunkGroup group);
  int64_t count(ChunkGroup group) const;
  int64_t extra_chunks() const { return qkv + attention + ffn + head - 4; }
  bool operator==(const ChunkConfig&) const = default;
  std::string to_string() const;  // "qkv=1 attention=4 ffn=8 head=1"
};

enum class HeadMode : uint8_t {
  logits,  // materialise fp32 logits [candidates, vocab] (mosaic forward)
  stats,   // fused: per-row statistics over vocabulary tiles, logits never stored (generation)
};

struct GraphOptions {
  DType activations = DType::f32;  // f32 on the CPU reference, bf16 on CUDA
  HeadMode head = HeadMode::logits;
  uint64_t head_scratch_per_row = 0;  // bytes the backend's fused head needs per candidate row
  // The last layer computes its queries, attention output and FFN only for the candidate rows
  // (the only rows the head reads); its keys and values still cover every row. Off: every row
  // goes through the whole stack (for comparisons; the results are the same bits).
  bool last_layer_candidates_only = true;
  // Decoder layers whose product weights live in host memory and are staged into the arena one
  // layer ahead of use (graph/weight_staging.h), each element `staged_weight_bytes` wide (the
  // backend's weight dtype). Empty: every weight resident.
  std::vector<int32_t> streamed_layers;
  size_t staged_weight_bytes = 2;
  // Tensor parallelism over this many ranks (graph/tensor_parallel.h): the graph is one rank's, its
  // widths the shard's (model/tensor_parallel.h), with the collectives that join the ranks. 1: none.
  int64_t tensor_parallel = 1;
  // Context parallelism over this many ranks (graph/context_parallel.h): the graph is rank
  // `context_rank`'s, over its rows of the packed batch, against every rank's keys and values. The
  // shape's candidates are then the rank's own (those whose rows it holds). 1: none.
  int64_t context_parallel = 1;
  int64_t context_rank = 0;
};

// Whether a step graph built with these options and chunks runs its last layer over the candidate
// rows only (the graph template and the reports of a step ask the same question).
inline bool last_layer_over_candidates(const GraphOptions& options, const ChunkConfig& chunks) {
  return options.last_layer_candidates_only && !chunks.last_layer_all_rows;
}

// Per candidate row, the fused head writes this many fp32 values (core/head_sampling.h lists
// them: chosen token and its logit, max and argmax, log-sum-exp, sum p*logit, runner-up).
inline constexpr int64_t kHeadStatsCols = kHeadStatCount;

}  // namespace mosaic
