// cuda::lm_head_sample against the CPU fused head on the same bf16 values, ties, and the
// bit-exactness of row chunking, for both paths: the fused kernel and the logits through
// cuBLASLt chunk by chunk. Skipped without a device.
//
// The GPU's logits are the CPU's up to fp32 summation order, so a token id may differ where the
// two best candidates are within rounding of each other. Such a difference is accepted when the
// two ids' exact scores (double dot products of the bf16 values) are within 1e-3 relative; every
// test counts and prints them, and they must stay rare.
#include "backend/cuda/lm_head.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/lm_head.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/test_device_buffer.h"
#include "backend/cuda/gemm.h"
#include "core/half.h"
#include "core/philox.h"

namespace mosaic::cuda {
namespace {

using testing_support::DeviceBuffer;
using testing_support::upload;

// The parameter: the logits through cuBLASLt (true) or the fused kernel (false).
class CudaLmHead : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// The GEMM a call on the cuBLASLt path uses (one per test process, as the executor has one).
Gemm* gemm_for(bool through_gemm) {
  if (!through_gemm) return nullptr;
  static Gemm gemm;
  return &gemm;
}

constexpr int64_t kStats = kHeadStatCount;

struct Problem {
  int64_t rows, hidden, vocab, h_stride;
  std::vector<uint16_t> h, w;  // bf16 [rows, h_stride], [vocab, hidden]
  std::vector<HeadRowSampling> how;  // empty: null sampling (greedy)

  Problem(int64_t rows_, int64_t hidden_, int64_t vocab_, uint32_t seed)
      : rows(rows_), hidden(hidden_), vocab(vocab_), h_stride(hidden_ + 8) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    h.assign(rows * h_stride, 0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < hidden; ++c) h[r * h_stride + c] = f32_to_bf16(normal(rng));
    }
    w.resize(vocab * hidden);
    for (uint16_t& x : w) x = f32_to_bf16(normal(rng) * 0.3f);
  }

  const HeadRowSampling* sampling() const { return how.empty() ? nullptr : how.data(); }

  // Rows [first, first + count) in one call; out is poisoned with NaN first.
  bool through_gemm = false;
  bool all_greedy = false;  // LmHeadArgs::all_greedy

