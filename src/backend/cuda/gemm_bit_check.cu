// Comparing two cuBLASLt algorithms' outputs on one call (gemm_bit_check.h).
#include "backend/cuda/gemm_bit_check.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace mosaic::cuda {
namespace {

__device__ uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27, x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// An order-independent hash of rows x halves 16-bit values (row stride `stride` halves): the
// sum of mix(position, value).
__global__ void hash_halves_kernel(const uint16_t* __restrict__ c, int64_t rows, int64_t halves,
                                   int64_t stride, unsigned long long* out) {
  unsigned long long local = 0;
  const int64_t total = rows * halves;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / halves, col = i - row * halves;
    local += mix64((static_cast<uint64_t>(i) << 16) | c[row * stride + col]);
  }
  for (int offset = 16; offset > 0; offset /= 2) local += __shfl_down_sync(0xffffffffu, local, offset);
  if ((threadIdx.x & 31) == 0 && local != 0) atomicAdd(out, local);
}

}  // namespace

bool bit_check_possible(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return status == cudaStreamCaptureStatusNone;
}

RunComparison compare_runs(const GemmArgs& args, cudaStream_t stream, const std::function<bool()>& reference,
                           const std::function<bool()>& candidate, int timed_rounds) {
  RunComparison result;
  if (args.m <= 0) return result;
  const size_t c_size = args.c_dtype == DType::f32 ? 4 : 2;
  const size_t c_span = (static_cast<size_t>(args.m - 1) * args.ldc + args.n) * c_size;
  std::vector<unsigned char> saved;  // C before the call, when the call adds into it
  if (args.accumulate) {
    saved.resize(c_span);
    MOSAIC_CUDA_CHECK(cudaMemcpyAsync(saved.data(), args.c, c_span, cudaMemcpyDeviceToHost, stream));
    MOSAIC_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  const auto restore = [&] {
    if (args.accumulate) {
      MOSAIC_CUDA_CHECK(cudaMemcpyAsync(args.c, saved.data(), c_span, cudaMemcpyHostToDevice, stream));
    }
  };

  unsigned long long* hash_device = nullptr;
  MOSAIC_CUDA_CHECK(cudaMalloc(&hash_device, sizeof(unsigned long long)));
  // The product of `run` from C as the call found it, hashed; false when it could not run.
  const auto hash_of = [&](const std::function<bool()>& run, unsigned long long* hash) {
    restore();
    if (!run()) return false;
    MOSAIC_CUDA_CHECK(cudaMemsetAsync(hash_device, 0, sizeof(unsigned long long), stream));
    const int64_t halves = args.n * static_cast<int64_t>(c_size) / 2;
    const int64_t stride = args.ldc * static_cast<int64_t>(c_size) / 2;
    const int64_t blocks = std::min<int64_t>((args.m * halves + 255) / 256, 2048);
    hash_halves_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
        static_cast<const uint16_t*>(args.c), args.m, halves, stride, hash_device);
    MOSAIC_CUDA_CHECK_LAUNCH();
    MOSAIC_CUDA_CHECK(cudaMemcpyAsync(hash, hash_device, sizeof(*hash), cudaMemcpyDeviceToHost, stream));
    MOSAIC_CUDA_CHECK(cudaStreamSynchronize(stream));
    return true;
  };
  // The candidate first, so that a plain product ends holding the reference's output.
  unsigned long long candidate_hash = 0, reference_hash = 0;
  result.same_bits = hash_of(candidate, &candidate_hash) && hash_of(reference, &reference_hash) &&
                     candidate_hash == reference_hash;
  if (result.same_bits && timed_rounds > 0) {
    constexpr int kRunsPerRound = 3;
    cudaEvent_t start = nullptr, stop = nullptr;
    MOSAIC_CUDA_CHECK(cudaEventCreate(&start));
    MOSAIC_CUDA_CHECK(cudaEventCreate(&stop));
    const auto time_round = [&](const std::function<bool()>& run) {
      MOSAIC_CUDA_CHECK(cudaEventRecord(start, stream));
      for (int i = 0; i < kRunsPerRound; ++i) (void)run();
      MOSAIC_CUDA_CHECK(cudaEventRecord(stop, stream));
      MOSAIC_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      MOSAIC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      return ms / kRunsPerRound;
    };
    result.reference_ms = result.candidate_ms = 1e30f;
    for (int round = 0; round < timed_rounds; ++round) {
      result.reference_ms = std::min(result.reference_ms, time_round(reference));
      result.candidate_ms = std::min(result.candidate_ms, time_round(candidate));
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  restore();
  MOSAIC_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaFree(hash_device);
  return result;
}

bool same_bits_on_call(const BitCheckCall& call, const cublasLtMatmulAlgo_t& reference,
                       const cublasLtMatmulAlgo_t& candidate) {
  const GemmArgs& args = call.args;
  const float alpha = 1.0f, beta = args.accumulate ? 1.0f : 0.0f;
  const auto run = [&](const cublasLtMatmulAlgo_t& algo) {
    return [&call, &args, &alpha, &beta, &algo] {
      return cublasLtMatmul(call.handle, call.desc, &alpha, args.b, call.weight, args.a, call.activation, &beta,
                            args.c, call.output, args.c, call.output, &algo, call.workspace,
                            call.workspace_bytes, call.stream) == CUBLAS_STATUS_SUCCESS;
    };
  };
  return compare_runs(args, call.stream, run(reference), run(candidate)).same_bits;
}

}  // namespace mosaic::cuda
