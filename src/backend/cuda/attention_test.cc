// cuda::attention against the CPU fp32 kernel on the same bf16 values, and the bit-exactness of
// query chunking, for each kernel: the portable one (every device, head_dim 1 to 256) and the
// Hopper one (compute capability 9.0, head_dim 128). Skipped without a device.
#include "backend/cuda/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <span>
#include <stdexcept>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cuda/attention_sm90.h"
#include "backend/cuda/attention_split_keys.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/test_device_buffer.h"
#include "core/half.h"

namespace mosaic::cuda {
namespace {

constexpr uint16_t kPoison = 0xffff;  // a bf16 NaN

using testing_support::DeviceBuffer;
using testing_support::upload;

class CudaAttention : public ::testing::TestWithParam<AttentionKernel> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    if (GetParam() != AttentionKernel::portable && !hopper_attention_available()) {
      GTEST_SKIP() << "the Hopper kernel needs a compute capability 9.0 device";
    }
  }
  // The head sizes the kernel under test takes: for the portable one, those with 16-byte tile
  // copies (64, 80, 96, 128, 256) and others through the element-wise copies of the next width:
  // 72 (rows 16-byte aligned), 100 (8-byte), 40, 34 (4-byte; with 7 heads the output rows too).
  std::vector<int64_t> head_dims() const {
    if (GetParam() != AttentionKernel::portable) return {128};
    return {128, 64, 80, 96, 256, 72, 100, 40, 34};
  }
};

// q, k, v in one fused bf16 buffer per row, [rows, q_heads + 2 kv_heads, head_dim], as a fused QKV
// projection leaves them; the output has a padded row stride.
struct Problem {
  int64_t rows, q_heads, kv_heads, head_dim;
  std::vector<uint16_t> qkv;  // bf16

  Problem(int64_t rows_, int64_t q_heads_, int64_t kv_heads_, int64_t head_dim_, uint32_t seed)
      : rows(rows_), q_heads(q_heads_), kv_heads(kv_heads_), head_dim(head_dim_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);  // wide enough for peaked softmax
    qkv.resize(rows * stride());
    for (uint16_t& x : qkv) x = f32_to_bf16(dist(rng));
  }
  int64_t stride() const { return (q_heads + 2 * kv_heads) * head_dim; }
  int64_t out_stride() const { return q_heads * head_dim + 8; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }

  // bf16 [rows, out_stride], poisoned before the call. With `pages` (a KV cache's page table,
  // pages of page_rows rows), K and V are read from a copy of the rows placed page by page at
  // those pages of a buffer of `pool_pages` pages, poisoned elsewhere.
  std::vector<uint16_t> run_gpu(const std::vector<AttentionSegment>& segments, AttentionKernel kernel,
                                const std::vector<int32_t>* pages = nullptr, int64_t page_rows = 0,
                                int64_t pool_pages = 0,
                                AttentionSplitKeys split_keys = AttentionSplitKeys::automatic) const {
    DeviceBuffer device_qkv(qkv.size() * 2), device_out(rows * out_stride() * 2),
        device_segments(segments.size() * sizeof(AttentionSegment));
    upload(device_qkv, qkv);
    upload(device_segments, segments);
    std::vector<uint16_t> out(rows * out_stride(), kPoison);
    upload(device_out, out);
    const auto* base = static_cast<const uint16_t*>(device_qkv.data);
    AttentionArgs args;
    args.q = base, args.q_stride = stride();
    args.k = base + q_heads * head_dim, args.k_stride = stride();
    args.v = base + (q_heads + kv_heads) * head_dim, args.v_stride = stride();
    DeviceBuffer device_pool, device_pages;
    if (pages != nullptr) {
      std::vector<uint16_t> pool(pool_pages * page_rows * stride(), kPoison);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t slot = int64_t{(*pages)[r / page_rows]} * page_rows + r % page_rows;
        std::copy_n(qkv.begin() + r * stride(), stride(), pool.begin() + slot * stride());
      }
      if (!device_pool.try_allocate(pool.size() * 2) || !device_pages.try_allocate(pages->size() * 4))
        throw std::runtime_error("cannot allocate the paged K/V pool");
      upload(device_pool, pool);
      upload(device_pages, *pages);
      const auto* pooled = static_cast<const uint16_t*>(device_pool.data);
      args.k = pooled + q_heads * head_dim, args.v = pooled + (q_heads + kv_heads) * head_dim;
      args.kv_pages = static_cast<const int32_t*>(device_pages.data), args.page_rows = page_rows;
    }
    args.out = device_out.data, args.out_stride = out_stride();
    args.q_heads = q_heads, args.kv_heads = kv_heads, args.head_dim = head_dim;
    args.scale = scale();
    args.segments = static_cast<const AttentionSegment*>(device_segments.data);
    args.segment_count = static_cast<int64_t>(segments.size());
    summarize_segments(args, segments);
    args.kernel = kernel, args.split_keys = split_keys;
    attention(args, nullptr);
    MOSAIC_CUDA_CHECK(cudaGetLastError());
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    MOSAIC_CUDA_CHECK(cudaMemcpy(out.data(), device_out.data, out.size() * 2, cudaMemcpyDeviceToHost));
    return out;
  }

  // fp32 [rows, q_heads * head_dim] from the CPU kernel on the same values widened.
  std::vector<float> run_cpu(const std::vector<AttentionSegment>& segments) const {
    std::vector<float> wide(qkv.size());
    for (size_t i = 0; i < qkv.size(); ++i) wide[i] = bf16_to_f32(qkv[i]);
    const int64_t out_stride = q_heads * head_dim;
    std::vector<float> out(rows * out_stride, 0.0f);
    cpu::AttentionArgs args;
    args.q = wide.data(), args.q_stride = stride();
    args.k = wide.data() + q_heads * head_dim, args.k_stride = stride();
    args.v = wide.data() + (q_heads + kv_heads) * head_dim, args.v_stride = stride();
    args.out = out.data(), args.out_stride = out_stride;
    args.q_heads = q_heads, args.kv_heads = kv_heads, args.head_dim = head_dim;
    args.scale = scale();
    args.segments = segments;
    cpu::attention(args);
    return out;
  }
};

