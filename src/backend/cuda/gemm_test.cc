// GPU tests of the cuBLASLt GEMM (gemm.h): C = A B^T (+ bias) against a double-precision
// reference on the bf16 inputs, for bf16 and f32 outputs, odd sizes and strided rows; and the
// determinism contract: rows computed in chunks are bit-identical to rows computed in one call.
// C starts as all-ones bits (NaN in bf16 and f32): unwritten elements fail, and so do writes into
// the stride gap. Every test skips itself when there is no CUDA device.
#include "backend/cuda/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/test_random_bf16.h"
#include "core/half.h"

namespace mosaic::cuda {
namespace {

using testing_support::random_bf16;

// A device array freed on scope exit; copies go through the legacy default stream, which the
// products below also use, so each copy waits for them.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    MOSAIC_CUDA_CHECK(cudaMalloc(&data_, count_ * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    MOSAIC_CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return data_; }
  std::vector<T> download() const {
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());  // kernel faults surface here, named
    std::vector<T> host(count_);
    MOSAIC_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  void poison() { MOSAIC_CUDA_CHECK(cudaMemset(data_, 0xff, count_ * sizeof(T))); }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

struct Shape {
  int64_t m, n, k, lda, ldb, ldc;
  DType c_dtype;
  bool bias;
};

std::string describe(const Shape& s) {
  return "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
         " lda=" + std::to_string(s.lda) + " ldb=" + std::to_string(s.ldb) +
         " ldc=" + std::to_string(s.ldc) + (s.c_dtype == DType::f32 ? " f32" : " bf16") +
         (s.bias ? " bias" : "");
}

// One problem's inputs on host and device; C is [m, ldc] bytes of the output dtype.
struct Problem {
  Shape shape;
  std::vector<uint16_t> a, b, bias;
  DeviceArray<uint16_t> a_dev, b_dev, bias_dev;
  DeviceArray<uint8_t> c_dev;

  Problem(const Shape& s, uint32_t seed)
      : shape(s),
        a(random_bf16(s.m * s.lda, seed)),
        b(random_bf16(s.n * s.ldb, seed + 1)),
        bias(random_bf16(s.n, seed + 2)),
        a_dev(a),
        b_dev(b),
        bias_dev(bias),
        c_dev(s.m * s.ldc * c_size()) {
    c_dev.poison();
  }

  size_t c_size() const { return shape.c_dtype == DType::f32 ? 4 : 2; }

  // Rows [row_begin, row_end) of the product into C.
  GemmArgs args(int64_t row_begin, int64_t row_end) const {
    GemmArgs g;
    g.m = row_end - row_begin, g.n = shape.n, g.k = shape.k;
    g.a = a_dev.get() + row_begin * shape.lda, g.lda = shape.lda;
    g.b = b_dev.get(), g.ldb = shape.ldb;
    g.c = c_dev.get() + row_begin * shape.ldc * c_size(), g.ldc = shape.ldc;
    g.c_dtype = shape.c_dtype;
    g.bias = shape.bias ? bias_dev.get() : nullptr;
    return g;
  }

  // C as floats, [m, ldc]; the poison reads back as NaN in both dtypes.
  std::vector<float> c_values() const {
    const std::vector<uint8_t> bytes = c_dev.download();
    std::vector<float> values(shape.m * shape.ldc);
    for (size_t i = 0; i < values.size(); ++i) {
      if (shape.c_dtype == DType::f32) {
        std::memcpy(&values[i], &bytes[4 * i], 4);
      } else {
        uint16_t bits;
        std::memcpy(&bits, &bytes[2 * i], 2);
        values[i] = bf16_to_f32(bits);
      }
    }
    return values;
  }

  double reference(int64_t i, int64_t j) const {
    double sum = 0;
    for (int64_t kk = 0; kk < shape.k; ++kk) {
      sum += double(bf16_to_f32(a[i * shape.lda + kk])) * bf16_to_f32(b[j * shape.ldb + kk]);
    }
    return shape.bias ? sum + bf16_to_f32(bias[j]) : sum;
  }
};

class CudaGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) {
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none): GPU test skipped";
    }
  }
};

