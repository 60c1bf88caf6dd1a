// Workbench: the small-rows product (backend/cuda/small_rows_gemm.h) against the engine's cuBLASLt
// path at the model shapes a cached or D2F step runs (few rows against the whole weight): ms per
// call, the weight bytes per second, and how many outputs differ from cuBLASLt's (0: the same
// accumulation order). Weights rotate over enough copies that none is in L2 when it is read, as in
// a step. docs/design/small-rows-gemm.md has the results.
//
//   nvcc -std=c++20 -arch=sm_90a -O3 --expt-relaxed-constexpr -I. -Isrc -Iinclude -Idev/cuda \
//        dev/cuda/small_rows_gemm_bench.cu -lcublasLt -lcuda -o /tmp/small_rows && /tmp/small_rows
#include "backend/cuda/gemm.cu"
#include "backend/cuda/gemm_bit_check.cu"
#include "backend/cuda/small_rows_gemm_sm90.cu"
#include "backend/cuda/tensor_map.cc"
#include "bench_timing.cuh"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace mosaic::cuda {

void log_bucket_choice(const GemmBucketChoice& choice) {
  std::printf("    choice n=%lld k=%lld%s rows<=%lld: %s %s\n", static_cast<long long>(choice.n),
              static_cast<long long>(choice.k), choice.bias ? " bias" : "", static_cast<long long>(choice.bucket),
              choice.small_rows_kernel ? "small-rows" : "cublaslt-bucket", choice.same_bits ? "same bits" : "OTHER BITS");
}

namespace small_rows_bench {

__global__ void fill(__nv_bfloat16* p, size_t count, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u ^ seed;
    x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
    p[i] = __float2bfloat16(scale * (float(x & 0xffff) / 32768.0f - 1.0f));
  }
}

__global__ void count_differences(const uint16_t* x, const uint16_t* y, size_t count, unsigned long long* out) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    local += x[i] != y[i];
  atomicAdd(out, local);
}

// The roofline: every 16 bytes of the weight read once, coalesced, by a full grid.
__global__ void read_all(const uint4* p, size_t count, unsigned* sink) {
  unsigned x = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x12345678u) *sink = x;
}

struct Shape {
  const char* name;
  int64_t n, k;
  bool bias, accumulate;
};

template <int kSub, int kProbe>
void launch_variant(const GemmArgs& g, int strip) {
  using namespace small_rows_sm90;
  switch (strip) {
    case 16: return launch<16, 1, kSub, kProbe>(g, nullptr);
    case 32: return launch<32, 1, kSub, kProbe>(g, nullptr);
    case 64: return launch<64, 1, kSub, kProbe>(g, nullptr);
    default: return launch<128, 1, kSub, kProbe>(g, nullptr);
  }
}

