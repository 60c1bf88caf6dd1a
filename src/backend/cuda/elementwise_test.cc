// GPU tests of the element-wise kernels (elementwise.h) against references computed here, in
// double on the bf16-rounded inputs, plus bit-level checks where the numerics are pinned: exact
// conversions and sums, emulations of PyTorch's rounding steps (RoPE), and row results that do
// not depend on how a call is shaped (RMSNorm). Output buffers start as all-ones bit patterns (NaN
// in bf16 and f32), so an element a kernel forgets to write fails, and so does one it writes
// outside its rows. Every test skips itself when there is no CUDA device.
#include "backend/cuda/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "backend/cpu/rope.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/test_device_buffer.h"
#include "backend/cuda/test_random_bf16.h"
#include "core/half.h"

namespace mosaic::cuda {
namespace {

using testing_support::random_bf16;

constexpr uint16_t kPoison = 0xffff;  // a NaN in bf16

// A device array freed on scope exit; host vectors in and out through the legacy default stream,
// which the launches below also use, so each copy waits for the kernels before it.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    MOSAIC_CUDA_CHECK(cudaMalloc(&data_, count_ * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return data_; }
  void upload(const std::vector<T>& host) {
    MOSAIC_CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
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

float bf(uint16_t bits) { return bf16_to_f32(bits); }

// ||out - ref||_2 / ||ref||_2 over the pairs given; infinity as soon as out holds a NaN or an
// infinity, so neither can pass a tolerance.
class RelativeL2 {
 public:
  void add(double out, double ref) {
    if (!std::isfinite(out)) finite_ = false;
    diff_ += (out - ref) * (out - ref);
    norm_ += ref * ref;
  }
  double value() const {
    if (!finite_) return INFINITY;
    return norm_ > 0 ? std::sqrt(diff_ / norm_) : std::sqrt(diff_);
  }

 private:
  double diff_ = 0, norm_ = 0;
  bool finite_ = true;
};

class CudaElementwise : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) {
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none): GPU test skipped";
    }
  }
};

// Runs on every machine: discovery must answer, never abort.
TEST(CudaDevice, CountAndInfoNeverFail) {
  const int count = cuda_device_count();
  ASSERT_GE(count, 0);
  EXPECT_FALSE(cuda_device_info(-1).has_value());
  EXPECT_FALSE(cuda_device_info(count).has_value());
  if (count > 0) {
    const std::optional<DeviceInfo> info = cuda_device_info(0);
    ASSERT_TRUE(info.has_value());
    EXPECT_FALSE(info->name.empty());
    EXPECT_GE(info->compute_major, 1);
    EXPECT_GT(info->sm_count, 0);
    EXPECT_GT(info->total_memory_bytes, uint64_t{1} << 30);
  }
}

// ---- embedding_gather -----------------------------------------------------------------------

struct GatherCase {
  int64_t dim, out_stride;
};

TEST_F(CudaElementwise, EmbeddingGatherConvertsEveryTableTypeExactly) {
  const int64_t vocab = 50, tokens = 23;
  std::mt19937 rng(11);
  std::vector<int32_t> ids(tokens);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % vocab);
  ids[0] = 0, ids[1] = vocab - 1;
  DeviceArray<int32_t> ids_dev(ids);

  // 16-byte path (dim and stride multiples of 8) and element path.
  for (const GatherCase c : {GatherCase{64, 72}, GatherCase{37, 41}}) {
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    std::vector<float> values(vocab * c.dim);
    for (float& v : values) v = dist(rng);
    for (const DType dtype : {DType::bf16, DType::f16, DType::f32}) {
      SCOPED_TRACE(testing::Message() << "dim " << c.dim << " dtype " << dtype_name(dtype));
      std::vector<float> widened(values.size());  // what the table holds, exactly
      DeviceArray<uint8_t> table(values.size() * dtype_size(dtype));
      if (dtype == DType::f32) {
        widened = values;
        std::vector<uint8_t> bytes(values.size() * 4);
        std::memcpy(bytes.data(), values.data(), bytes.size());
        table.upload(bytes);
      } else {
        std::vector<uint16_t> bits(values.size());
        for (size_t i = 0; i < values.size(); ++i) {
          bits[i] = dtype == DType::bf16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
          widened[i] = dtype == DType::bf16 ? bf16_to_f32(bits[i]) : f16_to_f32(bits[i]);
        }
        std::vector<uint8_t> bytes(bits.size() * 2);
        std::memcpy(bytes.data(), bits.data(), bytes.size());
        table.upload(bytes);
      }
      DeviceArray<uint16_t> out(tokens * c.out_stride);
      out.poison();
      embedding_gather(tokens, c.dim, ids_dev.get(), table.get(), dtype, out.get(), c.out_stride,
                       nullptr);
      const std::vector<uint16_t> got = out.download();
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t i = 0; i < c.out_stride; ++i) {
          const uint16_t expected =
              i < c.dim ? f32_to_bf16(widened[ids[t] * c.dim + i]) : kPoison;  // gap untouched
          ASSERT_EQ(got[t * c.out_stride + i], expected) << "token " << t << " column " << i;
        }
      }
    }
  }
}

