// Bidirectional (non-causal) scaled dot-product attention with grouped-query heads over packed
// variable-length sequences, fp32. Query head h reads kv head h / (q_heads / kv_heads).
//
// Each segment names a run of query rows and the run of key/value rows they attend to, so the
// same kernel serves whole sequences, query-block chunks of a sequence, and candidate-only rows.
// No segment's queries see another segment's keys.
#pragma once

#include <cstdint>
#include <span>

#include "core/attention_segment.h"

namespace mosaic::cpu {

using mosaic::AttentionSegment;

struct AttentionArgs {
  const float* q = nullptr;  int64_t q_stride = 0;    // [rows, q_heads, head_dim]
  const float* k = nullptr;  int64_t k_stride = 0;    // [rows, kv_heads, head_dim]
  const float* v = nullptr;  int64_t v_stride = 0;    // [rows, kv_heads, head_dim]
  float* out = nullptr;      int64_t out_stride = 0;  // [rows, q_heads, head_dim]
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0;                                    // usually 1 / sqrt(head_dim)
  std::span<const AttentionSegment> segments;
  // Paged segments (AttentionSegment::kv_pages >= 0) find their keys' rows of k and v through
  // this page table, pages of page_rows positions (a KV cache: docs/design/kv-cache.md).
  const int32_t* kv_pages = nullptr;
  int64_t page_rows = 0;
};

// out = softmax(scale * q k^T) v per segment and head. Each output row is computed with the same
// operations whatever the segment's q_begin/q_count split (query chunking is bit-exact).
// Scratch, allocated per call and per OpenMP thread: (64..256 + head_dim) x max kv_count floats
// (about 24 MiB per thread at 32k keys and head_dim 128), and as much again for a paged
// segment's keys, which are gathered into one block first (the same values, so the same bits as
// keys read in place).
void attention(const AttentionArgs& args);

}  // namespace mosaic::cpu