// C (as c_values() reads it) against want(i, j): ||C - want|| / ||want|| over [m, n) within
// `tolerance`, every element there finite, the stride gap [n, ldc) still poison.
template <typename Want>
void expect_close(const Shape& shape, const std::vector<float>& c, Want want, double tolerance) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < shape.m; ++i) {
    for (int64_t j = 0; j < shape.ldc; ++j) {
      const float got = c[i * shape.ldc + j];
      if (j >= shape.n) {
        ASSERT_TRUE(std::isnan(got)) << "write into the stride gap at " << i << ", " << j;
        continue;
      }
      ASSERT_TRUE(std::isfinite(got)) << "C[" << i << ", " << j << "] = " << got;
      const double ref = want(i, j);
      diff += (got - ref) * (got - ref);
      norm += ref * ref;
    }
  }
  EXPECT_LE(std::sqrt(diff / norm), tolerance);
}

// Runs the whole product and checks it against the reference.
void expect_matches_reference(const Shape& shape, uint32_t seed) {
  SCOPED_TRACE(describe(shape));
  Problem problem(shape, seed);
  Gemm gemm;
  gemm.run(problem.args(0, shape.m), nullptr);
  // bf16 output: one rounding to 8 bits. f32 output from exact bf16 inputs: only the fp32
  // accumulation order differs from the double reference.
  expect_close(shape, problem.c_values(), [&](int64_t i, int64_t j) { return problem.reference(i, j); },
               shape.c_dtype == DType::f32 ? 1e-4 : 1e-2);
}

TEST_F(CudaGemm, MatchesReferenceBf16Output) {
  expect_matches_reference({64, 64, 64, 64, 64, 64, DType::bf16, false}, 1);
  expect_matches_reference({37, 53, 200, 200, 200, 53, DType::bf16, false}, 2);
  expect_matches_reference({256, 512, 1024, 1024, 1024, 512, DType::bf16, true}, 3);
}

TEST_F(CudaGemm, MatchesReferenceF32Output) {
  expect_matches_reference({64, 96, 128, 128, 128, 96, DType::f32, false}, 4);
  expect_matches_reference({45, 77, 256, 256, 256, 77, DType::f32, true}, 5);
}

TEST_F(CudaGemm, MatchesReferenceWithStridedRows) {
  // Row strides beyond the row length on A, B and C; odd ldc leaves C rows 2- or 4-byte aligned.
  expect_matches_reference({50, 96, 128, 136, 144, 100, DType::bf16, true}, 6);
  expect_matches_reference({50, 96, 128, 136, 144, 101, DType::bf16, false}, 7);
  expect_matches_reference({33, 40, 64, 72, 64, 41, DType::f32, true}, 8);
}

// Collects what the code under test prints to stderr (the GEMM's fallback note), and always ends
// the capture, even when an assertion returns early.
class StderrCapture {
 public:
  StderrCapture() { testing::internal::CaptureStderr(); }
  ~StderrCapture() {
    if (!taken_) testing::internal::GetCapturedStderr();
  }
  std::string take() {
    taken_ = true;
    return testing::internal::GetCapturedStderr();
  }

 private:
  bool taken_ = false;
};

