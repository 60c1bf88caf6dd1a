// One run of query rows and the run of key/value rows they attend to. Packed batches, query
// chunks, candidate-only rows and block-causal key ranges are all lists of these; graph and
// kernels share the type.
#pragma once

#include <cstdint>

namespace mosaic {

struct AttentionSegment {
  int64_t q_begin = 0, q_count = 0;    // rows of q / out
  int64_t kv_begin = 0, kv_count = 0;  // rows of k / v, or with kv_pages the key positions
  // -1: the keys are rows [kv_begin, kv_begin + kv_count) of K and V. Otherwise they live in a
  // paged KV cache (docs/design/kv-cache.md): key position p (kv_begin <= p < kv_begin + kv_count,
  // kv_begin a multiple of the page size) is row pages[kv_pages + p / page_rows] * page_rows +
  // p % page_rows of K and V, `pages` the page table the attention op is given.
  int64_t kv_pages = -1;
  // 0: the keys are walked in one pass per query tile. k >= 2: a few query rows against a KV
  // cache, whose keys a GPU reads in k parts at once and merges (attention_key_splits below); the
  // CPU's arithmetic does not depend on it.
  int64_t key_splits = 0;

  bool paged() const { return kv_pages >= 0; }
};

// Few query rows against many cached keys — a cached step's block against its context — give one
// query tile per head: on a GPU, a few dozen CTAs for the whole step. Such segments read their
// keys in parts, each part on its own CTA, merged afterwards (docs/design/split-keys-attention.md).
// The parts change a row's rounding, so whether a segment is split, and into how many parts,
// depends only on what chunking and batching cannot change: the rows its sequence computes in the
// step and its key count. A part holds at least kKeysPerSplit keys: measured on the H200, parts
// of 1,024 keys gained nothing at 4,096 keys in the engine's step, cost 50 % at 96 rows against
// 2,048 keys, and 16 % in batches of 16 such sequences (whose parts run in turn, on the portable
// arithmetic, where one pass takes the Hopper kernel); contexts under 8,192 keys are not split.
inline constexpr int64_t kKeySplitMaxSequenceRows = 256;  // a sequence computing more is not split
inline constexpr int64_t kKeysPerSplit = 4096;
inline constexpr int64_t kMaxKeySplits = 8;  // one cluster of CTAs on Hopper

// The parts of a paged segment whose sequence computes `sequence_rows` rows this step, against
// `keys` keys: 0 (not split) or 2 .. kMaxKeySplits.
inline int64_t attention_key_splits(bool paged, int64_t sequence_rows, int64_t keys) {
  if (!paged || sequence_rows > kKeySplitMaxSequenceRows || keys < 2 * kKeysPerSplit) return 0;
  const int64_t parts = keys / kKeysPerSplit;
  return parts > kMaxKeySplits ? kMaxKeySplits : parts;
}

// Where a paged key position lives: its row in the cache's K and V.
inline int64_t paged_key_row(const int32_t* pages, int64_t page_rows, const AttentionSegment& s, int64_t p) {
  return int64_t{pages[s.kv_pages + p / page_rows]} * page_rows + p % page_rows;
}

}  // namespace mosaic