// ---- rms_norm -------------------------------------------------------------------------------

struct NormCase {
  int64_t rows, dim, x_stride, out_stride;
  bool gather, in_place;
};

// The reference numerics (elementwise.h): fp32 x * rsqrt(mean(x^2) + eps) rounded to bf16, times
// the bf16 weight; computed in double with the intermediate bf16 rounding.
double rms_norm_reference(const uint16_t* x, const uint16_t* weight, int64_t i, double inv_rms) {
  const float normed = bf(f32_to_bf16(static_cast<float>(bf(x[i]) * inv_rms)));
  return double(normed) * bf(weight[i]);
}

double inverse_rms(const uint16_t* x, int64_t dim, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < dim; ++i) sum += double(bf(x[i])) * bf(x[i]);
  return 1.0 / std::sqrt(sum / double(dim) + double(eps));
}

TEST_F(CudaElementwise, RmsNormMatchesReference) {
  const float eps = 1e-5f;
  const NormCase cases[] = {
      {37, 128, 128, 128, false, false},    // a warp per row, 16-byte path
      {9, 4096, 4104, 4096, false, false},  // a block per row, strided input
      {6, 3584, 3584, 3600, true, false},   // gathered rows, Dream's hidden size
      {5, 1000, 1000, 1008, true, false},   // warp mode at its largest-ish dim
      {4, 2050, 2053, 2051, false, false},  // block mode, element path
      {11, 37, 40, 39, true, false},        // warp mode, element path
      {7, 4096, 4096, 4096, false, true},   // in place
      {13, 200, 203, 203, false, true},     // in place, element path
      {3, 10000, 10000, 10008, false, false},  // past the chunks a thread holds: re-read
      {2, 9000, 9000, 9000, false, true},      // the same, in place
  };
  uint32_t seed = 100;
  for (const NormCase& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << "rows " << c.rows << " dim " << c.dim << (c.gather ? " gather" : "")
                 << (c.in_place ? " in place" : ""));
    const int64_t x_rows = c.gather ? 2 * c.rows + 3 : c.rows;
    const std::vector<uint16_t> x = random_bf16(x_rows * c.x_stride, seed++, 2.0f);
    const std::vector<uint16_t> weight = random_bf16(c.dim, seed++, 1.5f);
    std::vector<int32_t> index(c.rows);
    for (int64_t r = 0; r < c.rows; ++r) index[r] = static_cast<int32_t>((r * 7 + 2) % x_rows);

    DeviceArray<uint16_t> x_dev(x), weight_dev(weight);
    DeviceArray<int32_t> index_dev(index);
    DeviceArray<uint16_t> out_dev(c.in_place ? 1 : c.rows * c.out_stride);
    out_dev.poison();
    uint16_t* out_ptr = c.in_place ? x_dev.get() : out_dev.get();
    const int64_t out_stride = c.in_place ? c.x_stride : c.out_stride;
    rms_norm(c.rows, c.dim, x_dev.get(), c.x_stride, c.gather ? index_dev.get() : nullptr,
             weight_dev.get(), eps, out_ptr, out_stride, nullptr);
    const std::vector<uint16_t> got = c.in_place ? x_dev.download() : out_dev.download();

    RelativeL2 error;
    for (int64_t r = 0; r < c.rows; ++r) {
      const uint16_t* xr = &x[(c.gather ? index[r] : r) * c.x_stride];
      const double inv_rms = inverse_rms(xr, c.dim, eps);
      for (int64_t i = 0; i < c.dim; ++i) {
        error.add(bf(got[r * out_stride + i]), rms_norm_reference(xr, weight.data(), i, inv_rms));
      }
      for (int64_t i = c.dim; i < out_stride; ++i) {  // the stride gap: poison, or x's own bits
        ASSERT_EQ(got[r * out_stride + i], c.in_place ? x[r * c.x_stride + i] : kPoison)
            << r << " " << i;
      }
    }
    EXPECT_LE(error.value(), 1e-2);
  }
}