// The determinism contract of gemm.h: rows [0, m1) and [m1, m) in two calls equal the rows of
// one call, bit for bit (row buckets below kReferenceRows may run their own algorithm), and no
// call needed a different algorithm from the pinned one.
void expect_row_chunks_bit_identical(const Shape& shape, std::initializer_list<int64_t> splits,
                                     bool chunk_first) {
  SCOPED_TRACE(describe(shape) + (chunk_first ? ", chunk first" : ", whole first"));
  Problem whole(shape, 20), chunked(shape, 20);
  Gemm gemm;
  StderrCapture capture;
  if (!chunk_first) gemm.run(whole.args(0, shape.m), nullptr);
  for (const int64_t m1 : splits) {
    chunked.c_dev.poison();
    gemm.run(chunked.args(0, m1), nullptr);
    gemm.run(chunked.args(m1, shape.m), nullptr);
    if (chunk_first) gemm.run(whole.args(0, shape.m), nullptr);
    const std::vector<uint8_t> expected = whole.c_dev.download();
    const std::vector<uint8_t> got = chunked.c_dev.download();
    ASSERT_EQ(expected.size(), got.size());
    const size_t row_bytes = shape.ldc * whole.c_size();
    for (int64_t i = 0; i < shape.m; ++i) {
      ASSERT_EQ(std::memcmp(&expected[i * row_bytes], &got[i * row_bytes], row_bytes), 0)
          << "split at " << m1 << ": row " << i << " differs";
    }
  }
  EXPECT_EQ(capture.take(), "") << "a chunk fell back from the pinned algorithm";
  // Equal poison would compare equal too: the whole product must have written every element.
  const std::vector<float> c = whole.c_values();
  for (int64_t i = 0; i < shape.m; ++i) {
    for (int64_t j = 0; j < shape.n; ++j) {
      ASSERT_TRUE(std::isfinite(c[i * shape.ldc + j])) << "C[" << i << ", " << j << "]";
    }
  }
}

TEST_F(CudaGemm, RowChunksAreBitIdentical) {
  expect_row_chunks_bit_identical({300, 384, 512, 512, 512, 384, DType::bf16, true},
                                  {1, 77, 128, 299}, false);
  expect_row_chunks_bit_identical({300, 384, 512, 512, 512, 384, DType::f32, false},
                                  {1, 77, 128, 299}, false);
  expect_row_chunks_bit_identical({300, 384, 512, 512, 512, 384, DType::f32, true}, {150}, false);
  // The first call pins the algorithm: here it is a small chunk.
  expect_row_chunks_bit_identical({300, 384, 512, 512, 512, 384, DType::bf16, false}, {5, 200},
                                  true);
}

TEST_F(CudaGemm, RowChunksAreBitIdenticalAtModelShapes) {
  // Dream's K/V projection (bias, n = 512, k = 3584) and LLaDA's Q projection (4096 x 4096).
  expect_row_chunks_bit_identical({2048, 512, 3584, 3584, 3584, 512, DType::bf16, true},
                                  {1000, 1537}, false);
  expect_row_chunks_bit_identical({1024, 4096, 4096, 4096, 4096, 4096, DType::bf16, false},
                                  {384, 1000}, false);
  // Chunks in row buckets far apart (512 rows: the bucket's own choice where it has the
  // reference's bits; 4096 and 8192: the reference), small ones first and last.
  for (const bool chunk_first : {true, false}) {
    expect_row_chunks_bit_identical({8192, 4096, 4096, 4096, 4096, 4096, DType::bf16, false},
                                    {300, 4000}, chunk_first);
  }
}

// accumulate (the residual add fused into the o / down projections): C = C_old + A B^T, with C_old
// as large as the product so that ignoring or doubling either fails; the stride gap stays poison;
// and accumulating in row chunks gives the bits of one call.
TEST_F(CudaGemm, AccumulateAddsTheProductToC) {
  const Shape shape{300, 384, 512, 512, 512, 392, DType::bf16, false};
  SCOPED_TRACE(describe(shape));
  std::vector<uint16_t> start(shape.m * shape.ldc, 0xffff);  // NaN in the gap
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  for (int64_t i = 0; i < shape.m; ++i)
    for (int64_t j = 0; j < shape.n; ++j) start[i * shape.ldc + j] = f32_to_bf16(dist(rng));
  Problem whole(shape, 30), chunked(shape, 30);
  for (Problem* p : {&whole, &chunked})
    MOSAIC_CUDA_CHECK(cudaMemcpy(p->c_dev.get(), start.data(), start.size() * 2, cudaMemcpyHostToDevice));
  Gemm gemm;
  GemmArgs args = whole.args(0, shape.m);
  args.accumulate = true;
  gemm.run(args, nullptr);
  for (const auto [begin, end] : {std::pair<int64_t, int64_t>{0, 77}, {77, 300}}) {
    args = chunked.args(begin, end);
    args.accumulate = true;
    gemm.run(args, nullptr);
  }
  expect_close(shape, whole.c_values(),
               [&](int64_t i, int64_t j) { return bf16_to_f32(start[i * shape.ldc + j]) + whole.reference(i, j); },
               1e-2);
  EXPECT_EQ(whole.c_dev.download(), chunked.c_dev.download());
}