// Rows of every segment: relative L2 error <= 1e-2 and no NaN; rows no segment names, and the
// stride gap of every row, keep the poison.
void expect_close(const Problem& p, const std::vector<AttentionSegment>& segments,
                  const std::vector<uint16_t>& gpu, const std::vector<float>& cpu) {
  const int64_t width = p.q_heads * p.head_dim;
  std::vector<bool> written(p.rows, false);
  for (const AttentionSegment& s : segments) {
    double error = 0, norm = 0;
    for (int64_t i = s.q_begin; i < s.q_begin + s.q_count; ++i) {
      written[i] = true;
      for (int64_t c = 0; c < width; ++c) {
        const float got = bf16_to_f32(gpu[i * p.out_stride() + c]);
        ASSERT_FALSE(std::isnan(got)) << "row " << i << " column " << c;
        const double want = cpu[i * width + c];
        error += (got - want) * (got - want);
        norm += want * want;
      }
    }
    EXPECT_LE(std::sqrt(error / std::max(norm, 1e-30)), 1e-2)
        << "segment q [" << s.q_begin << ", +" << s.q_count << ") kv [" << s.kv_begin << ", +"
        << s.kv_count << ") heads " << p.q_heads << "/" << p.kv_heads << " d " << p.head_dim;
  }
  for (int64_t i = 0; i < p.rows; ++i) {
    for (int64_t c = written[i] ? width : 0; c < p.out_stride(); ++c) {
      ASSERT_EQ(gpu[i * p.out_stride() + c], kPoison) << "row " << i << " column " << c;
    }
  }
}

struct Heads {
  int64_t q, kv;
};