// A row's bits depend on its values and dim only: not on the row count, a gather, or whether the
// 16-byte or the element path ran (the summation order is the same on both).
TEST_F(CudaElementwise, RmsNormRowBitsIndependentOfCallShape) {
  for (const int64_t dim : {256, 2048}) {  // warp mode, block mode
    SCOPED_TRACE(testing::Message() << "dim " << dim);
    const int64_t rows = 21;
    const std::vector<uint16_t> x = random_bf16(rows * dim, 7 + dim, 3.0f);
    const std::vector<uint16_t> weight = random_bf16(dim, 8 + dim);
    DeviceArray<uint16_t> x_dev(x), weight_dev(weight);

    DeviceArray<uint16_t> all(rows * dim);
    all.poison();
    rms_norm(rows, dim, x_dev.get(), dim, nullptr, weight_dev.get(), 1e-6f, all.get(), dim,
             nullptr);
    const std::vector<uint16_t> reference = all.download();
    ASSERT_EQ(std::count(reference.begin(), reference.end(), kPoison), 0);  // all written

    // Reversed gather, one row per call at the end.
    std::vector<int32_t> reversed(rows);
    for (int64_t r = 0; r < rows; ++r) reversed[r] = static_cast<int32_t>(rows - 1 - r);
    DeviceArray<int32_t> reversed_dev(reversed);
    DeviceArray<uint16_t> gathered(rows * dim);
    gathered.poison();
    rms_norm(rows - 1, dim, x_dev.get(), dim, reversed_dev.get(), weight_dev.get(), 1e-6f,
             gathered.get(), dim, nullptr);
    rms_norm(1, dim, x_dev.get(), dim, reversed_dev.get() + rows - 1, weight_dev.get(), 1e-6f,
             gathered.get() + (rows - 1) * dim, dim, nullptr);
    const std::vector<uint16_t> got_gathered = gathered.download();

    // Misaligned copies by one element: the element path.
    std::vector<uint16_t> shifted_x(rows * dim + 1, 0);
    std::copy(x.begin(), x.end(), shifted_x.begin() + 1);
    DeviceArray<uint16_t> shifted_x_dev(shifted_x), shifted_out(rows * dim + 1);
    shifted_out.poison();
    rms_norm(rows, dim, shifted_x_dev.get() + 1, dim, nullptr, weight_dev.get(), 1e-6f,
             shifted_out.get() + 1, dim, nullptr);
    const std::vector<uint16_t> got_shifted = shifted_out.download();

    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(std::memcmp(&got_gathered[r * dim], &reference[reversed[r] * dim], dim * 2), 0)
          << "row " << r;
      ASSERT_EQ(std::memcmp(&got_shifted[1 + r * dim], &reference[r * dim], dim * 2), 0)
          << "row " << r;
    }
  }
}

// ---- swiglu ---------------------------------------------------------------------------------

struct PairCase {
  int64_t rows, dim, x_stride, y_stride;
};

