#include "backend/cpu/attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace mosaic::cpu {
namespace {

// q, k, v live in one fused buffer per row, [rows, q_heads + 2 kv_heads, head_dim], as a fused
// QKV projection leaves them; every stride is therefore larger than the tensor's own row.
struct Packed {
  int64_t rows, q_heads, kv_heads, head_dim;
  std::vector<float> qkv;
  int64_t stride() const { return (q_heads + 2 * kv_heads) * head_dim; }
  const float* q() const { return qkv.data(); }
  const float* k() const { return qkv.data() + q_heads * head_dim; }
  const float* v() const { return qkv.data() + (q_heads + kv_heads) * head_dim; }

  Packed(int64_t rows_, int64_t q_heads_, int64_t kv_heads_, int64_t head_dim_, uint32_t seed)
      : rows(rows_), q_heads(q_heads_), kv_heads(kv_heads_), head_dim(head_dim_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);  // wide enough for peaked softmax
    qkv.resize(rows * stride());
    for (float& x : qkv) x = dist(rng);
  }

  // out is [rows, q_heads, head_dim] with a padded stride.
  int64_t out_stride() const { return q_heads * head_dim + 3; }

  std::vector<float> run(const std::vector<AttentionSegment>& segments) const {
    std::vector<float> out(rows * out_stride(), -7.0f);
    AttentionArgs args;
    args.q = q(), args.q_stride = stride();
    args.k = k(), args.k_stride = stride();
    args.v = v(), args.v_stride = stride();
    args.out = out.data(), args.out_stride = out_stride();
    args.q_heads = q_heads, args.kv_heads = kv_heads, args.head_dim = head_dim;
    args.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    args.segments = segments;
    attention(args);
    return out;
  }
};

// Naive attention in double for one segment; compares every output of its query rows.
void expect_matches_reference(const Packed& p, const AttentionSegment& seg,
                              const std::vector<float>& out) {
  const int64_t d = p.head_dim, group = p.q_heads / p.kv_heads, s = p.stride();
  const double scale = 1.0 / std::sqrt(static_cast<float>(d));
  std::vector<double> weights(seg.kv_count);
  for (int64_t i = seg.q_begin; i < seg.q_begin + seg.q_count; ++i) {
    for (int64_t h = 0; h < p.q_heads; ++h) {
      const float* q = p.q() + i * s + h * d;
      const int64_t g = h / group;
      double max_logit = -INFINITY, sum = 0;
      for (int64_t j = 0; j < seg.kv_count; ++j) {
        const float* k = p.k() + (seg.kv_begin + j) * s + g * d;
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += double(q[c]) * k[c];
        weights[j] = dot * scale;
        max_logit = std::max(max_logit, weights[j]);
      }
      for (double& w : weights) sum += (w = std::exp(w - max_logit));
      for (int64_t c = 0; c < d; ++c) {
        double expected = 0;
        for (int64_t j = 0; j < seg.kv_count; ++j) {
          expected += weights[j] / sum * p.v()[(seg.kv_begin + j) * s + g * d + c];
        }
        ASSERT_NEAR(out[i * p.out_stride() + h * d + c], expected, 2e-5)
            << "row " << i << " head " << h << " c " << c;
      }
    }
  }
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

TEST(Attention, MatchesDoubleReferenceWithGqaAndPackedSegments) {
  struct Heads {
    int64_t q, kv;
  };
  for (Heads heads : {Heads{3, 3}, Heads{4, 2}, Heads{7, 1}}) {
    for (int64_t head_dim : {8, 13, 64}) {
      // A packed batch of three sequences (37, 70 and 1 rows), each attending to itself only.
      const std::vector<AttentionSegment> segments = {
          {0, 37, 0, 37}, {37, 70, 37, 70}, {107, 1, 107, 1}};
      const Packed p(108, heads.q, heads.kv, head_dim, 11 + head_dim);
      const std::vector<float> out = p.run(segments);
      for (const AttentionSegment& seg : segments) expect_matches_reference(p, seg, out);
      for (int64_t i = 0; i < p.rows; ++i) {  // the stride gap is untouched
        for (int64_t c = heads.q * head_dim; c < p.out_stride(); ++c) {
          ASSERT_EQ(out[i * p.out_stride() + c], -7.0f);
        }
      }
    }
  }
}

// Candidate-only rows: a few query rows attending to a longer key range that contains them.
TEST(Attention, QuerySubsetOfKeys) {
  const Packed p(90, 4, 2, 16, 5);
  const std::vector<AttentionSegment> segments = {{10, 4, 0, 50}, {60, 3, 50, 40}};
  const std::vector<float> out = p.run(segments);
  for (const AttentionSegment& seg : segments) expect_matches_reference(p, seg, out);
  // Rows no segment names are not written.
  for (int64_t c = 0; c < p.out_stride(); ++c) EXPECT_EQ(out[0 * p.out_stride() + c], -7.0f);
}

// Splitting a sequence's queries into segments (same keys) changes no output bit. With 4100 keys
// the kernel itself works in blocks of 64 query rows, so the splits also cross its blocks.
TEST(Attention, QueryChunkingIsBitExact) {
  struct Shape {
    int64_t queries, keys, head_dim;
  };
  std::mt19937 rng(9);
  for (Shape shape : {Shape{150, 150, 16}, Shape{150, 150, 64}, Shape{150, 4100, 8}}) {
    const Packed p(shape.keys, 2, 1, shape.head_dim, static_cast<uint32_t>(shape.keys));
    const std::vector<float> whole = p.run({{0, shape.queries, 0, shape.keys}});
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<AttentionSegment> chunks;
      for (int64_t row = 0; row < shape.queries;) {
        const int64_t rows = std::min<int64_t>(shape.queries - row, 1 + rng() % 80);
        chunks.push_back({row, rows, 0, shape.keys});
        row += rows;
      }
      std::shuffle(chunks.begin(), chunks.end(), rng);
      EXPECT_TRUE(same_bits(whole, p.run(chunks)))
          << shape.queries << " x " << shape.keys << " x " << shape.head_dim << " trial " << trial;
    }
  }
}

TEST(Attention, ThreadCountDoesNotChangeBits) {
  const Packed p(130, 6, 3, 32, 31);
  const std::vector<AttentionSegment> segments = {{0, 100, 0, 100}, {100, 30, 100, 30}};
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one = p.run(segments);
  omp_set_num_threads(2);
  const std::vector<float> two = p.run(segments);
  omp_set_num_threads(saved);
  EXPECT_TRUE(same_bits(one, two));
}

// A segment's output does not depend on the keys and values of another segment.
TEST(Attention, SegmentsAreIsolated) {
  Packed p(60, 2, 1, 8, 41);
  const std::vector<AttentionSegment> segments = {{0, 25, 0, 25}, {25, 35, 25, 35}};
  const std::vector<float> before = p.run(segments);
  for (int64_t i = 25; i < 60; ++i) {  // rewrite k and v of the second segment
    for (int64_t c = p.q_heads * p.head_dim; c < p.stride(); ++c) p.qkv[i * p.stride() + c] *= -3;
  }
  const std::vector<float> after = p.run(segments);
  EXPECT_EQ(std::memcmp(before.data(), after.data(), 25 * p.out_stride() * sizeof(float)), 0);
}

}  // namespace
}  // namespace mosaic::cpu