TEST_P(CudaAttention, PackedBatchMatchesCpuWithGqa) {
  // Three sequences of 1, 37 and 200 rows, each attending to itself only.
  const std::vector<AttentionSegment> segments = {{0, 1, 0, 1}, {1, 37, 1, 37}, {38, 200, 38, 200}};
  for (int64_t head_dim : head_dims()) {
    for (Heads heads : {Heads{4, 4}, Heads{4, 2}, Heads{7, 1}}) {
      const Problem p(238, heads.q, heads.kv, head_dim, static_cast<uint32_t>(head_dim + heads.q));
      expect_close(p, segments, p.run_gpu(segments, GetParam()), p.run_cpu(segments));
    }
  }
}

// Query chunks (q_count < kv_count), candidate-only rows, and segments longer than one tile of
// queries (128) and of keys (64 portable, 128 Hopper), with ragged ends.
TEST_P(CudaAttention, QueryChunksAndCandidateRows) {
  const std::vector<AttentionSegment> segments = {
      {0, 130, 0, 300}, {130, 170, 0, 300},    // a 300-row sequence in two query chunks
      {310, 4, 300, 50}, {360, 3, 350, 40},    // candidate rows of two short sequences
      {400, 259, 400, 259}};                   // a whole sequence: 3 query tiles, 5 key tiles
  for (int64_t head_dim : head_dims()) {
    for (Heads heads : {Heads{2, 2}, Heads{6, 3}, Heads{7, 1}}) {
      const Problem p(659, heads.q, heads.kv, head_dim, static_cast<uint32_t>(7 * head_dim + heads.kv));
      expect_close(p, segments, p.run_gpu(segments, GetParam()), p.run_cpu(segments));
    }
  }
}

// An even number of query tiles runs in pairs of CTAs that share their K/V tiles (Hopper): a
// whole 1,000-row sequence (8 query tiles, a partial last key tile) beside two short ones, whose
// pairs hold one CTA without queries, or two.
TEST_P(CudaAttention, LongSequenceBesideShortOnesMatchesCpu) {
  const std::vector<AttentionSegment> segments = {
      {0, 1000, 0, 1000}, {1000, 1, 1000, 1}, {1001, 150, 1001, 150}};
  for (int64_t head_dim : head_dims()) {
    for (Heads heads : {Heads{3, 3}, Heads{7, 1}}) {
      const Problem p(1151, heads.q, heads.kv, head_dim, static_cast<uint32_t>(3 * head_dim + heads.q));
      expect_close(p, segments, p.run_gpu(segments, GetParam()), p.run_cpu(segments));
    }
  }
}

// Splitting a sequence's queries into segments at arbitrary rows (not multiples of the 128-row
// query tile), in any order, changes no output bit.
TEST_P(CudaAttention, QueryChunkingIsBitExact) {
  std::mt19937 rng(17);
  for (int64_t head_dim : head_dims()) {
    const int64_t length = 700;
    const Problem p(length, 4, 2, head_dim, static_cast<uint32_t>(head_dim));
    const std::vector<uint16_t> whole = p.run_gpu({{0, length, 0, length}}, GetParam());
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<AttentionSegment> chunks;
      for (int64_t row = 0; row < length;) {
        const int64_t rows = std::min<int64_t>(length - row, 1 + rng() % 200);
        chunks.push_back({row, rows, 0, length});
        row += rows;
      }
      std::shuffle(chunks.begin(), chunks.end(), rng);
      const std::vector<uint16_t> chunked = p.run_gpu(chunks, GetParam());
      EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * 2), 0)
          << "d " << head_dim << " trial " << trial << " (" << chunks.size() << " chunks)";
    }
  }
}

