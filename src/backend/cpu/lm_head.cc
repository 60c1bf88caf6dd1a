#include "backend/cpu/lm_head.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/gemm.h"

namespace mosaic::cpu {
namespace {

// Running statistics of one row; sums in double, rescaled when the maximum moves
// (the online softmax of Milakov & Gimelshein).
struct RowStats {
  float max = -std::numeric_limits<float>::infinity();
  int64_t argmax = -1;
  float second = -std::numeric_limits<float>::infinity();
  int64_t second_id = -1;
  double sum_exp = 0;         // sum exp(l - max)
  double sum_exp_logit = 0;   // sum exp(l - max) * l

  void fold(const float* logits, int64_t first_id, int64_t count) {
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < count; ++i) tile_max = std::max(tile_max, logits[i]);
    if (tile_max > max) {
      const double scale = std::exp(double(max) - double(tile_max));  // 0 on the first tile
      sum_exp *= scale;
      sum_exp_logit *= scale;
    }
    const float reference = std::max(max, tile_max);
    for (int64_t i = 0; i < count; ++i) {
      const float l = logits[i];
      const double e = std::exp(double(l) - double(reference));
      sum_exp += e;
      sum_exp_logit += e * double(l);
      const int64_t id = first_id + i;
      if (l > max) {  // strictly greater: earlier ids win ties
        second = max, second_id = argmax;
        max = l, argmax = id;
      } else if (l > second) {
        second = l, second_id = id;
      }
    }
  }
};

}  // namespace

void lm_head_stats(int64_t rows, int64_t hidden, const float* h, int64_t h_stride,
                   const void* weight, DType weight_dtype, int64_t vocab, float* stats,
                   int64_t stats_stride) {
  constexpr int64_t kRowBlock = 128;  // bounds the tile scratch to 1 MiB
  const int64_t tile = std::min(kLmHeadVocabTile, vocab);
  std::vector<float> scratch(static_cast<size_t>(std::min(rows, kRowBlock) * tile));
  const size_t weight_row_bytes = static_cast<size_t>(hidden) * dtype_size(weight_dtype);
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t block = std::min(kRowBlock, rows - r0);
    std::vector<RowStats> running(static_cast<size_t>(block));
    for (int64_t v0 = 0; v0 < vocab; v0 += kLmHeadVocabTile) {
      const int64_t width = std::min(kLmHeadVocabTile, vocab - v0);
      GemmArgs args;
      args.m = block, args.n = width, args.k = hidden;
      args.a = h + r0 * h_stride, args.lda = h_stride;
      args.b = static_cast<const std::byte*>(weight) + static_cast<size_t>(v0) * weight_row_bytes;
      args.b_dtype = weight_dtype, args.ldb = hidden;
      args.c = scratch.data(), args.ldc = width;
      gemm_nt(args);
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < block; ++r) running[r].fold(scratch.data() + r * width, v0, width);
    }
    for (int64_t r = 0; r < block; ++r) {
      const RowStats& s = running[r];
      float* out = stats + (r0 + r) * stats_stride;
      out[0] = s.max;
      out[1] = static_cast<float>(s.argmax);
      out[2] = static_cast<float>(double(s.max) + std::log(s.sum_exp));
      out[3] = static_cast<float>(s.sum_exp_logit / s.sum_exp);
      out[4] = s.second;
      out[5] = static_cast<float>(s.second_id);
    }
  }
}

}  // namespace mosaic::cpu