  std::vector<float> run_gpu(int64_t first, int64_t count, int64_t out_stride = kStats) const {
    DeviceBuffer device_h(count * h_stride * 2), device_w(w.size() * 2),
        device_how(std::max<size_t>(how.size(), 1) * sizeof(HeadRowSampling)),
        device_out(count * out_stride * sizeof(float)),
        scratch(lm_head_scratch_bytes(count, vocab));
    upload(device_h, h.data() + first * h_stride, count * h_stride);
    upload(device_w, w.data(), w.size());
    if (!how.empty()) upload(device_how, how.data() + first, count);
    std::vector<float> out(count * out_stride, std::nanf(""));
    upload(device_out, out.data(), out.size());
    LmHeadArgs args;
    args.rows = count, args.hidden = hidden, args.vocab = vocab;
    args.h = device_h.data, args.h_stride = h_stride;
    args.weight = device_w.data;
    args.sampling = how.empty() ? nullptr : static_cast<const HeadRowSampling*>(device_how.data);
    args.out = static_cast<float*>(device_out.data), args.out_stride = out_stride;
    args.scratch = scratch.data;
    args.gemm = gemm_for(through_gemm);
    args.all_greedy = all_greedy;
    lm_head_sample(args, nullptr);
    MOSAIC_CUDA_CHECK(cudaGetLastError());
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    MOSAIC_CUDA_CHECK(cudaMemcpy(out.data(), device_out.data, out.size() * sizeof(float),
                                 cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<float> run_gpu() const { return run_gpu(0, rows); }

  std::vector<float> run_cpu() const {
    std::vector<float> wide(h.size());
    for (size_t i = 0; i < h.size(); ++i) wide[i] = bf16_to_f32(h[i]);
    std::vector<float> out(rows * kStats);
    cpu::lm_head_sample(rows, hidden, wide.data(), h_stride, w.data(), DType::bf16, vocab, sampling(),
                        out.data(), kStats);
    return out;
  }

  // The exact logit of (row, id) in double: products of bf16 values are exact.
  double logit(int64_t row, int64_t id) const {
    double sum = 0;
    for (int64_t c = 0; c < hidden; ++c) {
      sum += double(bf16_to_f32(h[row * h_stride + c])) * bf16_to_f32(w[id * hidden + c]);
    }
    return sum;
  }
  double choice_score(int64_t row, int64_t id) const {
    const HeadRowSampling rule = how.empty() ? HeadRowSampling{} : how[row];
    if (rule.choice_inv_temperature <= 0) return logit(row, id);
    return logit(row, id) * rule.choice_inv_temperature +
           rng_gumbel(rule.seed, RngStream::gumbel_token, uint32_t(id), rule.position, rule.step);
  }
};

bool near(double a, double b, double relative) {
  return std::abs(a - b) <= relative * std::max(1.0, std::max(std::abs(a), std::abs(b)));
}

struct NearTies {
  int chosen = 0, argmax = 0, second = 0;
};

// GPU row against CPU row (both kStats floats).
void expect_row(const Problem& p, int64_t r, const float* gpu, const float* cpu, NearTies& ties) {
  const HeadRowSampling rule = p.how.empty() ? HeadRowSampling{} : p.how[r];
  for (int64_t c = 0; c < kStats; ++c) ASSERT_FALSE(std::isnan(gpu[c])) << "row " << r << " stat " << c;
  const int64_t chosen = int64_t(gpu[kHeadChosen]), argmax = int64_t(gpu[kHeadArgmax]),
                second = int64_t(gpu[kHeadSecondId]);
  ASSERT_TRUE(chosen >= 0 && chosen < p.vocab) << "row " << r;
  EXPECT_FALSE(rule.choice_banned(chosen)) << "row " << r;
  EXPECT_FALSE(rule.stats_banned(argmax)) << "row " << r;
  EXPECT_FALSE(rule.stats_banned(second)) << "row " << r;
  EXPECT_NE(argmax, second) << "row " << r;

  // Ids: equal, or a near-tie of exact scores.
  if (chosen != int64_t(cpu[kHeadChosen])) {
    ++ties.chosen;
    EXPECT_TRUE(near(p.choice_score(r, chosen), p.choice_score(r, int64_t(cpu[kHeadChosen])), 1e-3))
        << "row " << r << " chose " << chosen << ", CPU " << cpu[kHeadChosen];
  } else {
    EXPECT_TRUE(near(gpu[kHeadChosenLogit], cpu[kHeadChosenLogit], 1e-3)) << "row " << r;
  }
  if (argmax != int64_t(cpu[kHeadArgmax])) {
    ++ties.argmax;
    EXPECT_TRUE(near(p.logit(r, argmax), p.logit(r, int64_t(cpu[kHeadArgmax])), 1e-3)) << "row " << r;
  }
  if (second != int64_t(cpu[kHeadSecondId])) {
    ++ties.second;
    EXPECT_TRUE(near(p.logit(r, second), p.logit(r, int64_t(cpu[kHeadSecondId])), 1e-3)) << "row " << r;
  }
  // Statistics within 1e-3 relative (absolute below 1).
  for (int64_t c : {kHeadMax, kHeadLogSumExp, kHeadMeanLogit, kHeadSecond}) {
    EXPECT_TRUE(near(gpu[c], cpu[c], 1e-3)) << "row " << r << " stat " << c << ": " << gpu[c]
                                            << " vs CPU " << cpu[c];
  }
}

void expect_close(const Problem& p, const std::vector<float>& gpu, const std::vector<float>& cpu) {
  NearTies ties;
  for (int64_t r = 0; r < p.rows; ++r) {
    expect_row(p, r, gpu.data() + r * kStats, cpu.data() + r * kStats, ties);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Reported, and bounded: near-ties of random logits are rare (a few per thousand rows at most).
  std::printf("  rows %lld hidden %lld vocab %lld: near-ties chosen %d argmax %d second %d\n",
              static_cast<long long>(p.rows), static_cast<long long>(p.hidden),
              static_cast<long long>(p.vocab), ties.chosen, ties.argmax, ties.second);
  EXPECT_LE(ties.chosen + ties.argmax + ties.second, std::max<int64_t>(2, p.rows / 50));
}

TEST_P(CudaLmHead, GreedyMatchesCpu) {
  struct Shape {
    int64_t rows, hidden;
  };
  // Row counts that pick each row tile (32, 64, 128) and leave ragged tiles; hidden sizes that
  // are and are not multiples of the 32-wide pipeline chunk; a ragged last vocabulary tile.
  for (Shape shape : {Shape{1, 64}, Shape{17, 136}, Shape{64, 512}, Shape{131, 200}, Shape{300, 64}}) {
    Problem p(shape.rows, shape.hidden, 5000, static_cast<uint32_t>(shape.rows + shape.hidden));
    p.through_gemm = GetParam();
    expect_close(p, p.run_gpu(), p.run_cpu());
  }
}

// Per-row sampling: greedy and Gumbel rows, temperatures, a stats scale, bans (the greedy winner
// banned from the choice, two ids from the statistics, one of them in the ragged last tile).
void fill_sampling(Problem& p, uint32_t salt) {
  p.how.resize(p.rows);
  for (int64_t r = 0; r < p.rows; ++r) {
    HeadRowSampling& how = p.how[r];
    how.seed = 1234567890123ull + r % 3 + salt;
    how.step = 5 + static_cast<uint32_t>(r);
    how.position = static_cast<uint32_t>(r * 7);
    how.choice_inv_temperature = r % 4 == 0 ? 0.0 : 1.0 / (0.3 + 0.2 * (r % 5));
    how.stats_scale = r % 2 ? 1.0 : 1.0 / 0.7;
    int64_t best = 0;
    double best_logit = -INFINITY;
    for (int64_t v = 0; v < p.vocab; ++v) {
      const double l = p.logit(r, v);
      if (l > best_logit) best_logit = l, best = v;
    }
    how.choice_bans[0] = int32_t(best);
    if (r % 3 == 0) how.choice_bans[1] = int32_t(p.vocab - 1);
    how.stats_bans[0] = 17;
    how.stats_bans[1] = int32_t(r % 2 ? 2048 + r : p.vocab - 2);
  }
}

TEST_P(CudaLmHead, GumbelTemperatureScaleAndBans) {
  Problem p(90, 96, 5000, 9);
  p.through_gemm = GetParam();
  fill_sampling(p, 0);
  expect_close(p, p.run_gpu(), p.run_cpu());
}

// 126464 ids (LLaDA's vocabulary): 988 tiles in 247 splits of 4 tiles.
TEST_P(CudaLmHead, LargeVocabularyManySplits) {
  Problem p(40, 128, 126464, 5);
  p.through_gemm = GetParam();
  fill_sampling(p, 7);
  expect_close(p, p.run_gpu(), p.run_cpu());
}

// Equal logits in one quad, across warp columns, tiles and splits: the lowest id wins the choice
// and the argmax, the next one is the runner-up.
TEST_P(CudaLmHead, TiesGoToTheLowestId) {
  const int64_t hidden = 64, vocab = 126464;
  Problem p(3, hidden, vocab, 1);
  p.through_gemm = GetParam();
  std::fill(p.h.begin(), p.h.end(), uint16_t{0});
  std::fill(p.w.begin(), p.w.end(), uint16_t{0});
  for (int64_t r = 0; r < p.rows; ++r) p.h[r * p.h_stride] = f32_to_bf16(1.0f);
  std::mt19937 rng(3);
  for (int64_t v = 0; v < vocab; ++v) p.w[v * hidden] = f32_to_bf16(float(rng() % 1000) / 1000.0f);
  // Ties in one lane (130, 131), one quad (133), warp columns (160), splits (5000...); the rows
  // share W, so every row sees them.
  const std::vector<int64_t> tied = {133, 131, 130, 160, 5000, 64000, 126463};
  for (int64_t v : tied) p.w[v * hidden] = f32_to_bf16(2.0f);
  p.how.resize(p.rows);
  p.how[1].stats_bans[0] = 130;    // the argmax moves to 131, the runner-up to 133
  p.how[2].choice_bans[0] = 130;   // the choice moves to 131
  p.how[2].stats_scale = 0.5;
  const std::vector<float> out = p.run_gpu();
  const std::vector<float> cpu = p.run_cpu();
  EXPECT_EQ(out[kHeadChosen], 130.0f);
  EXPECT_EQ(out[kHeadArgmax], 130.0f);
  EXPECT_EQ(out[kHeadSecondId], 131.0f);
  EXPECT_EQ(out[kStats + kHeadArgmax], 131.0f);
  EXPECT_EQ(out[kStats + kHeadSecondId], 133.0f);
  EXPECT_EQ(out[2 * kStats + kHeadChosen], 131.0f);
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t c : {kHeadChosen, kHeadArgmax, kHeadSecondId}) {
      EXPECT_EQ(out[r * kStats + c], cpu[r * kStats + c]) << "row " << r << " stat " << c;
    }
    // Logits are exact here (one non-zero product): the statistics match closely.
    for (int64_t c : {kHeadChosenLogit, kHeadMax, kHeadSecond}) {
      EXPECT_EQ(out[r * kStats + c], cpu[r * kStats + c]) << "row " << r << " stat " << c;
    }
    for (int64_t c : {kHeadLogSumExp, kHeadMeanLogit}) {
      EXPECT_NEAR(out[r * kStats + c], cpu[r * kStats + c], 1e-4) << "row " << r << " stat " << c;
    }
  }
}

// A call on rows [a, b) writes the bits of the whole call: row tiles of 32, 64 and 128 rows, and
// rows at every place in a tile, compute the same arithmetic.
TEST_P(CudaLmHead, RowChunkingIsBitExact) {
  Problem p(300, 136, 5000, 13);
  p.through_gemm = GetParam();
  fill_sampling(p, 3);
  const std::vector<float> whole = p.run_gpu();
  std::vector<float> parts;
  int64_t first = 0;
  for (int64_t size : {1, 31, 50, 7, 100, 111}) {  // 300 rows
    const int64_t count = std::min<int64_t>(size, p.rows - first);
    const std::vector<float> part = p.run_gpu(first, count);
    parts.insert(parts.end(), part.begin(), part.end());
    first += count;
  }
  ASSERT_EQ(parts.size(), whole.size());
  EXPECT_EQ(std::memcmp(parts.data(), whole.data(), whole.size() * sizeof(float)), 0);
}

// The stride gap of the output is not written.
TEST_P(CudaLmHead, OutputStrideGapUntouched) {
  Problem p(5, 64, 1000, 2);
  p.through_gemm = GetParam();
  const int64_t stride = kStats + 3;
  const std::vector<float> out = p.run_gpu(0, p.rows, stride);
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t c = 0; c < stride; ++c) {
      EXPECT_EQ(std::isnan(out[r * stride + c]), c >= kStats) << "row " << r << " column " << c;
    }
  }
}

