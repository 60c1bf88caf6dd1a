// Workbench for the flash-attention kernels (src/backend/cuda/attention.cu, the portable mma.sync
// kernel, and attention_sm90.cu, the Hopper wgmma kernel): a correctness check of both against a
// naive fp32 GPU reference, then timings at model shapes: the portable kernel's two register
// budgets and the Hopper kernel. Only the winner goes into the engine.
//
//   nvcc -std=c++20 -arch=sm_90a -O3 --expt-relaxed-constexpr -Isrc -Iinclude \
//        dev/cuda/attention_bench.cu -o /tmp/attention_bench && /tmp/attention_bench
//
// It includes the engine's .cu files so that it can launch the kernel templates directly.
#include "backend/cuda/attention.cu"
#include "backend/cuda/attention_sm90.cu"
#include "backend/cuda/tensor_map.cc"
#include "bench_timing.cuh"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "core/half.h"

namespace mosaic::cuda {
namespace {

// One thread per (query row, head): scores, softmax and P V in fp32 from the bf16 inputs.
__global__ void reference_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                 const __nv_bfloat16* v, float* out, int64_t rows, int q_heads,
                                 int kv_heads, int d, float scale) {
  const int64_t index = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (index >= rows * q_heads) return;
  const int64_t row = index / q_heads;
  const int head = static_cast<int>(index % q_heads), kv_head = head / (q_heads / kv_heads);
  const __nv_bfloat16* qr = q + (row * q_heads + head) * d;
  float max_score = -INFINITY;
  for (int64_t j = 0; j < rows; ++j) {
    const __nv_bfloat16* kr = k + (j * kv_heads + kv_head) * d;
    float dot = 0;
    for (int c = 0; c < d; ++c) dot += __bfloat162float(qr[c]) * __bfloat162float(kr[c]);
    max_score = fmaxf(max_score, dot * scale);
  }
  float sum = 0, acc[256] = {};
  for (int64_t j = 0; j < rows; ++j) {
    const __nv_bfloat16* kr = k + (j * kv_heads + kv_head) * d;
    const __nv_bfloat16* vr = v + (j * kv_heads + kv_head) * d;
    float dot = 0;
    for (int c = 0; c < d; ++c) dot += __bfloat162float(qr[c]) * __bfloat162float(kr[c]);
    const float p = expf(dot * scale - max_score);
    sum += p;
    for (int c = 0; c < d; ++c) acc[c] += p * __bfloat162float(vr[c]);
  }
  for (int c = 0; c < d; ++c) out[(row * q_heads + head) * d + c] = acc[c] / sum;
}

struct Case {
  const char* name;
  int64_t length;
  int q_heads, kv_heads, head_dim;
  bool fused_qkv = false;  // q, k, v interleaved per token as the QKV projection writes them (timing only)
};

// One variant of the warp-specialised kernel.
template <bool kSkipUnitRescale, bool kQInRegisters, bool kTmaLoads,
          hopper::RowSum kRowSum = hopper::RowSum::rounded_alu, bool kPairedLoads = false>
float time_ws(const AttentionArgs& args, int repeats) {
  return time_ms(
      [&] { hopper::WsVariant<kSkipUnitRescale, kQInRegisters, kTmaLoads, kRowSum, kPairedLoads>::launch(args, nullptr); },
      repeats);
}

// The portable kernel at one register budget.
template <int kHeadDim, int kMinBlocks>
float time_kernel(const AttentionArgs& args, int repeats) {
  const KernelArgs kernel_args = kernel_args_of(args);
  return time_ms([&] { launch<kHeadDim, false, kMinBlocks>(args, kernel_args, nullptr); }, repeats);
}

// The portable kernel of tile width kHeadDim with element-wise tile copies (any head_dim <= kHeadDim).
template <int kHeadDim>
float time_elements(const AttentionArgs& args, int repeats) {
  const KernelArgs kernel_args = kernel_args_of(args);
  return time_ms([&] { launch<kHeadDim, true>(args, kernel_args, nullptr); }, repeats);
}

// Whatever attention() runs for `kernel`.
float time_dispatch(AttentionArgs args, AttentionKernel kernel, int repeats) {
  args.kernel = kernel;
  return time_ms([&] { attention(args, nullptr); }, repeats);
}

// A variant of the Hopper kernel in which all threads load and compute.
template <int kGroups, bool kOverlap>
float time_hopper(const AttentionArgs& args, int repeats) {
  return time_ms([&] { hopper::launch<kGroups, kOverlap>(args, nullptr); }, repeats);
}

// Times the portable kernel at both register budgets and, on Hopper, the engine's kernel and the
// all-threads-load variants.
void time_all_kernels(const Case& c, const AttentionArgs& args, double flops, int repeats, bool hopper) {
  float ms1, ms2;
  if (c.head_dim == 128) {
    ms1 = time_kernel<128, 1>(args, repeats), ms2 = time_kernel<128, 2>(args, repeats);
  } else {
    ms1 = time_kernel<64, 1>(args, repeats), ms2 = time_kernel<64, 2>(args, repeats);
  }
  std::printf("%-28s L=%6lld  portable, 1 CTA/SM: %8.3f ms %6.1f TFLOP/s | 2 CTA/SM: %8.3f ms %6.1f TFLOP/s",
              c.name, static_cast<long long>(c.length), ms1, flops / ms1 / 1e9, ms2, flops / ms2 / 1e9);
  if (hopper) {
    const float ms3 = time_dispatch(args, AttentionKernel::hopper, repeats);
    std::printf(" | hopper (engine): %8.3f ms %6.1f TFLOP/s", ms3, flops / ms3 / 1e9);
    const float variants[] = {time_hopper<2, false>(args, repeats), time_hopper<2, true>(args, repeats)};
    std::printf(" | all-threads-load (v3): serial %6.1f, overlapped %6.1f TFLOP/s", flops / variants[0] / 1e9,
                flops / variants[1] / 1e9);
  }
  std::printf("\n");
}

// The portable kernel at every head dim it takes: what attention() runs, and the element-wise
// copies of the same tile width (what a head_dim without 16-byte rows gets), sustained.
void time_head_dim(const Case& c, const AttentionArgs& args, double flops, int repeats) {
  const float dispatch = time_dispatch(args, AttentionKernel::automatic, repeats);
  const float portable = time_dispatch(args, AttentionKernel::portable, repeats);
  float elements = 0;
  switch (c.head_dim) {
    case 64: elements = time_elements<64>(args, repeats); break;
    case 80: elements = time_elements<80>(args, repeats); break;
    case 96: elements = time_elements<96>(args, repeats); break;
    case 128: elements = time_elements<128>(args, repeats); break;
    default: elements = time_elements<256>(args, repeats); break;
  }
  std::printf("| %3d | %6lld | %8.3f | %6.1f | %8.3f | %6.1f | %8.3f | %6.1f |\n", c.head_dim,
              static_cast<long long>(c.length), dispatch, flops / dispatch / 1e9, portable,
              flops / portable / 1e9, elements, flops / elements / 1e9);
}

enum class Mode { check, time_all, engine_only, head_dims };

// Runs one case: with Mode::check each kernel against the reference first; then timings of every
// kernel, or (engine_only, for ncu) of the engine's kernel alone.
void run_case(const Case& c, Mode mode) {
  const bool check = mode == Mode::check;
  const int64_t q_size = c.length * c.q_heads * c.head_dim, kv_size = c.length * c.kv_heads * c.head_dim;
  std::vector<uint16_t> host(q_size + 2 * kv_size);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (uint16_t& x : host) x = f32_to_bf16(dist(rng));
  __nv_bfloat16 *q, *out;
  AttentionSegment* segment;
  MOSAIC_CUDA_CHECK(cudaMalloc(&q, host.size() * 2));
  MOSAIC_CUDA_CHECK(cudaMalloc(&out, q_size * 2));
  MOSAIC_CUDA_CHECK(cudaMalloc(&segment, sizeof(AttentionSegment)));
  MOSAIC_CUDA_CHECK(cudaMemcpy(q, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  const AttentionSegment whole{0, c.length, 0, c.length};
  MOSAIC_CUDA_CHECK(cudaMemcpy(segment, &whole, sizeof whole, cudaMemcpyHostToDevice));

  AttentionArgs args;
  args.q = q, args.q_stride = c.q_heads * c.head_dim;
  args.k = q + q_size, args.k_stride = c.kv_heads * c.head_dim;
  args.v = q + q_size + kv_size, args.v_stride = c.kv_heads * c.head_dim;
  args.out = out, args.out_stride = c.q_heads * c.head_dim;
  if (c.fused_qkv) {  // the same bytes read as rows [q heads | k heads | v heads]
    const int64_t stride = (c.q_heads + 2 * c.kv_heads) * c.head_dim;
    args.q_stride = args.k_stride = args.v_stride = stride;
    args.k = q + c.q_heads * c.head_dim, args.v = q + (c.q_heads + c.kv_heads) * c.head_dim;
  }
  args.q_heads = c.q_heads, args.kv_heads = c.kv_heads, args.head_dim = c.head_dim;
  args.scale = 1.0f / std::sqrt(float(c.head_dim));
  args.segments = segment, args.segment_count = 1, args.max_q_rows = c.length;

  const bool hopper = c.head_dim == 128 && hopper_attention_available();
  if (check) {
    float* reference;
    MOSAIC_CUDA_CHECK(cudaMalloc(&reference, q_size * 4));
    const int64_t threads = c.length * c.q_heads;
    reference_kernel<<<static_cast<unsigned>((threads + 127) / 128), 128>>>(
        q, q + q_size, q + q_size + kv_size, reference, c.length, c.q_heads, c.kv_heads,
        c.head_dim, args.scale);
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> want(q_size);
    MOSAIC_CUDA_CHECK(cudaMemcpy(want.data(), reference, q_size * 4, cudaMemcpyDeviceToHost));
    for (const AttentionKernel kernel :
         {AttentionKernel::portable, AttentionKernel::hopper, AttentionKernel::hopper_paired}) {
      if (kernel != AttentionKernel::portable && !hopper) continue;
      MOSAIC_CUDA_CHECK(cudaMemset(out, 0xff, q_size * 2));  // NaN: unwritten elements fail
      args.kernel = kernel;
      attention(args, nullptr);
      MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<uint16_t> got(q_size);
      MOSAIC_CUDA_CHECK(cudaMemcpy(got.data(), out, q_size * 2, cudaMemcpyDeviceToHost));
      double error = 0, norm = 0;
      for (int64_t i = 0; i < q_size; ++i) {
        const double diff = bf16_to_f32(got[i]) - want[i];
        error += diff * diff, norm += double(want[i]) * want[i];
      }
      std::printf("%-28s check %-8s: relative L2 error %.2e\n", c.name,
                  kernel == AttentionKernel::portable ? "portable"
                  : kernel == AttentionKernel::hopper ? "hopper"
                                                      : "paired",
                  std::sqrt(error / norm));
    }
    args.kernel = AttentionKernel::automatic;
    MOSAIC_CUDA_CHECK(cudaFree(reference));
  }

  const double flops = 4.0 * double(c.length) * double(c.length) * c.head_dim * c.q_heads;
  const int repeats = c.length >= 16384 ? 3 : 10;
  if (mode == Mode::engine_only) {
    // Back to back (the power-limited clock of a busy GPU, as in a step), then once after a pause.
    const float ms = time_dispatch(args, AttentionKernel::automatic, repeats);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const float once = time_dispatch(args, AttentionKernel::automatic, 1);
    std::printf("%-28s L=%6lld  engine kernel: sustained %8.3f ms %6.1f TFLOP/s | isolated %8.3f ms %6.1f TFLOP/s",
                c.name, static_cast<long long>(c.length), ms, flops / ms / 1e9, once, flops / once / 1e9);
    if (c.head_dim == 128 && hopper_attention_available()) {  // the warp-specialised variants, sustained
      // Each after a pause, so that every variant starts at the same clock.
      auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(500)); };
      float t[8];
      pause(), t[0] = time_ws<false, false, false>(args, repeats);
      pause(), t[1] = time_ws<true, true, false>(args, repeats);
      pause(), t[2] = time_ws<false, false, true>(args, repeats);
      pause(), t[3] = time_ws<true, true, true>(args, repeats);
      pause(), t[4] = time_ws<true, true, true, hopper::RowSum::unrounded_alu>(args, repeats);
      pause(), t[5] = time_ws<true, true, true, hopper::RowSum::unrounded_alu, true>(args, repeats);  // pairs
      pause(), t[6] = time_ws<true, true, true, hopper::RowSum::rounded_mma>(args, repeats);
      pause(), t[7] = time_ws<true, true, true, hopper::RowSum::rounded_mma, true>(args, repeats);
      // Switches: skip unit rescale, Q in registers, TMA, row sum (0 rounded, ALU; 1 unrounded, ALU;
      // 2 rounded, tensor cores), paired CTAs.
      std::printf(" | ws 00000 %6.1f 11000 %6.1f 00100 %6.1f 11100 %6.1f 11110 %6.1f 11111 %6.1f"
                  " 11120 %6.1f 11121 %6.1f TFLOP/s",
                  flops / t[0] / 1e9, flops / t[1] / 1e9, flops / t[2] / 1e9, flops / t[3] / 1e9, flops / t[4] / 1e9,
                  flops / t[5] / 1e9, flops / t[6] / 1e9, flops / t[7] / 1e9);
    }
    std::printf("\n");
  } else if (mode == Mode::head_dims) {
    time_head_dim(c, args, flops, repeats);
  } else {
    time_all_kernels(c, args, flops, repeats, hopper);
  }
  MOSAIC_CUDA_CHECK(cudaFree(q));
  MOSAIC_CUDA_CHECK(cudaFree(out));
  MOSAIC_CUDA_CHECK(cudaFree(segment));
}

}  // namespace

