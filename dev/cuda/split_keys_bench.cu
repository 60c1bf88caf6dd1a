// Workbench of the split-keys attention (src/backend/cuda/attention_split_keys_sm90.cu): few query
// rows against many keys, the shapes of cached steps. Per shape, ms per call with the K/V cold
// (rotating over copies that together exceed L2) for attention() without splits (the Hopper
// kernel, one CTA per query tile and head), and the split-keys kernel with rings of 2, 3 and 4
// stages; and the largest difference of the split output from the unsplit one.
//
//   nvcc -std=c++20 -arch=sm_90a -O3 --expt-relaxed-constexpr -I. -Isrc -Iinclude dev/cuda/split_keys_bench.cu \
//        src/backend/cuda/attention.cu src/backend/cuda/attention_sm90.cu src/backend/cuda/tensor_map.cc \
//        -lcuda -o /tmp/split_keys_bench && /tmp/split_keys_bench
#include "src/backend/cuda/attention_split_keys_sm90.cu"

#include <cstdio>
#include <random>
#include <vector>

#include "core/half.h"
#include "dev/cuda/bench_timing.cuh"

using namespace mosaic;
using namespace mosaic::cuda;

namespace {

struct Shape {
  const char* name;
  int64_t sequences, rows, keys, heads, kv_heads;
};

struct Buffers {
  void* q = nullptr;
  void* kv = nullptr;  // [copies][sequences * keys][2 * kv_heads * 128]: K then V of a row
  void* out = nullptr;
  AttentionSegment* segments = nullptr;
};

}  // namespace