// Keys and values read through a page table (a KV cache, docs/design/kv-cache.md): pages of 128
// rows placed out of order in a larger pool give the bits of the same rows read in place, for
// queries of one run and of several, whole and partial last key tiles.
TEST_P(CudaAttention, PagedKeysAreBitIdenticalToContiguousOnes) {
  constexpr int64_t kPageRows = 128, kKeys = 700;  // 6 pages, the last partial
  const std::vector<int32_t> pages = {4, 0, 7, 2, 5, 1};
  for (int64_t head_dim : head_dims()) {
    const Problem p(kKeys, 4, 2, head_dim, static_cast<uint32_t>(5 * head_dim));
    const std::vector<AttentionSegment> in_place = {{0, 40, 0, kKeys}, {40, 300, 0, 350}, {340, 360, 0, 129}};
    std::vector<AttentionSegment> paged = in_place;
    for (AttentionSegment& s : paged) s.kv_pages = 0;
    const std::vector<uint16_t> want = p.run_gpu(in_place, GetParam());
    const std::vector<uint16_t> got = p.run_gpu(paged, GetParam(), &pages, kPageRows, 8);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 2), 0) << "d " << head_dim;
  }
}

// Row offsets past 2^31 elements: one segment at rows 2100..2200 of a buffer whose row stride is
// 2^20 elements (4.6 GB), so every row offset overflows int32. Only the named rows are filled.
TEST_P(CudaAttention, RowOffsetsBeyond32Bits) {
  constexpr int64_t kStride = int64_t{1} << 20, kRows = 2200, kHeads = 2, kDim = 128;
  constexpr int64_t kKvBegin = 2100, kQBegin = 2140;
  DeviceBuffer big;
  if (!big.try_allocate(kRows * kStride * 2)) GTEST_SKIP() << "cannot allocate 4.6 GB";

  // The values of a compact problem (rows [kKvBegin, kRows)), copied into the wide rows: q, k, v at
  // the compact columns, the output right after them.
  const int64_t used = kRows - kKvBegin;
  const Problem compact(used, kHeads, kHeads, kDim, 99);
  const int64_t width = compact.stride(), out_width = kHeads * kDim;
  auto* base = static_cast<uint16_t*>(big.data);
  MOSAIC_CUDA_CHECK(cudaMemcpy2D(base + kKvBegin * kStride, kStride * 2, compact.qkv.data(), width * 2,
                                 width * 2, used, cudaMemcpyHostToDevice));
  const std::vector<AttentionSegment> segments = {{kQBegin, kRows - kQBegin, kKvBegin, used}};
  DeviceBuffer device_segments(sizeof(AttentionSegment));
  upload(device_segments, segments);
  AttentionArgs args;
  args.q = base, args.q_stride = kStride;
  args.k = base + kHeads * kDim, args.k_stride = kStride;
  args.v = base + 2 * kHeads * kDim, args.v_stride = kStride;
  args.out = base + width, args.out_stride = kStride;
  args.q_heads = kHeads, args.kv_heads = kHeads, args.head_dim = kDim;
  args.scale = compact.scale();
  args.segments = static_cast<const AttentionSegment*>(device_segments.data);
  args.segment_count = 1, args.max_q_rows = kRows - kQBegin;
  args.kernel = GetParam();
  attention(args, nullptr);
  MOSAIC_CUDA_CHECK(cudaGetLastError());
  MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
  const int64_t q_rows = kRows - kQBegin;
  std::vector<uint16_t> gpu(q_rows * out_width);
  MOSAIC_CUDA_CHECK(cudaMemcpy2D(gpu.data(), out_width * 2, base + kQBegin * kStride + width,
                                 kStride * 2, out_width * 2, q_rows, cudaMemcpyDeviceToHost));

  const std::vector<float> cpu = compact.run_cpu({{kQBegin - kKvBegin, q_rows, 0, used}});
  double error = 0, norm = 0;
  for (int64_t i = 0; i < q_rows; ++i) {
    for (int64_t c = 0; c < out_width; ++c) {
      const float got = bf16_to_f32(gpu[i * out_width + c]);
      ASSERT_FALSE(std::isnan(got)) << "row " << kQBegin + i;
      const double want = cpu[(kQBegin - kKvBegin + i) * out_width + c];
      error += (got - want) * (got - want);
      norm += want * want;
    }
  }
  EXPECT_LE(std::sqrt(error / norm), 1e-2);
}