TEST_F(CudaElementwise, SwigluMatchesReference) {
  for (const PairCase c : {PairCase{11, 1024, 1024, 1032}, PairCase{5, 45, 47, 45}}) {
    SCOPED_TRACE(testing::Message() << "dim " << c.dim);
    // |gate| up to 12: both silu tails (-> 0 and -> gate).
    const std::vector<uint16_t> gate = random_bf16(c.rows * c.x_stride, 31 + c.dim, 12.0f);
    const std::vector<uint16_t> up = random_bf16(c.rows * c.y_stride, 32 + c.dim, 2.0f);
    DeviceArray<uint16_t> gate_dev(gate), up_dev(up);
    swiglu(c.rows, c.dim, gate_dev.get(), c.x_stride, up_dev.get(), c.y_stride, nullptr);
    const std::vector<uint16_t> got = gate_dev.download();
    RelativeL2 error;
    int64_t same_bits = 0, count = 0;
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t i = 0; i < c.x_stride; ++i) {
        const uint16_t g = gate[r * c.x_stride + i];
        if (i >= c.dim) {
          ASSERT_EQ(got[r * c.x_stride + i], g) << "gap " << r << " " << i;
          continue;
        }
        const float u = bf(up[r * c.y_stride + i]);
        const double gd = bf(g);
        error.add(bf(got[r * c.x_stride + i]), gd / (1.0 + std::exp(-gd)) * u);
        // The fp32 formula, one rounding; expf differs from the device's by an ulp at most.
        same_bits += got[r * c.x_stride + i] == f32_to_bf16(bf(g) / (1.0f + std::exp(-bf(g))) * u);
        ++count;
      }
    }
    EXPECT_LE(error.value(), 1e-2);
    EXPECT_GE(double(same_bits), 0.99 * double(count));
  }
}

// ---- rope -----------------------------------------------------------------------------------

struct RopeCase {
  int64_t tokens, heads, head_dim, x_stride;
  double theta;
};

// The two emulations of elementwise.h's RoPE numerics, in float on the host: `fp32` rotates in
// fp32 and rounds once; `bf16_tables` rounds cos/sin, each product and the sum to bf16.
uint16_t rope_emulated(float x_self, float x_other, float c, float s, bool is_lo,
                       RopePrecision precision) {
  if (precision == RopePrecision::fp32) {
    const float self_cos = x_self * c, other_sin = x_other * s;
    return f32_to_bf16(is_lo ? self_cos - other_sin : self_cos + other_sin);
  }
  const float cb = bf(f32_to_bf16(c)), sb = bf(f32_to_bf16(s));
  const float self_cos = bf(f32_to_bf16(x_self * cb)), other_sin = bf(f32_to_bf16(x_other * sb));
  return f32_to_bf16(is_lo ? self_cos - other_sin : self_cos + other_sin);
}