// The cuBLASLt path's fold for greedy rows (LmHeadArgs::all_greedy: no noise, no double scores,
// a tournament for the top two) against its general fold: the same bits, with choice and stats
// bans in some chunks and not others, two stats scales, a ragged last chunk (10,000 ids: chunks of
// 4,096), and logits on a coarse grid, so that exact ties fall inside lanes, batches and chunks.
TEST(CudaLmHeadGreedyFold, SameBitsAsTheGeneralFold) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (bool tied : {false, true}) {
    Problem p(70, 64, 10000, tied ? 21 : 22);
    p.through_gemm = true;
    if (tied) {
      std::fill(p.h.begin(), p.h.end(), uint16_t{0});
      for (int64_t r = 0; r < p.rows; ++r) p.h[r * p.h_stride] = f32_to_bf16(1.0f + 0.25f * float(r % 3));
      std::mt19937 rng(5);
      for (int64_t v = 0; v < p.vocab; ++v) p.w[v * p.hidden] = f32_to_bf16(float(rng() % 40) / 8.0f);
    }
    p.how.resize(p.rows);
    for (int64_t r = 0; r < p.rows; ++r) {
      HeadRowSampling& how = p.how[r];  // greedy: choice_inv_temperature 0
      how.stats_scale = r % 2 ? 1.0 : 1.0 / 0.7;
      if (r % 3 == 0) how.choice_bans[0] = int32_t(r * 37 % p.vocab);
      if (r % 5 == 0) how.stats_bans[0] = int32_t(p.vocab - 1 - r), how.choice_bans[1] = 4096 + int32_t(r);
      if (r % 7 == 0) how.stats_bans[1] = int32_t(r);
    }
    const std::vector<float> general = p.run_gpu();
    p.all_greedy = true;
    const std::vector<float> greedy = p.run_gpu();
    ASSERT_EQ(greedy.size(), general.size());
    EXPECT_EQ(std::memcmp(greedy.data(), general.data(), general.size() * sizeof(float)), 0)
        << (tied ? "tied logits" : "random logits");
    p.all_greedy = false;
    expect_close(p, general, p.run_cpu());
    // Null sampling (every row greedy, stats scale 1, no bans) runs the greedy fold too.
    p.how.clear();
    const std::vector<float> null_sampling = p.run_gpu();
    p.how.assign(p.rows, HeadRowSampling{});
    const std::vector<float> default_rows = p.run_gpu();
    EXPECT_EQ(std::memcmp(null_sampling.data(), default_rows.data(), default_rows.size() * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, CudaLmHead, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "cublaslt" : "fused"; });

}  // namespace
}  // namespace mosaic::cuda