// ---- split keys (attention_split_keys.h): segments with key_splits > 0, read in parts on the
// CTAs of a cluster and merged. Against the CPU's one pass in fp32, for every part count, few and
// many query rows, whole and ragged key tiles, grouped heads, keys in place and paged; query
// chunking and the other segments of a call change none of their bits.
class SplitKeysAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    if (!split_keys_attention_available()) GTEST_SKIP() << "the split-keys kernel needs a compute capability 9.0 device";
  }
};

std::vector<AttentionSegment> with_splits(std::vector<AttentionSegment> segments, int64_t splits) {
  for (AttentionSegment& s : segments) s.key_splits = splits;
  return segments;
}

TEST_F(SplitKeysAttention, MatchesTheCpuForEveryPartCount) {
  constexpr int64_t kKeys = 1100;
  for (Heads heads : {Heads{4, 4}, Heads{4, 2}, Heads{8, 1}}) {
    const Problem p(kKeys, heads.q, heads.kv, 128, static_cast<uint32_t>(heads.q * 10 + heads.kv));
    // 32 rows (a block) against every key; 1 row; 64 and 100 rows (one and two query tiles)
    // against a short range, a ragged one and a single key.
    const std::vector<AttentionSegment> segments = {
        {0, 32, 0, kKeys}, {32, 1, 0, 640}, {40, 64, 0, 129}, {200, 100, 0, 1000}, {400, 5, 0, 1}};
    const std::vector<float> cpu = p.run_cpu(segments);
    for (int64_t splits = 1; splits <= kMaxKeySplits; ++splits) {
      SCOPED_TRACE("key_splits " + std::to_string(splits) + ", heads " + std::to_string(heads.q) + "/" +
                   std::to_string(heads.kv));
      const auto split = with_splits(segments, splits);
      expect_close(p, split, p.run_gpu(split, AttentionKernel::automatic), cpu);
    }
  }
}

TEST_F(SplitKeysAttention, PagedKeysMatchTheCpu) {
  constexpr int64_t kPageRows = 128, kKeys = 700;
  const std::vector<int32_t> pages = {4, 0, 7, 2, 5, 1};
  const Problem p(kKeys, 4, 2, 128, 31);
  const std::vector<AttentionSegment> in_place = {{0, 40, 0, kKeys}, {40, 200, 0, 350}, {340, 8, 0, 129}};
  std::vector<AttentionSegment> paged = with_splits(in_place, 0);
  const int64_t parts[] = {8, 3, 2};
  for (size_t i = 0; i < paged.size(); ++i) paged[i].kv_pages = 0, paged[i].key_splits = parts[i];
  const std::vector<uint16_t> got = p.run_gpu(paged, AttentionKernel::automatic, &pages, kPageRows, 8);
  expect_close(p, paged, got, p.run_cpu(in_place));
  // Paged keys give the bits of the same keys in place.
  std::vector<AttentionSegment> split_in_place = paged;
  for (AttentionSegment& s : split_in_place) s.kv_pages = -1;
  const std::vector<uint16_t> want = p.run_gpu(split_in_place, AttentionKernel::automatic);
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 2), 0);
}

// The parts in turn on one CTA give the bits of the parts on a cluster, for every part count,
// keys in place and paged.
TEST_F(SplitKeysAttention, PartsInTurnGiveTheClusterBits) {
  constexpr int64_t kKeys = 1100, kPageRows = 128;
  const Problem p(kKeys, 8, 2, 128, 41);
  std::vector<int32_t> pages(9);
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int32_t>((i * 5 + 3) % pages.size());
  const std::vector<AttentionSegment> segments = {
      {0, 32, 0, kKeys}, {32, 1, 0, 640}, {40, 64, 0, 129}, {200, 100, 0, 1000}, {400, 5, 0, 1}};
  for (int64_t splits = 1; splits <= kMaxKeySplits; ++splits) {
    SCOPED_TRACE("key_splits " + std::to_string(splits));
    std::vector<AttentionSegment> split = with_splits(segments, splits);
    const auto clusters = p.run_gpu(split, AttentionKernel::automatic, nullptr, 0, 0, AttentionSplitKeys::clusters);
    const auto in_turn = p.run_gpu(split, AttentionKernel::automatic, nullptr, 0, 0, AttentionSplitKeys::in_turn);
    EXPECT_EQ(std::memcmp(clusters.data(), in_turn.data(), clusters.size() * 2), 0);
    expect_close(p, split, in_turn, p.run_cpu(segments));
    for (AttentionSegment& s : split) s.kv_pages = 0;
    const auto paged_in_turn = p.run_gpu(split, AttentionKernel::automatic, &pages, kPageRows,
                                         static_cast<int64_t>(pages.size()), AttentionSplitKeys::in_turn);
    EXPECT_EQ(std::memcmp(clusters.data(), paged_in_turn.data(), clusters.size() * 2), 0) << "paged";
  }
}