TEST_F(CudaElementwise, RopeMatchesReferenceInBothPrecisions) {
  const RopeCase cases[] = {
      {19, 4, 128, 4 * 128 + 16, 500000.0},  // LLaDA-like, strided, 16-byte path
      {6, 3, 128, 3 * 128, 1000000.0},       // Dream-like
      {7, 3, 12, 3 * 12 + 5, 10000.0},       // half = 6: element path, odd stride
  };
  for (const RopePrecision precision : {RopePrecision::fp32, RopePrecision::bf16_tables}) {
    for (const RopeCase& c : cases) {
      SCOPED_TRACE(testing::Message() << (precision == RopePrecision::fp32 ? "fp32" : "bf16_tables")
                                      << " head_dim " << c.head_dim << " theta " << c.theta);
      const std::vector<uint16_t> x = random_bf16(c.tokens * c.x_stride, 41 + c.head_dim, 2.0f);
      std::mt19937 rng(43);
      std::vector<int32_t> positions(c.tokens);
      for (int32_t& p : positions) p = static_cast<int32_t>(rng() % 32768);
      positions[0] = 0;
      positions[1] = 1;
      DeviceArray<uint16_t> x_dev(x);
      DeviceArray<int32_t> positions_dev(positions);
      rope(c.tokens, c.heads, c.head_dim, x_dev.get(), c.x_stride, positions_dev.get(), c.theta,
           precision, nullptr);
      const std::vector<uint16_t> got = x_dev.download();

      const std::vector<float> inv_freq = cpu::rope_inv_freq(c.head_dim, c.theta);
      const int64_t half = c.head_dim / 2;
      RelativeL2 error;
      int64_t same_bits = 0, count = 0;
      for (int64_t t = 0; t < c.tokens; ++t) {
        for (int64_t h = 0; h < c.heads; ++h) {
          const int64_t base = t * c.x_stride + h * c.head_dim;
          for (int64_t j = 0; j < half; ++j) {
            const float angle = static_cast<float>(positions[t]) * inv_freq[j];  // fp32, as defined
            const double cd = std::cos(double(angle)), sd = std::sin(double(angle));
            const float lo = bf(x[base + j]), hi = bf(x[base + j + half]);
            const uint16_t got_lo = got[base + j], got_hi = got[base + j + half];
            error.add(bf(got_lo), lo * cd - hi * sd);
            error.add(bf(got_hi), hi * cd + lo * sd);
            const float cf = std::cos(angle), sf = std::sin(angle);
            same_bits += got_lo == rope_emulated(lo, hi, cf, sf, true, precision);
            same_bits += got_hi == rope_emulated(hi, lo, cf, sf, false, precision);
            count += 2;
          }
        }
        for (int64_t i = c.heads * c.head_dim; i < c.x_stride; ++i) {
          ASSERT_EQ(got[t * c.x_stride + i], x[t * c.x_stride + i]) << "gap " << t << " " << i;
        }
      }
      EXPECT_LE(error.value(), 1e-2);
      // Device and host cosf/sinf differ by an ulp now and then, which rarely moves a bf16
      // rounding; the other precision's emulation misses far more often than 1%.
      EXPECT_GE(double(same_bits), 0.99 * double(count));
    }
  }
}

// Partial rotary (LLaDA 2.x): heads head_stride apart, only their first rotary values turn, the
// rest of each head untouched bit for bit; the turned part as a full RoPE of rotary dims would.
TEST_F(CudaElementwise, PartialRopeTurnsOnlyTheRotaryPart) {
  constexpr int64_t kTokens = 13, kHeads = 3, kHeadDim = 128, kRotary = 64, kStride = kHeads * kHeadDim + 8;
  const std::vector<uint16_t> x = random_bf16(kTokens * kStride, 77, 2.0f);
  std::vector<int32_t> positions(kTokens);
  for (int64_t t = 0; t < kTokens; ++t) positions[t] = static_cast<int32_t>(t * 997 % 16384);
  DeviceArray<int32_t> positions_dev(positions);
  DeviceArray<uint16_t> partial(x);
  rope(kTokens, kHeads, kRotary, partial.get(), kStride, positions_dev.get(), 600000.0, RopePrecision::bf16_tables,
       nullptr, kHeadDim);
  const std::vector<uint16_t> got = partial.download();
  // The same rows with each head's rotary part packed as heads of kRotary, through the full kernel.
  std::vector<uint16_t> packed(kTokens * kHeads * kRotary);
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t j = 0; j < kRotary; ++j)
        packed[(t * kHeads + h) * kRotary + j] = x[t * kStride + h * kHeadDim + j];
  DeviceArray<uint16_t> packed_dev(packed);
  rope(kTokens, kHeads, kRotary, packed_dev.get(), kHeads * kRotary, positions_dev.get(), 600000.0,
       RopePrecision::bf16_tables, nullptr);
  const std::vector<uint16_t> want = packed_dev.download();
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t j = 0; j < kHeadDim; ++j) {
        const uint16_t value = got[t * kStride + h * kHeadDim + j];
        if (j < kRotary) ASSERT_EQ(value, want[(t * kHeads + h) * kRotary + j]) << t << " " << h << " " << j;
        else ASSERT_EQ(value, x[t * kStride + h * kHeadDim + j]) << "pass-through " << t << " " << h << " " << j;
      }
}