TEST_F(CudaGemm, EmptyProductDoesNothing) {
  Gemm gemm;
  GemmArgs args;
  args.m = 0, args.n = 16, args.k = 16, args.lda = 16, args.ldb = 16, args.ldc = 16;
  gemm.run(args, nullptr);
  EXPECT_EQ(gemm.workspace_bytes(), kDefaultGemmWorkspaceBytes);
}

// Row buckets below kReferenceRows are decided once, on their first call, and recorded; larger
// products run the reference and add no record.
TEST_F(CudaGemm, SmallRowBucketsAreDecidedOnceOnTheirFirstCall) {
  const Shape shape{5000, 4096, 4096, 4096, 4096, 4096, DType::bf16, false};
  Problem problem(shape, 60);
  Gemm gemm;
  gemm.run(problem.args(0, 300), nullptr);
  gemm.run(problem.args(300, 600), nullptr);
  gemm.run(problem.args(0, shape.m), nullptr);
  ASSERT_EQ(gemm.bucket_choices().size(), 1u);
  const GemmBucketChoice& choice = gemm.bucket_choices().front();
  EXPECT_EQ(choice.bucket, 512);
  EXPECT_EQ(choice.n, 4096);
  EXPECT_EQ(choice.k, 4096);
  // Without a differing choice there is nothing to check.
  if (!choice.own_choice_differs) EXPECT_FALSE(choice.same_bits);
}

// A bucket first seen while its stream is captured into a CUDA graph runs the reference (the bit
// check synchronises, which would invalidate the capture): the capture succeeds, the replay
// computes the reference's bits, and the bucket is decided at its first direct call.
TEST_F(CudaGemm, NoBitCheckWhileTheStreamIsCaptured) {
  // 600 rows captured, then 700 rows directly (another call of the same bucket, 1024): A's and
  // B's first rows are the same random values, so C's first 600 rows must be equal.
  const Shape captured_shape{600, 1024, 1024, 1024, 1024, 1024, DType::bf16, false};
  const Shape direct_shape{700, 1024, 1024, 1024, 1024, 1024, DType::bf16, false};
  Problem captured(captured_shape, 50), direct(direct_shape, 50);
  cudaStream_t stream = nullptr;
  MOSAIC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Gemm gemm;
  MOSAIC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  gemm.run(captured.args(0, captured_shape.m), stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_TRUE(gemm.bucket_choices().empty());
  cudaGraphExec_t exec = nullptr;
  MOSAIC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  MOSAIC_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  MOSAIC_CUDA_CHECK(cudaStreamSynchronize(stream));
  gemm.run(direct.args(0, direct_shape.m), nullptr);
  ASSERT_EQ(gemm.bucket_choices().size(), 1u);
  EXPECT_EQ(gemm.bucket_choices().front().bucket, 1024);
  std::vector<uint8_t> from_graph = captured.c_dev.download(), from_direct = direct.c_dev.download();
  from_direct.resize(from_graph.size());
  EXPECT_EQ(from_graph, from_direct);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Last in the file: k odd leaves A and B rows 2-byte aligned, which only cuBLASLt's slowest
// kernels accept; if none does, the product aborts with a message and ends the binary here.
TEST_F(CudaGemm, MatchesReferenceWithOddK) {
  expect_matches_reference({33, 17, 31, 31, 31, 17, DType::bf16, true}, 9);
  expect_matches_reference({7, 5, 3, 3, 3, 5, DType::f32, false}, 10);
}

}  // namespace
}  // namespace mosaic::cuda