// A segment's query rows split into segments at arbitrary rows, with the same keys and parts:
// the same bits.
TEST_F(SplitKeysAttention, QueryChunkingChangesNoBit) {
  constexpr int64_t kKeys = 900, kRows = 150;
  const Problem p(kKeys, 4, 4, 128, 77);
  const std::vector<AttentionSegment> whole = {{0, kRows, 0, kKeys, -1, 7}};
  const std::vector<uint16_t> want = p.run_gpu(whole, AttentionKernel::automatic);
  std::mt19937 rng(5);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<AttentionSegment> chunks;
    for (int64_t row = 0; row < kRows;) {
      const int64_t rows = std::min<int64_t>(kRows - row, 1 + rng() % 70);
      chunks.push_back({row, rows, 0, kKeys, -1, 7});
      row += rows;
    }
    std::shuffle(chunks.begin(), chunks.end(), rng);
    const std::vector<uint16_t> got = p.run_gpu(chunks, AttentionKernel::automatic);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 2), 0) << "trial " << trial;
  }
}

// Split and unsplit segments in one call: each gets the bits it gets in a call of its own kind.
TEST_F(SplitKeysAttention, SplitAndUnsplitSegmentsShareACall) {
  constexpr int64_t kKeys = 800;
  const Problem p(kKeys, 4, 2, 128, 12);
  const std::vector<AttentionSegment> unsplit = {{0, 300, 0, kKeys}, {500, 300, 0, 400}};
  const std::vector<AttentionSegment> split = {{300, 32, 0, kKeys, -1, 8}, {332, 100, 0, 500, -1, 3}};
  std::vector<AttentionSegment> mixed = {unsplit[0], split[0], unsplit[1], split[1]};
  const std::vector<uint16_t> together = p.run_gpu(mixed, AttentionKernel::automatic);
  const std::vector<uint16_t> alone_unsplit = p.run_gpu(unsplit, AttentionKernel::automatic);
  const std::vector<uint16_t> alone_split = p.run_gpu(split, AttentionKernel::automatic);
  const int64_t stride = p.out_stride();
  auto rows_equal = [&](const std::vector<uint16_t>& a, const AttentionSegment& s) {
    return std::equal(a.begin() + s.q_begin * stride, a.begin() + (s.q_begin + s.q_count) * stride,
                      together.begin() + s.q_begin * stride);
  };
  for (const AttentionSegment& s : unsplit) EXPECT_TRUE(rows_equal(alone_unsplit, s)) << "unsplit at " << s.q_begin;
  for (const AttentionSegment& s : split) EXPECT_TRUE(rows_equal(alone_split, s)) << "split at " << s.q_begin;
  expect_close(p, mixed, together, p.run_cpu(mixed));
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaAttention,
                         ::testing::Values(AttentionKernel::portable, AttentionKernel::hopper,
                                           AttentionKernel::hopper_paired),
                         [](const ::testing::TestParamInfo<AttentionKernel>& info) {
                           switch (info.param) {
                             case AttentionKernel::hopper: return "hopper";
                             case AttentionKernel::hopper_paired: return "hopper_paired";
                             default: return "portable";
                           }
                         });

}  // namespace
}  // namespace mosaic::cuda