// How many pairs of the paired kernel fit on the device at once (132 SMs would hold 66).
void print_paired_occupancy() {
  std::printf("paired kernel: %d clusters of 2 active at once\n", hopper::paired_clusters_on_device());
}
}  // namespace mosaic::cuda

int main(int argc, char** argv) {
  using mosaic::cuda::Case;
  using mosaic::cuda::Mode;
  // One shape, the engine's kernel only, for ncu: profile [L [q_heads kv_heads]] (LLaDA-8B, 16k).
  if (argc > 1 && std::string_view(argv[1]) == "profile") {
    const int64_t length = argc > 2 ? std::atoll(argv[2]) : 16384;
    const int q_heads = argc > 4 ? std::atoi(argv[3]) : 32, kv_heads = argc > 4 ? std::atoi(argv[4]) : 32;
    mosaic::cuda::run_case({"profile", length, q_heads, kv_heads, 128}, Mode::engine_only);
    return 0;
  }
  if (argc > 1 && std::string_view(argv[1]) == "engine") {  // the engine's kernel at the model shapes
    if (mosaic::cuda::hopper_attention_available()) mosaic::cuda::print_paired_occupancy();
    const bool fused_only = argc > 2 && std::string_view(argv[2]) == "fused";  // separate against fused rows
    for (int64_t length : {4096, 16384, 32768}) {
      mosaic::cuda::run_case({"LLaDA-8B (32/32 x 128)", length, 32, 32, 128}, Mode::engine_only);
      if (!fused_only) mosaic::cuda::run_case({"Dream-7B (28/4 x 128)", length, 28, 4, 128}, Mode::engine_only);
      mosaic::cuda::run_case({"LLaDA-8B, fused QKV rows", length, 32, 32, 128, true}, Mode::engine_only);
    }
    return 0;
  }
  // Every tile width at 32/32 heads: dims [L ...] (default 4096 16384).
  if (argc > 1 && std::string_view(argv[1]) == "dims") {
    std::vector<int64_t> lengths;
    for (int i = 2; i < argc; ++i) lengths.push_back(std::atoll(argv[i]));
    if (lengths.empty()) lengths = {4096, 16384};
    for (int d : {64, 80, 96, 128, 256})
      mosaic::cuda::run_case({"check 32/32", 1031, 32, 32, d}, Mode::check);
    std::printf("\n| d | L | attention() ms | TFLOP/s | portable ms | TFLOP/s | element copies ms | TFLOP/s |\n"
                "|---|---|---|---|---|---|---|---|\n");
    for (int64_t length : lengths)
      for (int d : {64, 80, 96, 128, 256}) mosaic::cuda::run_case({"32/32", length, 32, 32, d}, Mode::head_dims);
    return 0;
  }
  mosaic::cuda::run_case({"check d128 gqa7", 1000, 14, 2, 128}, Mode::check);
  mosaic::cuda::run_case({"check d64", 777, 8, 8, 64}, Mode::check);
  mosaic::cuda::run_case({"check d128 2053 rows", 2053, 4, 4, 128}, Mode::check);
  if (argc > 1 && std::string_view(argv[1]) == "check") return 0;  // the checks only
  for (int64_t length : {4096, 16384, 32768}) {
    mosaic::cuda::run_case({"LLaDA-8B (32/32 x 128)", length, 32, 32, 128}, Mode::time_all);
    mosaic::cuda::run_case({"Dream-7B (28/4 x 128)", length, 28, 4, 128}, Mode::time_all);
  }
  mosaic::cuda::run_case({"d64 (16/16 x 64)", 16384, 16, 16, 64}, Mode::time_all);
  return 0;
}
