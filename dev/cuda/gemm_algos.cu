// Workbench: how fast is each split-K-free cuBLASLt algorithm the heuristic offers for the
// step's GEMM shapes, against the one the engine pins (the heuristic's first acceptable one)?
//
// The calls mirror backend/cuda/gemm.cu: C[m, n] = A[m, k] W[n, k]^T, bf16 in, fp32 compute,
// bf16 (or fp32) out, optional bf16 bias epilogue, optional beta = 1 (the residual add).
// Every candidate runs the same product; the output of each is compared with candidate 0's
// (0 differing elements means the same accumulation order).
//
//   nvcc -std=c++20 -arch=sm_90a -O3 dev/cuda/gemm_algos.cu -lcublasLt -o /tmp/gemm_algos
//   /tmp/gemm_algos            # every shape, two rounds
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK_CUDA(x)                                                                 \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
#define CHECK_BLAS(x)                                                                        \
  do {                                                                                       \
    cublasStatus_t status_ = (x);                                                                  \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                                     \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cublasLtGetStatusName(status_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

namespace {

struct Shape {
  const char* name;
  long long m, n, k;
  bool f32_out, bias, accumulate;
};

__global__ void fill(__nv_bfloat16* p, size_t count, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u ^ seed;
    x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
    p[i] = __float2bfloat16(scale * (float(x & 0xffff) / 32768.0f - 1.0f));
  }
}

__global__ void count_differences(const unsigned short* x, const unsigned short* y, size_t count,
                                  unsigned long long* differences) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    local += x[i] != y[i];
  if (local) atomicAdd(differences, local);
}

int attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t which) {
  int value = -1;
  size_t written = 0;
  uint32_t v32 = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, which, &v32, sizeof(v32), &written) ==
      CUBLAS_STATUS_SUCCESS)
    value = int(v32);
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 2;
  std::vector<Shape> shapes;
  for (long long L : {4096LL, 32768LL}) {
    auto add = [&](const char* name, long long m, long long n, long long k, bool f32, bool bias,
                   bool acc) { shapes.push_back({name, m, n, k, f32, bias, acc}); };
    add("llada q/k/v", L, 4096, 4096, false, false, false);
    add("llada k+v", L, 8192, 4096, false, false, false);
    add("llada o (+x)", L, 4096, 4096, false, false, true);
    add("llada gate/up", L, 12288, 4096, false, false, false);
    add("llada down (+x)", L, 4096, 12288, false, false, true);
    add("llada head chunk", L / 2, 4096, 4096, true, false, false);
    add("llada head 16k", L / 2, 16384, 4096, true, false, false);
    add("dream q (bias)", L, 3584, 3584, false, true, false);
    add("dream k/v (bias)", L, 512, 3584, false, true, false);
    add("dream o (+x)", L, 3584, 3584, false, false, true);
    add("dream gate/up", L, 18944, 3584, false, false, false);
    add("dream down (+x)", L, 3584, 18944, false, false, true);
  }

  cublasLtHandle_t handle;
  CHECK_BLAS(cublasLtCreate(&handle));
  const size_t workspace_bytes = size_t{32} << 20;
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
  size_t max_a = 0, max_w = 0, max_c = 0;
  for (const Shape& s : shapes) {
    max_a = std::max(max_a, size_t(s.m * s.k)), max_w = std::max(max_w, size_t(s.n * s.k));
    max_c = std::max(max_c, size_t(s.m * s.n) * (s.f32_out ? 4 : 2));
  }
  __nv_bfloat16 *a, *w, *bias;
  void *c, *c_ref;
  CHECK_CUDA(cudaMalloc(&a, max_a * 2));
  CHECK_CUDA(cudaMalloc(&w, max_w * 2));
  CHECK_CUDA(cudaMalloc(&bias, 32768 * 2));
  CHECK_CUDA(cudaMalloc(&c, max_c));
  CHECK_CUDA(cudaMalloc(&c_ref, max_c));
  fill<<<1024, 256>>>(a, max_a, 1, 1.0f);
  fill<<<1024, 256>>>(w, max_w, 2, 0.02f);
  fill<<<64, 256>>>(bias, 32768, 3, 0.1f);
  CHECK_CUDA(cudaDeviceSynchronize());
  unsigned long long* differences;
  CHECK_CUDA(cudaMalloc(&differences, sizeof(unsigned long long)));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  std::printf("shape | m n k | cand | tile stages cluster swizzle custom | ms | TFLOP/s | vs first | differing 16-bit halves\n");
  for (int round = 0; round < rounds; ++round) {
    for (const Shape& s : shapes) {
      cublasLtMatmulDesc_t desc;
      CHECK_BLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
      CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
      CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)));
      if (s.bias) {
        const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
        CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
        const int32_t bt = CUDA_R_16BF;
        CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
        CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
      }
      const cudaDataType_t ct = s.f32_out ? CUDA_R_32F : CUDA_R_16BF;
      cublasLtMatrixLayout_t lw, la, lc;
      CHECK_BLAS(cublasLtMatrixLayoutCreate(&lw, CUDA_R_16BF, s.k, s.n, s.k));
      CHECK_BLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k, s.m, s.k));
      CHECK_BLAS(cublasLtMatrixLayoutCreate(&lc, ct, s.n, s.m, s.n));
      cublasLtMatmulPreference_t pref;
      CHECK_BLAS(cublasLtMatmulPreferenceCreate(&pref));
      CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes, sizeof(workspace_bytes)));
      constexpr int kCandidates = 32;
      cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
      int returned = 0;
      CHECK_BLAS(cublasLtMatmulAlgoGetHeuristic(handle, desc, lw, la, lc, lc, pref, kCandidates,
                                                results, &returned));
      const size_t c_bytes = size_t(s.m * s.n) * (s.f32_out ? 4 : 2);
      const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
      const double flop = 2.0 * s.m * s.n * s.k;
      double first_ms = 0;
      int index = 0;
      for (int i = 0; i < returned; ++i) {
        const auto& r = results[i];
        if (r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > workspace_bytes) continue;
        if (attr(r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) > 1) continue;
        if (attr(r.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) > 0) continue;
        auto call = [&] {
          CHECK_BLAS(cublasLtMatmul(handle, desc, &alpha, w, lw, a, la, &beta, c, lc, c, lc, &r.algo,
                                    workspace, workspace_bytes, 0));
        };
        // Output for the comparison: from zeros, one call.
        CHECK_CUDA(cudaMemset(c, 0, c_bytes));
        call();
        long long diff = 0;
        if (index == 0) {
          CHECK_CUDA(cudaMemcpy(c_ref, c, c_bytes, cudaMemcpyDeviceToDevice));
        } else {
          CHECK_CUDA(cudaMemset(differences, 0, sizeof(unsigned long long)));
          count_differences<<<1024, 256>>>(static_cast<const unsigned short*>(c),
                                           static_cast<const unsigned short*>(c_ref), c_bytes / 2,
                                           differences);
          unsigned long long host = 0;
          CHECK_CUDA(cudaMemcpy(&host, differences, sizeof(host), cudaMemcpyDeviceToHost));
          diff = static_cast<long long>(host);  // 16-bit halves that differ
        }
        const int reps = std::max(3, int(2e12 / flop));  // ~2-3 ms of work at least... capped below
        const int n_reps = std::min(reps, 50);
        for (int j = 0; j < 3; ++j) call();
        CHECK_CUDA(cudaEventRecord(start));
        for (int j = 0; j < n_reps; ++j) call();
        CHECK_CUDA(cudaEventRecord(stop));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        ms /= n_reps;
        if (index == 0) first_ms = ms;
        std::printf("r%d %s | %lld %lld %lld | %d | %d %d %d %d %d | %.4f | %.0f | %+.1f%% | %lld\n",
                    round, s.name, s.m, s.n, s.k, i, attr(r.algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                    attr(r.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                    attr(r.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
                    attr(r.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                    attr(r.algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), ms, flop / ms / 1e9,
                    100.0 * (ms / first_ms - 1.0), diff);
        std::fflush(stdout);
        ++index;
      }
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(lw), cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(desc);
    }
  }
  return 0;
}
