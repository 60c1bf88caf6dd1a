#include "backend/cpu/lm_head.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/philox.h"

namespace mosaic::cpu {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Running state of one row; sums in double, rescaled when the maximum moves (online softmax).
struct RowState {
  // choice
  double best_score = kNegInf;
  int64_t chosen = -1;
  float chosen_logit = 0;
  // statistics over s = l * stats_scale
  double max = kNegInf;
  int64_t argmax = -1;
  double second = kNegInf;
  int64_t second_id = -1;
  double sum_exp = 0;        // sum exp(s - max)
  double sum_exp_s = 0;      // sum exp(s - max) * s

  void fold(const float* logits, int64_t first_id, int64_t count, const HeadRowSampling& how) {
    const bool noisy = how.choice_inv_temperature > 0;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t id = first_id + i;
      const float l = logits[i];
      if (!how.choice_banned(id)) {
        const double score =
            noisy ? double(l) * how.choice_inv_temperature +
                        rng_gumbel(how.seed, RngStream::gumbel_token, static_cast<uint32_t>(id),
                                   how.position, how.step)
                  : double(l);
        if (score > best_score) best_score = score, chosen = id, chosen_logit = l;
      }
      if (how.stats_banned(id)) continue;
      const double s = double(l) * how.stats_scale;
      if (s > max) {
        const double scale = std::exp(max - s);  // 0 while max is -inf
        sum_exp = sum_exp * scale + 1.0;
        sum_exp_s = sum_exp_s * scale + s;
        second = max, second_id = argmax;
        max = s, argmax = id;
      } else {
        const double e = std::exp(s - max);
        sum_exp += e;
        sum_exp_s += e * s;
        if (s > second) second = s, second_id = id;
      }
    }
  }

  void write(float* out, const HeadRowSampling& how, bool share) const {
    out[0] = static_cast<float>(chosen);
    out[1] = static_cast<float>(double(chosen_logit) * how.stats_scale);
    out[2] = static_cast<float>(max);
    out[3] = static_cast<float>(argmax);
    out[4] = static_cast<float>(max + std::log(sum_exp));
    out[5] = static_cast<float>(sum_exp_s / sum_exp);
    out[6] = static_cast<float>(second);
    out[7] = static_cast<float>(second_id);
    if (share) out[kHeadChosenScore] = static_cast<float>(best_score);
  }
};

void sample_vocabulary(int64_t rows, int64_t hidden, const float* h, int64_t h_stride, const void* weight,
                       DType weight_dtype, int64_t vocab_begin, int64_t vocab, const HeadRowSampling* sampling,
                       float* out, int64_t out_stride, bool share) {
  constexpr int64_t kRowBlock = 128;  // bounds the tile scratch to 1 MiB
  const int64_t tile = std::min(kLmHeadVocabTile, vocab);
  std::vector<float> scratch(static_cast<size_t>(std::min(rows, kRowBlock) * tile));
  const size_t weight_row_bytes = static_cast<size_t>(hidden) * dtype_size(weight_dtype);
  const HeadRowSampling greedy;
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t block = std::min(kRowBlock, rows - r0);
    std::vector<RowState> running(static_cast<size_t>(block));
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
      for (int64_t r = 0; r < block; ++r)
        running[r].fold(scratch.data() + r * width, vocab_begin + v0, width, sampling ? sampling[r0 + r] : greedy);
    }
    for (int64_t r = 0; r < block; ++r)
      running[r].write(out + (r0 + r) * out_stride, sampling ? sampling[r0 + r] : greedy, share);
  }
}

}  // namespace

void lm_head_sample(int64_t rows, int64_t hidden, const float* h, int64_t h_stride,
                    const void* weight, DType weight_dtype, int64_t vocab,
                    const HeadRowSampling* sampling, float* out, int64_t out_stride) {
  sample_vocabulary(rows, hidden, h, h_stride, weight, weight_dtype, 0, vocab, sampling, out, out_stride, false);
}

void lm_head_sample_share(int64_t rows, int64_t hidden, const float* h, int64_t h_stride,
                          const void* weight, DType weight_dtype, int64_t vocab_begin, int64_t vocab,
                          const HeadRowSampling* sampling, float* out, int64_t out_stride) {
  sample_vocabulary(rows, hidden, h, h_stride, weight, weight_dtype, vocab_begin, vocab, sampling, out, out_stride,
                    true);
}

}  // namespace mosaic::cpu
