#include "backend/cpu/gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"

namespace mosaic::cpu {
namespace {

std::vector<float> random_floats(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& x : values) x = dist(rng);
  return values;
}

// A [m, k], B [n, k], C [m, n], all packed (ld = row length) unless a test says otherwise.
struct Problem {
  int64_t m, n, k;
  std::vector<float> a, b, bias;

  Problem(int64_t m_, int64_t n_, int64_t k_, uint32_t seed)
      : m(m_),
        n(n_),
        k(k_),
        a(random_floats(m_ * k_, seed)),
        b(random_floats(n_ * k_, seed + 1)),
        bias(random_floats(n_, seed + 2)) {}

  GemmArgs args(float* c, bool with_bias = true) const {
    GemmArgs g;
    g.m = m, g.n = n, g.k = k;
    g.a = a.data(), g.lda = k;
    g.b = b.data(), g.b_dtype = DType::f32, g.ldb = k;
    g.c = c, g.ldc = n;
    g.bias = with_bias ? bias.data() : nullptr;
    return g;
  }

  std::vector<float> run(bool with_bias = true) const {
    std::vector<float> c(m * n, -7.0f);
    gemm_nt(args(c.data(), with_bias));
    return c;
  }
};

bool bitwise_equal(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// The per-element contract of gemm.cc, written out in scalar code: 8 lane sums over K8, the fixed
// tree, the fma tail, the bias.
float contract_dot(const float* a, const float* b, int64_t k, const float* bias) {
  const int64_t k8 = k / 8 * 8;
  float lane[8] = {};
  for (int64_t kk = 0; kk < k8; ++kk) lane[kk % 8] = std::fma(a[kk], b[kk], lane[kk % 8]);
  float sum =
      ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (int64_t kk = k8; kk < k; ++kk) sum = std::fma(a[kk], b[kk], sum);
  if (bias) sum = sum + *bias;
  return sum;
}

const int64_t kOddSizes[] = {1, 3, 7, 8, 9, 17, 63, 129};

TEST(GemmNt, MatchesDoubleReference) {
  for (int64_t k : kOddSizes) {
    const Problem p(13, 29, k, 100 + k);
    const std::vector<float> c = p.run();
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double exact = p.bias[j], magnitude = std::abs(p.bias[j]);
        for (int64_t kk = 0; kk < k; ++kk) {
          exact += double(p.a[i * k + kk]) * p.b[j * k + kk];
          magnitude += std::abs(double(p.a[i * k + kk]) * p.b[j * k + kk]);
        }
        ASSERT_NEAR(c[i * p.n + j], exact, 1e-6 * magnitude + 1e-30) << "k=" << k;
      }
    }
  }
}

TEST(GemmNt, FollowsTheDocumentedOperationOrder) {
  for (int64_t k : {1, 8, 15, 16, 17, 100, 1000}) {
    for (bool with_bias : {false, true}) {
      const Problem p(9, 11, k, 200 + k);
      const std::vector<float> c = p.run(with_bias);
      for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < p.n; ++j) {
          const float expected =
              contract_dot(&p.a[i * k], &p.b[j * k], k, with_bias ? &p.bias[j] : nullptr);
          ASSERT_EQ(std::bit_cast<uint32_t>(c[i * p.n + j]), std::bit_cast<uint32_t>(expected))
              << "k=" << k << " i=" << i << " j=" << j;
        }
      }
    }
  }
}

// Rows computed by separate calls (M = chunk size) match one call, bit for bit.
TEST(GemmNt, RowChunkingIsBitExact) {
  std::mt19937 rng(7);
  for (int64_t m : {1, 5, 13, 67}) {
    for (int64_t n : {1, 7, 17, 50}) {
      for (int64_t k : kOddSizes) {
        const Problem p(m, n, k, static_cast<uint32_t>(m * 1000 + n * 10 + k));
        const std::vector<float> whole = p.run();
        for (int trial = 0; trial < 3; ++trial) {
          std::vector<float> chunked(m * n, -7.0f);
          for (int64_t row = 0; row < m;) {
            const int64_t rows = std::min<int64_t>(m - row, 1 + rng() % 9);
            GemmArgs g = p.args(chunked.data());
            g.m = rows;
            g.a = p.a.data() + row * k;
            g.c = chunked.data() + row * n;
            gemm_nt(g);
            row += rows;
          }
          ASSERT_TRUE(bitwise_equal(whole, chunked)) << "m=" << m << " n=" << n << " k=" << k;
        }
      }
    }
  }
}

// Columns [col, col + cols) computed through offset B / C / bias pointers match one call.
TEST(GemmNt, ColumnSubsetIsBitExact) {
  for (int64_t k : kOddSizes) {
    const Problem p(11, 41, k, 300 + k);
    const std::vector<float> whole = p.run();
    for (int64_t col : {0, 1, 2, 5, 20, 40}) {
      for (int64_t cols : {1, 2, 4, 7}) {
        if (col + cols > p.n) continue;
        std::vector<float> part(p.m * p.n, -7.0f);
        GemmArgs g = p.args(part.data());
        g.n = cols;
        g.b = p.b.data() + col * k;
        g.bias = p.bias.data() + col;
        g.c = part.data() + col;  // ldc stays n: a strided C
        gemm_nt(g);
        for (int64_t i = 0; i < p.m; ++i) {
          ASSERT_EQ(std::memcmp(&part[i * p.n + col], &whole[i * p.n + col], cols * sizeof(float)),
                    0)
              << "k=" << k << " col=" << col << " cols=" << cols;
        }
      }
    }
  }
}

