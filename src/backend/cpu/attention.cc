// Bidirectional GQA attention over packed segments, built on gemm_nt.
//
// Work is split into tasks (segment, q head, block of query rows), run in parallel.
// For one task, with g = kv head of h, n = kv_count, d = head_dim, r = rows in the block:
//   1. scores [r, n] = Q_h[rows] K_g^T            gemm_nt, K = d
//   2. probs  [r, n] = softmax(scale * scores)    per row, fixed order (softmax_row)
//   3. out_h  [r, d] = probs V_g                  gemm_nt against V_g^T [d, n], K = n
// Every step computes a query row from that row and the segment's keys and values alone, with
// operations that do not depend on r or on the block's position (the gemm_nt contract), so
// splitting a sequence's queries into segments or blocks never changes an output bit.
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/error.h"

namespace mosaic::cpu {
namespace {

// Query rows per task: more rows amortise packing K and V^T (gemm_nt packs B on every call) over
// more work; fewer keep a task's scores [rows, kv_count] in cache. 256 rows up to 1k keys, then
// fewer, but at least 64 (scores of 8 MiB at 32k keys).
int64_t query_block_rows(int64_t max_kv) {
  return std::clamp<int64_t>((int64_t{1} << 18) / std::max<int64_t>(max_kv, 1), 64, 256);
}

struct AttentionTask {
  int64_t segment, q_head, q_begin, q_count;
};

// x[j] <- softmax(scale * x)[j]. Max first (safe exponent), exponentials in fp32, their sum in
// double in increasing j, one reciprocal rounded to float.
void softmax_row(float* x, int64_t count, float scale) {
  float max_logit = -INFINITY;
  for (int64_t j = 0; j < count; ++j) {
    x[j] = x[j] * scale;
    max_logit = std::max(max_logit, x[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < count; ++j) {
    x[j] = std::exp(x[j] - max_logit);
    sum += x[j];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < count; ++j) x[j] = x[j] * inv_sum;
}

void validate(const AttentionArgs& args) {
  MOSAIC_ASSERT(args.q_heads > 0 && args.kv_heads > 0 && args.q_heads % args.kv_heads == 0,
                "attention: q_heads={} kv_heads={}", args.q_heads, args.kv_heads);
  MOSAIC_ASSERT(args.head_dim > 0, "attention: head_dim={}", args.head_dim);
  MOSAIC_ASSERT(args.q_stride >= args.q_heads * args.head_dim &&
                    args.out_stride >= args.q_heads * args.head_dim &&
                    args.k_stride >= args.kv_heads * args.head_dim &&
                    args.v_stride >= args.kv_heads * args.head_dim,
                "attention: strides q={} k={} v={} out={} too small for heads {}/{} x {}",
                args.q_stride, args.k_stride, args.v_stride, args.out_stride, args.q_heads,
                args.kv_heads, args.head_dim);
  for (const AttentionSegment& s : args.segments) {
    MOSAIC_ASSERT(s.q_begin >= 0 && s.q_count >= 0 && s.kv_begin >= 0 && s.kv_count >= 0,
                  "attention: segment q [{}, +{}) kv [{}, +{})", s.q_begin, s.q_count, s.kv_begin,
                  s.kv_count);
    MOSAIC_ASSERT(s.q_count == 0 || s.kv_count > 0, "attention: queries with no keys");
    MOSAIC_ASSERT(!s.paged() || (args.kv_pages != nullptr && args.page_rows > 0 && s.kv_begin % args.page_rows == 0),
                  "attention: a paged segment needs the page table and starts at a page (kv_begin {})", s.kv_begin);
  }
}

}  // namespace

void attention(const AttentionArgs& args) {
  validate(args);
  const int64_t d = args.head_dim, group = args.q_heads / args.kv_heads;

  int64_t max_kv = 0;
  bool any_paged = false;
  for (const AttentionSegment& seg : args.segments) {
    if (seg.q_count > 0) max_kv = std::max(max_kv, seg.kv_count);
    any_paged = any_paged || (seg.paged() && seg.q_count > 0);
  }
  const int64_t block_rows = query_block_rows(max_kv);

  std::vector<AttentionTask> tasks;
  for (int64_t s = 0; s < static_cast<int64_t>(args.segments.size()); ++s) {
    const AttentionSegment& seg = args.segments[s];
    for (int64_t h = 0; h < args.q_heads; ++h) {
      for (int64_t row = 0; row < seg.q_count; row += block_rows) {
        tasks.push_back({s, h, seg.q_begin + row, std::min(block_rows, seg.q_count - row)});
      }
    }
  }
  if (tasks.empty()) return;
  const int64_t task_count = static_cast<int64_t>(tasks.size());

#pragma omp parallel if (task_count > 1)
  {
    // Per-thread scratch, freed on return: scores [block_rows, max_kv], V_g^T [d, max_kv].
    const auto scores = std::make_unique_for_overwrite<float[]>(block_rows * max_kv);
    const auto v_transposed = std::make_unique_for_overwrite<float[]>(d * max_kv);
    // A paged segment's keys of one kv head, gathered into [kv_count, d].
    const auto k_gathered = std::make_unique_for_overwrite<float[]>(any_paged ? d * max_kv : 0);
    int64_t transposed_segment = -1, transposed_kv_head = -1;

    // Dynamic: tasks differ in cost (segment lengths); the schedule cannot change the bits.
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < task_count; ++t) {
      const AttentionTask& task = tasks[t];
      const AttentionSegment& seg = args.segments[task.segment];
      const int64_t kv_head = task.q_head / group, n = seg.kv_count;
      // Row j of the segment's keys (of this kv head) in K and V.
      auto key_row = [&](int64_t j) {
        return seg.paged() ? paged_key_row(args.kv_pages, args.page_rows, seg, seg.kv_begin + j) : seg.kv_begin + j;
      };
      const bool fresh = task.segment != transposed_segment || kv_head != transposed_kv_head;
      const float* k_head = args.k + seg.kv_begin * args.k_stride + kv_head * d;
      int64_t k_stride = args.k_stride;
      if (seg.paged()) {
        if (fresh)
          for (int64_t j = 0; j < n; ++j)
            std::copy_n(args.k + key_row(j) * args.k_stride + kv_head * d, d, k_gathered.get() + j * d);
        k_head = k_gathered.get(), k_stride = d;
      }

      GemmArgs qk;
      qk.m = task.q_count, qk.n = n, qk.k = d;
      qk.a = args.q + task.q_begin * args.q_stride + task.q_head * d, qk.lda = args.q_stride;
      qk.b = k_head, qk.b_dtype = DType::f32, qk.ldb = k_stride;
      qk.c = scores.get(), qk.ldc = n;
      gemm_nt(qk);

      for (int64_t i = 0; i < task.q_count; ++i) softmax_row(scores.get() + i * n, n, args.scale);

      if (fresh) {
        for (int64_t j = 0; j < n; ++j) {
          const float* v_row = args.v + key_row(j) * args.v_stride + kv_head * d;
          for (int64_t c = 0; c < d; ++c) v_transposed[c * n + j] = v_row[c];
        }
        transposed_segment = task.segment, transposed_kv_head = kv_head;
      }

      GemmArgs pv;
      pv.m = task.q_count, pv.n = d, pv.k = n;
      pv.a = scores.get(), pv.lda = n;
      pv.b = v_transposed.get(), pv.b_dtype = DType::f32, pv.ldb = n;
      pv.c = args.out + task.q_begin * args.out_stride + task.q_head * d, pv.ldc = args.out_stride;
      gemm_nt(pv);
    }
  }
}

}  // namespace mosaic::cpu