int run() {
  const Shape shapes[] = {
      {"llada q/k/v", 4096, 4096, false, false},   {"llada o +=", 4096, 4096, false, true},
      {"llada gate/up", 12288, 4096, false, false}, {"llada down +=", 4096, 12288, false, true},
      {"dream q bias", 3584, 3584, true, false},    {"dream k/v bias", 512, 3584, true, false},
      {"dream gate/up", 18944, 3584, false, false}, {"dream down +=", 3584, 18944, false, true},
  };
  const int64_t row_counts[] = {1, 16, 32, 64, 96, 128};
  constexpr int kCopies = 6;  // >= 6 x 24 MB: the weight read is never an L2 hit
  int sms = 0;
  MOSAIC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("SMs %d\n%-16s %5s %10s %10s %8s %8s %6s %10s %s\n", sms, "shape", "rows", "cublas ms", "small ms",
              "cublas", "small", "strip", "speed-up", "differ / other strips ms");
  setenv("MOSAIC_SMALL_ROWS_GEMM", "0", 1);
  Gemm cublas_only;
  unsetenv("MOSAIC_SMALL_ROWS_GEMM");
  Gemm engine;
  for (const Shape& shape : shapes) {
    std::vector<__nv_bfloat16*> weights(kCopies);
    for (auto& w : weights) {
      MOSAIC_CUDA_CHECK(cudaMalloc(&w, shape.n * shape.k * 2));
      fill<<<1024, 256>>>(w, shape.n * shape.k, 7, 0.05f);
    }
    __nv_bfloat16 *a, *bias, *c1, *c2, *start;
    MOSAIC_CUDA_CHECK(cudaMalloc(&a, 128 * shape.k * 2));
    MOSAIC_CUDA_CHECK(cudaMalloc(&bias, shape.n * 2));
    MOSAIC_CUDA_CHECK(cudaMalloc(&c1, 128 * shape.n * 2));
    MOSAIC_CUDA_CHECK(cudaMalloc(&c2, 128 * shape.n * 2));
    MOSAIC_CUDA_CHECK(cudaMalloc(&start, 128 * shape.n * 2));
    fill<<<1024, 256>>>(a, 128 * shape.k, 11, 1.0f);
    fill<<<64, 256>>>(bias, shape.n, 13, 1.0f);
    fill<<<1024, 256>>>(start, 128 * shape.n, 17, 4.0f);
    unsigned long long* differ;
    MOSAIC_CUDA_CHECK(cudaMalloc(&differ, sizeof(*differ)));
    {
      unsigned* sink;
      MOSAIC_CUDA_CHECK(cudaMalloc(&sink, 4));
      int copy = 0;
      const float read_ms = time_ms([&] {
        read_all<<<sms * 8, 512>>>(reinterpret_cast<const uint4*>(weights[copy = (copy + 1) % kCopies]),
                                   shape.n * shape.k / 8, sink);
      }, 30, 3);
      std::printf("%-16s  read once by a plain kernel: %.4f ms, %.0f GB/s\n", shape.name, read_ms,
                  double(shape.n) * shape.k * 2 / 1e9 / read_ms * 1e3);
      cudaFree(sink);
    }
    for (const int64_t m : row_counts) {
      const auto args_for = [&](int copy, __nv_bfloat16* c) {
        GemmArgs g;
        g.m = m, g.n = shape.n, g.k = shape.k;
        g.a = a, g.lda = shape.k, g.b = weights[copy], g.ldb = shape.k, g.c = c, g.ldc = shape.n;
        g.bias = shape.bias ? bias : nullptr, g.accumulate = shape.accumulate;
        return g;
      };
      // Bits: one call each from the same C.
      MOSAIC_CUDA_CHECK(cudaMemcpy(c1, start, m * shape.n * 2, cudaMemcpyDeviceToDevice));
      MOSAIC_CUDA_CHECK(cudaMemcpy(c2, start, m * shape.n * 2, cudaMemcpyDeviceToDevice));
      cublas_only.run(args_for(0, c1), nullptr);
      small_rows_gemm(args_for(0, c2), nullptr);
      MOSAIC_CUDA_CHECK(cudaMemset(differ, 0, sizeof(*differ)));
      count_differences<<<256, 256>>>(reinterpret_cast<uint16_t*>(c1), reinterpret_cast<uint16_t*>(c2),
                                      m * shape.n, differ);
      unsigned long long differing = 0;
      MOSAIC_CUDA_CHECK(cudaMemcpy(&differing, differ, sizeof(differing), cudaMemcpyDeviceToHost));
      engine.run(args_for(0, c2), nullptr);  // the engine's own decision (printed once per bucket)

      int copy = 0;
      const auto next = [&] { return copy = (copy + 1) % kCopies; };
      const float cublas_ms = time_ms([&] { cublas_only.run(args_for(next(), c1), nullptr); }, 30, 3);
      const int strip = small_rows_gemm_strip(shape.n, sms);
      const float small_ms = time_ms([&] { small_rows_gemm(args_for(next(), c2), nullptr, strip); }, 30, 3);
      const double gb = double(shape.n) * shape.k * 2 / 1e9;
      std::printf("%-16s %5lld %10.4f %10.4f %6.0fGB/s %6.0fGB/s %6d %9.2fx %llu /", shape.name,
                  static_cast<long long>(m), cublas_ms, small_ms, gb / cublas_ms * 1e3, gb / small_ms * 1e3, strip,
                  cublas_ms / small_ms, differing);
      for (const int other : {16, 32, 64, 128}) {
        if (other == strip || shape.n % other != 0) continue;
        std::printf(" %d:%.4f", other, time_ms([&] { small_rows_gemm(args_for(next(), c2), nullptr, other); }, 30, 3));
      }
      std::printf("\n");
      if (m == 32) {  // K per stage, and loads alone (no MMAs), at the engine's strip
        using namespace small_rows_sm90;
        const auto time_variant = [&](auto launcher) {
          return time_ms([&] { launcher(args_for(next(), c2)); }, 30, 3);
        };
        std::printf("    strip %d, K per stage 64/128/256: %.4f %.4f %.4f ms; loads only 64/256: %.4f %.4f ms\n", strip,
                    time_variant([&](const GemmArgs& g) { launch_variant<1, 0>(g, strip); }),
                    time_variant([&](const GemmArgs& g) { launch_variant<2, 0>(g, strip); }),
                    time_variant([&](const GemmArgs& g) { launch_variant<4, 0>(g, strip); }),
                    time_variant([&](const GemmArgs& g) { launch_variant<1, 1>(g, strip); }),
                    time_variant([&](const GemmArgs& g) { launch_variant<4, 1>(g, strip); }));
        // Bits of the wider stages against the engine's kernel.
        small_rows_gemm(args_for(0, c1), nullptr, strip);
        MOSAIC_CUDA_CHECK(cudaMemcpy(c2, c1, m * shape.n * 2, cudaMemcpyDeviceToDevice));
        if (shape.accumulate) {
          MOSAIC_CUDA_CHECK(cudaMemcpy(c1, start, m * shape.n * 2, cudaMemcpyDeviceToDevice));
          MOSAIC_CUDA_CHECK(cudaMemcpy(c2, start, m * shape.n * 2, cudaMemcpyDeviceToDevice));
          small_rows_gemm(args_for(0, c1), nullptr, strip);
        }
        launch_variant<4, 0>(args_for(0, c2), strip);
        MOSAIC_CUDA_CHECK(cudaMemset(differ, 0, sizeof(*differ)));
        count_differences<<<256, 256>>>(reinterpret_cast<uint16_t*>(c1), reinterpret_cast<uint16_t*>(c2),
                                        m * shape.n, differ);
        MOSAIC_CUDA_CHECK(cudaMemcpy(&differing, differ, sizeof(differing), cudaMemcpyDeviceToHost));
        std::printf("    256 K per stage: %llu outputs differ from 64\n", differing);
      }
      std::fflush(stdout);
    }
    for (auto& w : weights) cudaFree(w);
    cudaFree(a), cudaFree(bias), cudaFree(c1), cudaFree(c2), cudaFree(start), cudaFree(differ);
  }
  return 0;
}

}  // namespace small_rows_bench
}  // namespace mosaic::cuda

int main() { return mosaic::cuda::small_rows_bench::run(); }