TEST(GemmNt, ThreadCountDoesNotChangeBits) {
  const int saved = omp_get_max_threads();
  for (int64_t k : {9, 129, 700}) {
    const Problem p(37, 301, k, 400 + k);
    omp_set_num_threads(1);
    const std::vector<float> one = p.run();
    omp_set_num_threads(2);
    const std::vector<float> two = p.run();
    omp_set_num_threads(3);
    const std::vector<float> three = p.run();
    EXPECT_TRUE(bitwise_equal(one, two)) << "k=" << k;
    EXPECT_TRUE(bitwise_equal(one, three)) << "k=" << k;
  }
  omp_set_num_threads(saved);
}

TEST(GemmNt, GatheredRowsMatchExplicitCopy) {
  const int64_t k = 37, source_rows = 20, n = 23;
  const Problem p(source_rows, n, k, 500);
  const std::vector<int32_t> rows = {19, 0, 3, 3, 7, 12, 0, 19, 5};
  const int64_t m = static_cast<int64_t>(rows.size());

  std::vector<float> gathered_a(m * k);
  for (int64_t i = 0; i < m; ++i) std::copy_n(&p.a[rows[i] * k], k, &gathered_a[i * k]);
  std::vector<float> expected(m * n), actual(m * n);
  GemmArgs g = p.args(expected.data());
  g.m = m;
  g.a = gathered_a.data();
  gemm_nt(g);

  g.a = p.a.data();
  g.a_rows = rows.data();
  g.c = actual.data();
  gemm_nt(g);
  EXPECT_TRUE(bitwise_equal(expected, actual));
}

TEST(GemmNt, HalfWeightsMatchWidenedF32) {
  for (int64_t k : {1, 7, 8, 9, 63, 130}) {
    Problem p(6, 19, k, 600 + k);
    for (DType dtype : {DType::bf16, DType::f16}) {
      std::vector<uint16_t> b16(p.b.size());
      std::vector<float> widened(p.b.size());
      for (size_t i = 0; i < b16.size(); ++i) {
        const float scaled = p.b[i] * (dtype == DType::f16 ? 100.0f : 1e20f);  // exercise range
        b16[i] = dtype == DType::bf16 ? f32_to_bf16(scaled) : f32_to_f16(scaled);
        widened[i] = dtype == DType::bf16 ? bf16_to_f32(b16[i]) : f16_to_f32(b16[i]);
      }
      std::vector<float> from_half(p.m * p.n), from_f32(p.m * p.n);
      GemmArgs g = p.args(from_half.data());
      g.b = b16.data();
      g.b_dtype = dtype;
      gemm_nt(g);
      g.b = widened.data();
      g.b_dtype = DType::f32;
      g.c = from_f32.data();
      gemm_nt(g);
      EXPECT_TRUE(bitwise_equal(from_half, from_f32)) << dtype_name(dtype) << " k=" << k;
    }
  }
}

TEST(GemmNt, BiasIsAddedAfterTheSum) {
  const Problem p(5, 9, 33, 700);
  const std::vector<float> plain = p.run(false), biased = p.run(true);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      EXPECT_EQ(biased[i * p.n + j], plain[i * p.n + j] + p.bias[j]);
    }
  }
}

// accumulate: C + (product + bias), one fp32 addition per element, over a strided C whose
// padding stays as it was, for edge tiles too (m, n not multiples of the tile).
TEST(GemmNt, AccumulateAddsTheProductToC) {
  const Problem p(7, 10, 19, 750);
  const int64_t ldc = 13;
  std::vector<float> c = random_floats(p.m * ldc, 751);
  const std::vector<float> before = c;
  GemmArgs args = p.args(c.data());
  args.ldc = ldc, args.accumulate = true;
  gemm_nt(args);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float want = j < p.n ? before[i * ldc + j] + contract_dot(&p.a[i * p.k], &p.b[j * p.k], p.k, &p.bias[j])
                                 : before[i * ldc + j];
      ASSERT_EQ(std::bit_cast<uint32_t>(c[i * ldc + j]), std::bit_cast<uint32_t>(want)) << i << "," << j;
    }
  }
}

TEST(GemmNt, EmptyReductionGivesBias) {
  const Problem p(3, 5, 0, 800);
  const std::vector<float> plain = p.run(false), biased = p.run(true);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      EXPECT_EQ(plain[i * p.n + j], 0.0f);
      EXPECT_EQ(biased[i * p.n + j], p.bias[j]);
    }
  }
}

// Strided A and C (lda > k, ldc > n) leave the padding untouched and give the same bits.
TEST(GemmNt, StridedOperands) {
  const Problem p(7, 10, 19, 900);
  const std::vector<float> packed = p.run();
  const int64_t lda = 25, ldc = 13;
  std::vector<float> a(p.m * lda, 99.0f), c(p.m * ldc, -5.0f);
  for (int64_t i = 0; i < p.m; ++i) std::copy_n(&p.a[i * p.k], p.k, &a[i * lda]);
  GemmArgs g = p.args(c.data());
  g.a = a.data(), g.lda = lda, g.ldc = ldc;
  gemm_nt(g);
  for (int64_t i = 0; i < p.m; ++i) {
    EXPECT_EQ(std::memcmp(&c[i * ldc], &packed[i * p.n], p.n * sizeof(float)), 0);
    for (int64_t j = p.n; j < ldc; ++j) EXPECT_EQ(c[i * ldc + j], -5.0f);
  }
}

}  // namespace
}  // namespace mosaic::cpu
