// Throughput of mosaic::cpu::gemm_nt, the CPU backend's fp32 GEMM (docs/design/cpu-gemm.md).
//   build-cpu/bench/mosaic_cpu_gemm_bench --benchmark_counters_tabular=true
// Arguments: M, N, K, B dtype (0 f32, 1 bf16, 2 f16), OpenMP threads. Counter "GFLOP/s" = 2MNK/s.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/half.h"

namespace {

using mosaic::DType;

void BM_GemmNt(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const DType b_dtype = state.range(3) == 0   ? DType::f32
                        : state.range(3) == 1 ? DType::bf16
                                              : DType::f16;
  const int threads = static_cast<int>(state.range(4));

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(m * k), c(m * n), b_f32(n * k);
  for (float& x : a) x = dist(rng);
  for (float& x : b_f32) x = dist(rng);
  std::vector<uint16_t> b_16(n * k);
  for (int64_t i = 0; i < n * k; ++i) {
    b_16[i] = b_dtype == DType::bf16 ? mosaic::f32_to_bf16(b_f32[i]) : mosaic::f32_to_f16(b_f32[i]);
  }

  mosaic::cpu::GemmArgs args;
  args.m = m, args.n = n, args.k = k;
  args.a = a.data(), args.lda = k;
  args.b = b_dtype == DType::f32 ? static_cast<const void*>(b_f32.data()) : b_16.data();
  args.b_dtype = b_dtype, args.ldb = k;
  args.c = c.data(), args.ldc = n;

  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(threads);
  for (auto _ : state) {
    mosaic::cpu::gemm_nt(args);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  omp_set_num_threads(saved_threads);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * state.iterations() * 1e-9, benchmark::Counter::kIsRate);
}

void GemmShapes(benchmark::internal::Benchmark* bench) {
  for (int threads : {1, 2}) {
    for (int dtype : {0, 1, 2}) {
      for (int64_t m : {128, 512}) {
        for (int64_t nk : {1024, 4096}) bench->Args({m, nk, nk, dtype, threads});
      }
    }
  }
  // Shapes of a decoder block (LLaDA-8B: d=4096, ffn=12288) at a small chunk, and attention-like
  // products (K = head_dim = 128).
  bench->Args({64, 12288, 4096, 1, 1});
  bench->Args({64, 4096, 12288, 1, 1});
  bench->Args({512, 512, 128, 0, 1});
  bench->Args({7, 4096, 4096, 1, 1});
}

BENCHMARK(BM_GemmNt)
    ->ArgNames({"M", "N", "K", "dtype", "threads"})
    ->Apply(GemmShapes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