TEST_F(CudaElementwise, EmptyCallsLaunchNothing) {
  rms_norm(0, 64, nullptr, 64, nullptr, nullptr, 1e-5f, nullptr, 64, nullptr);
  swiglu(0, 64, nullptr, 64, nullptr, 64, nullptr);
  rope(0, 2, 64, nullptr, 128, nullptr, 10000.0, RopePrecision::fp32, nullptr);
  embedding_gather(0, 64, nullptr, nullptr, DType::bf16, nullptr, 64, nullptr);
  MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
}

// gather_rows copies whole rows by index, whatever their width: 16-byte units (bf16 rows of 8k),
// 4-byte units (int32 positions), single bytes (a 6-byte row at an odd offset), in any order and
// with a repeated source row; the rows it does not name stay untouched.
TEST_F(CudaElementwise, GatherRowsCopiesTheNamedRowsOfAnyWidth) {
  std::mt19937 rng(7);
  const std::vector<int32_t> index = {5, 0, 9, 9, 3, 1};
  for (const int64_t row_bytes : {int64_t{8192}, int64_t{4}, int64_t{6}}) {
    for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
      if (offset != 0 && row_bytes != 6) continue;
      const int64_t rows = 10, in_stride = row_bytes + (row_bytes == 6 ? 1 : 0), out_stride = row_bytes;
      std::vector<unsigned char> in(static_cast<size_t>(rows * in_stride + offset));
      for (auto& b : in) b = static_cast<unsigned char>(rng());
      std::vector<unsigned char> out(static_cast<size_t>(index.size() * out_stride + offset), 0xAB);
      using testing_support::DeviceBuffer, testing_support::download;
      DeviceBuffer din(in), dout(out), dindex(index);
      gather_rows(static_cast<int64_t>(index.size()), row_bytes, din.as<unsigned char>() + offset, in_stride,
                  dindex.as<int32_t>(), dout.as<unsigned char>() + offset, out_stride, nullptr);
      MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
      const auto got = download<unsigned char>(dout, out.size());
      std::vector<unsigned char> want = out;
      for (size_t r = 0; r < index.size(); ++r)
        std::memcpy(want.data() + offset + r * out_stride, in.data() + offset + index[r] * in_stride,
                    static_cast<size_t>(row_bytes));
      EXPECT_EQ(got, want) << "row_bytes " << row_bytes << " offset " << offset;
    }
  }
}

// scatter_rows puts rows where the index says (a cached step's K/V into its cache rows), whatever
// their width; the rows it does not name stay untouched.
TEST_F(CudaElementwise, ScatterRowsWritesTheNamedRowsOfAnyWidth) {
  std::mt19937 rng(8);
  const std::vector<int32_t> index = {5, 0, 9, 3, 1};
  for (const int64_t row_bytes : {int64_t{8192}, int64_t{4}, int64_t{6}}) {
    const int64_t rows = 10, in_stride = row_bytes, out_stride = row_bytes + (row_bytes == 6 ? 2 : 0);
    std::vector<unsigned char> in(static_cast<size_t>(index.size() * in_stride));
    for (auto& b : in) b = static_cast<unsigned char>(rng());
    std::vector<unsigned char> out(static_cast<size_t>(rows * out_stride), 0xAB);
    using testing_support::DeviceBuffer, testing_support::download;
    DeviceBuffer din(in), dout(out), dindex(index);
    scatter_rows(static_cast<int64_t>(index.size()), row_bytes, din.as<unsigned char>(), in_stride,
                 dindex.as<int32_t>(), dout.as<unsigned char>(), out_stride, nullptr);
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = download<unsigned char>(dout, out.size());
    std::vector<unsigned char> want = out;
    for (size_t r = 0; r < index.size(); ++r)
      std::memcpy(want.data() + index[r] * out_stride, in.data() + r * in_stride, static_cast<size_t>(row_bytes));
    EXPECT_EQ(got, want) << "row_bytes " << row_bytes;
  }
}

}  // namespace
}  // namespace mosaic::cuda