int main() {
  const Shape shapes[] = {
      {"LLaDA-8B, 32 rows x 4,096 keys", 1, 32, 4096, 32, 32},
      {"LLaDA-8B, 32 rows x 32,768 keys", 1, 32, 32768, 32, 32},
      {"LLaDA-8B, 96 rows x 2,048 keys", 1, 96, 2048, 32, 32},
      {"LLaDA-8B, 16 x 32 rows x 4,096 keys", 16, 32, 4096, 32, 32},
      {"LLaDA2-mini, 32 rows x 4,096 keys", 1, 32, 4096, 16, 4},
  };
  std::printf("| shape | unsplit ms | split 2 stages | split 3 | split 4 | max |split - unsplit| |\n|---|---:|---:|---:|---:|---:|\n");
  for (const Shape& shape : shapes) {
    const int64_t d = 128, kv_width = 2 * shape.kv_heads * d, q_width = shape.heads * d;
    const int64_t kv_rows = shape.sequences * shape.keys, q_rows = shape.sequences * shape.rows;
    const int64_t kv_bytes = kv_rows * kv_width * 2;
    const int copies = static_cast<int>(std::max<int64_t>(2, (512ll << 20) / kv_bytes + 1));
    Buffers b;
    MOSAIC_CUDA_CHECK(cudaMalloc(&b.q, q_rows * q_width * 2));
    MOSAIC_CUDA_CHECK(cudaMalloc(&b.kv, kv_bytes * copies));
    MOSAIC_CUDA_CHECK(cudaMalloc(&b.out, q_rows * q_width * 2));
    MOSAIC_CUDA_CHECK(cudaMalloc(&b.segments, shape.sequences * sizeof(AttentionSegment) * 2));
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<uint16_t> host(static_cast<size_t>(std::max(q_rows * q_width, kv_rows * kv_width)));
    for (uint16_t& x : host) x = f32_to_bf16(dist(rng));
    MOSAIC_CUDA_CHECK(cudaMemcpy(b.q, host.data(), q_rows * q_width * 2, cudaMemcpyHostToDevice));
    for (int c = 0; c < copies; ++c)
      MOSAIC_CUDA_CHECK(cudaMemcpy(static_cast<char*>(b.kv) + c * kv_bytes, host.data(), kv_bytes, cudaMemcpyHostToDevice));
    // Segments: [0, n) unsplit, [n, 2n) split into parts of 1,024 keys (2 to 8): the parts the
    // design note measured, where the engine's rule (attention_key_splits) splits only contexts of
    // >= 8,192 keys into parts of >= 4,096 and would leave most of these shapes unsplit.
    const int64_t parts = std::clamp<int64_t>(shape.keys / 1024, 2, kMaxKeySplits);
    std::vector<AttentionSegment> segments;
    for (int split = 0; split < 2; ++split) {
      for (int64_t s = 0; s < shape.sequences; ++s)
        segments.push_back({s * shape.rows, shape.rows, s * shape.keys, shape.keys, -1, split ? parts : 0});
    }
    MOSAIC_CUDA_CHECK(cudaMemcpy(b.segments, segments.data(), segments.size() * sizeof(AttentionSegment),
                                 cudaMemcpyHostToDevice));
    int copy = 0;
    auto args_for = [&](bool split) {
      AttentionArgs args;
      const auto* kv = static_cast<const uint16_t*>(b.kv) + (copy++ % copies) * (kv_bytes / 2);
      args.q = b.q, args.q_stride = q_width;
      args.k = kv, args.k_stride = kv_width;
      args.v = kv + shape.kv_heads * d, args.v_stride = kv_width;
      args.out = b.out, args.out_stride = q_width;
      args.q_heads = shape.heads, args.kv_heads = shape.kv_heads, args.head_dim = d;
      args.scale = 1.0f / std::sqrt(128.0f);
      args.segments = b.segments + (split ? shape.sequences : 0), args.segment_count = shape.sequences;
      const auto n = static_cast<size_t>(shape.sequences);
      summarize_segments(args, std::span(segments).subspan(split ? n : 0, n));
      return args;
    };
    auto output = [&] {
      std::vector<uint16_t> out(q_rows * q_width);
      MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
      MOSAIC_CUDA_CHECK(cudaMemcpy(out.data(), b.out, out.size() * 2, cudaMemcpyDeviceToHost));
      return out;
    };
    copy = 0;
    attention(args_for(false), nullptr);
    const std::vector<uint16_t> unsplit = output();
    copy = 0;
    launch<3>(args_for(true), nullptr);
    const std::vector<uint16_t> split = output();
    double worst = 0;
    for (size_t i = 0; i < split.size(); ++i)
      worst = std::max(worst, std::abs(double{bf16_to_f32(split[i])} - bf16_to_f32(unsplit[i])));
    const int repeats = 50;
    const float t_unsplit = time_ms([&] { attention(args_for(false), nullptr); }, repeats, 5);
    const float t2 = time_ms([&] { launch<2>(args_for(true), nullptr); }, repeats, 5);
    const float t3 = time_ms([&] { launch<3>(args_for(true), nullptr); }, repeats, 5);
    const float t4 = time_ms([&] { launch<4>(args_for(true), nullptr); }, repeats, 5);
    const float t_in_turn = time_ms([&] {
      AttentionArgs args = args_for(true);
      args.split_keys = AttentionSplitKeys::in_turn;
      launch<3>(args, nullptr);
    }, repeats, 5);
    const float t_clusters = time_ms([&] {
      AttentionArgs args = args_for(true);
      args.split_keys = AttentionSplitKeys::clusters;
      launch<3>(args, nullptr);
    }, repeats, 5);
    std::printf("|   3 stages: clusters %.4f, parts in turn on one CTA %.4f (automatic: %s) |\n", t_clusters, t_in_turn,
                parts_in_turn(args_for(true), (shape.rows + 63) / 64) ? "in turn" : "clusters");
    const float p1 = time_ms([&] { launch<3, 1>(args_for(true), nullptr); }, repeats, 5);
    const float p2 = time_ms([&] { launch<3, 2>(args_for(true), nullptr); }, repeats, 5);
    std::printf("|   probes (3 stages): without the merge %.4f, without merge and math %.4f |\n", p1, p2);
    const double gb = static_cast<double>(kv_bytes) / 1e9;
    std::printf("| %s (%.0f MB of K/V) | %.4f | %.4f | %.4f | %.4f | %.4f |\n", shape.name, gb * 1e3, t_unsplit, t2, t3,
                t4, worst);
    std::printf("|   read at, TB/s | %.2f | %.2f | %.2f | %.2f | |\n", gb / t_unsplit, gb / t2, gb / t3, gb / t4);
    cudaFree(b.q), cudaFree(b.kv), cudaFree(b.out), cudaFree(b.segments);
  }
  return 0;
}
