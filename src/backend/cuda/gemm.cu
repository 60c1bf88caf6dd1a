// cuBLASLt products C = A B^T (+ bias) with one pinned algorithm per (n, k, c dtype, bias)
// (gemm.h; docs/design/cuda-backend.md, "GEMM").
//
// Row-major to cuBLASLt's column-major: a row-major [r, c] matrix with row stride ld is a
// column-major [c, r] matrix with leading dimension ld, i.e. its transpose. So row-major
// C = A B^T is, column-major, C^T = B A^T:
//   cuBLASLt "A" = the weight B:     column-major [k, n], ld = ldb, op = T  -> [n, k]
//   cuBLASLt "B" = the activation A: column-major [k, m], ld = lda, op = N  -> [k, m]
//   cuBLASLt "D" = C:                column-major [n, m], ld = ldc
// and the epilogue's bias, one value per row of D, is one per output feature n.
#include "backend/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_bit_check.h"
#include "backend/cuda/gemm_choice_log.h"
#include "backend/cuda/small_rows_gemm.h"
#include "mosaic/error.h"

namespace mosaic::cuda {
namespace {

#define MOSAIC_CUBLAS_CHECK(call)                                                              \
  do {                                                                                         \
    const cublasStatus_t mosaic_cublas_status = (call);                                        \
    if (mosaic_cublas_status != CUBLAS_STATUS_SUCCESS) {                                       \
      std::fprintf(stderr, "mosaic: cuBLAS error at %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, \
                   #call, cublasLtGetStatusName(mosaic_cublas_status),                         \
                   cublasLtGetStatusString(mosaic_cublas_status));                             \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

#define GEMM_REQUIRE(cond)                                                                    \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "mosaic: internal error at %s:%d: Gemm: %s\n", __FILE__, __LINE__, \
                   #cond);                                                                    \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

// Heuristic candidates examined per query.
constexpr int kHeuristicCandidates = 16;
// Row buckets: m rounded up to a power of two, at least this.
constexpr int64_t kMinBucketRows = 256;
// The small-rows kernel's first-call timing: alternating rounds, and the fraction of cuBLASLt's
// time it must beat (both compute the same bits, so the choice changes only speed; measured
// gaps are 1.5-4x where it wins and it loses by 10-60 % elsewhere: docs/design/small-rows-gemm.md).
constexpr int kSmallRowsTimedRounds = 3;
constexpr float kSmallRowsRequiredSpeedup = 0.9f;
// Per-call plans kept before the cache starts over (each holds three small layouts).
constexpr size_t kMaxCallPlans = 4096;

// Largest power of two (<= 256, cuBLASLt's default requirement) dividing `value`.
uint32_t alignment_of(uint64_t value) {
  if (value == 0) return 256;
  return static_cast<uint32_t>(std::min<uint64_t>(256, uint64_t{1} << std::countr_zero(value)));
}

uint64_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Adds bias[n] (bf16) to every row of an fp32 C, in fp32: the bias epilogue's arithmetic
// (one rounding of acc + bias), for the f32 output cuBLASLt's epilogue would want an fp32 bias for.
__global__ void add_bias_f32_kernel(int64_t m, int64_t n, float* c, int64_t ldc,
                                    const __nv_bfloat16* __restrict__ bias) {
  const int64_t total = m * n;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / n, col = i - row * n;
    c[row * ldc + col] += __bfloat162float(bias[col]);
  }
}

struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* layout) const {
    if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
  }
};
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;

Layout make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  MOSAIC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                                 static_cast<uint64_t>(cols), ld));
  return Layout(layout);
}

// The three layouts of one call, in cuBLASLt's column-major terms (top of file).
struct Layouts {
  Layout weight, activation, output;
};

Layouts make_layouts(const GemmArgs& args, int64_t m) {
  const cudaDataType_t c_type = args.c_dtype == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
  return {make_layout(CUDA_R_16BF, args.k, args.n, args.ldb),
          make_layout(CUDA_R_16BF, args.k, m, args.lda), make_layout(c_type, args.n, m, args.ldc)};
}

// The pointer alignments a call guarantees, as cuBLASLt heuristics want them. A and C count their
// row stride too: a row chunk starting at row r is at base + r * ld elements.
struct Alignments {
  uint32_t a, b, c, bias;
};

Alignments alignments_of(const GemmArgs& args) {
  const uint64_t c_size = args.c_dtype == DType::f32 ? 4 : 2;
  return {std::min(alignment_of(address(args.a)), alignment_of(uint64_t(args.lda) * 2)),
          alignment_of(address(args.b)),
          std::min(alignment_of(address(args.c)), alignment_of(uint64_t(args.ldc) * c_size)),
          args.bias != nullptr ? alignment_of(address(args.bias)) : 256u};
}

}  // namespace

struct Gemm::Impl {
  // A (n, k, c dtype, bias epilogue): one reference algorithm, whose bits every m computes.
  using PinKey = std::tuple<int64_t, int64_t, DType, bool>;
  // Everything a call's validity and plan depend on.
  using CallKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, DType, bool,
                             uint32_t, uint32_t, uint32_t, uint32_t>;
  struct CallPlan {
    Layouts layouts;
    cublasLtMatmulAlgo_t algo;
  };

  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  uint64_t workspace_bytes = 0;
  cublasLtMatmulDesc_t plain_desc = nullptr;  // D = A B
  cublasLtMatmulDesc_t bias_desc = nullptr;   // D = A B + bias (bf16 bias, bf16 D)
  std::map<PinKey, cublasLtMatmulAlgo_t> pinned;  // the reference (gemm.h)
  // Buckets below kReferenceRows: their own heuristic choice where it has the reference's bits.
  std::map<std::pair<PinKey, int64_t>, cublasLtMatmulAlgo_t> bucket_algorithms;
  std::vector<GemmBucketChoice> bucket_choices;
  std::map<CallKey, CallPlan> plans;
  // Shapes, forms (plain or += C: the kernel's epilogues differ, unlike one cuBLASLt algorithm's
  // beta) and row buckets (64, kSmallRowsMaxRows) whose small-rows product was checked: whether it
  // is used (the reference's bits, and faster).
  std::map<std::tuple<PinKey, bool, int64_t>, bool> small_rows;
  bool small_rows_allowed = true;  // MOSAIC_SMALL_ROWS_GEMM=0: never

  static cublasLtMatmulDesc_t make_desc(bool bias_epilogue) {
    cublasLtMatmulDesc_t desc = nullptr;
    MOSAIC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    MOSAIC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                       &transpose, sizeof(transpose)));
    MOSAIC_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)));
    if (bias_epilogue) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      MOSAIC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                         &epilogue, sizeof(epilogue)));
      const int32_t bias_type = CUDA_R_16BF;
      MOSAIC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                         &bias_type, sizeof(bias_type)));
    }
    return desc;
  }

  // The first acceptable heuristic algorithm for these layouts: no split-K, no reduction pass,
  // workspace within ours. Asserts when cuBLASLt offers none (no product could run at all).
  cublasLtMatmulAlgo_t heuristic_choice(cublasLtMatmulDesc_t desc, const Layouts& layouts,
                                        const Alignments& alignments, const GemmArgs& args,
                                        int64_t m) const {
    cublasLtMatmulPreference_t preference = nullptr;
    MOSAIC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const auto set_u32 = [preference](cublasLtMatmulPreferenceAttributes_t attribute,
                                      uint32_t value) {
      MOSAIC_CUBLAS_CHECK(
          cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)));
    };
    set_u32(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, CUBLASLT_REDUCTION_SCHEME_NONE);
    // cuBLASLt "A" is our B (the weight), "B" our A, C and D both our C.
    set_u32(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignments.b);
    set_u32(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignments.a);
    set_u32(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignments.c);
    set_u32(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignments.c);
    MOSAIC_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace_bytes, sizeof(workspace_bytes)));

    cublasLtMatmulHeuristicResult_t results[kHeuristicCandidates] = {};
    int returned = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle, desc, layouts.weight.get(), layouts.activation.get(), layouts.output.get(),
        layouts.output.get(), preference, kHeuristicCandidates, results, &returned);
    MOSAIC_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(preference));
    if (status != CUBLAS_STATUS_SUCCESS) returned = 0;  // NOT_SUPPORTED: no algorithm at all

    for (int i = 0; i < returned; ++i) {
      const cublasLtMatmulHeuristicResult_t& result = results[i];
      if (result.state != CUBLAS_STATUS_SUCCESS || result.workspaceSize > workspace_bytes) continue;
      int32_t splits = 1;
      uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
      size_t written = 0;
      MOSAIC_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(
          &result.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits), &written));
      MOSAIC_CUBLAS_CHECK(
          cublasLtMatmulAlgoConfigGetAttribute(&result.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                               &reduction, sizeof(reduction), &written));
      if (splits > 1 || reduction != CUBLASLT_REDUCTION_SCHEME_NONE) continue;
      return result.algo;
    }
    std::fprintf(stderr,
                 "mosaic: cuBLASLt offers no split-K-free algorithm for m=%lld n=%lld k=%lld "
                 "(lda=%lld ldb=%lld ldc=%lld, C %s%s, alignments A %u B %u C %u, %llu bytes of "
                 "workspace; heuristic status %s)\n",
                 static_cast<long long>(m), static_cast<long long>(args.n),
                 static_cast<long long>(args.k), static_cast<long long>(args.lda),
                 static_cast<long long>(args.ldb), static_cast<long long>(args.ldc),
                 args.c_dtype == DType::f32 ? "f32" : "bf16", args.bias != nullptr ? ", bias" : "",
                 alignments.a, alignments.b, alignments.c,
                 static_cast<unsigned long long>(workspace_bytes), cublasLtGetStatusName(status));
    std::abort();
  }

  bool runs(cublasLtMatmulDesc_t desc, const Layouts& layouts, const cublasLtMatmulAlgo_t& algo) const {
    cublasLtMatmulHeuristicResult_t check{};
    return cublasLtMatmulAlgoCheck(handle, desc, layouts.weight.get(), layouts.activation.get(),
                                   layouts.output.get(), layouts.output.get(), &algo, &check) ==
               CUBLAS_STATUS_SUCCESS &&
           check.workspaceSize <= workspace_bytes;
  }

  // A bucket below kReferenceRows: cuBLASLt's first choice for it where that computes the
  // reference's bits on this call (its first), else the reference.
  cublasLtMatmulAlgo_t choose_for_bucket(const GemmArgs& args, cublasLtMatmulDesc_t desc,
                                         const Layouts& layouts, const Alignments& alignments,
                                         const PinKey& pin_key, const cublasLtMatmulAlgo_t& reference,
                                         int64_t bucket, cudaStream_t stream) {
    const Layouts representative = make_layouts(args, bucket);
    const cublasLtMatmulAlgo_t own = heuristic_choice(desc, representative, alignments, args, bucket);
    GemmBucketChoice choice;
    std::tie(choice.n, choice.k, choice.c_dtype, choice.bias) = pin_key;
    choice.bucket = bucket;
    choice.own_choice_differs = std::memcmp(&own, &reference, sizeof(own)) != 0;
    if (choice.own_choice_differs && runs(desc, layouts, own) && runs(desc, layouts, reference)) {
      BitCheckCall call;
      call.handle = handle, call.desc = desc, call.args = args;
      call.weight = layouts.weight.get(), call.activation = layouts.activation.get();
      call.output = layouts.output.get();
      call.workspace = workspace, call.workspace_bytes = workspace_bytes, call.stream = stream;
      choice.same_bits = same_bits_on_call(call, reference, own);
    }
    log_bucket_choice(choice);
    bucket_choices.push_back(choice);
    return choice.uses_own_choice() ? own : reference;
  }

  // The plan of one call shape: its bucket's algorithm (above) when cuBLASLt accepts it for this
  // m (the normal case), else the reference; when neither runs, this shape's own heuristic
  // choice, with a note.
  const CallPlan& plan_for(const GemmArgs& args, cublasLtMatmulDesc_t desc, bool bias_epilogue,
                           cudaStream_t stream) {
    const Alignments alignments = alignments_of(args);
    const CallKey key{args.m,       args.n,       args.k,       args.lda,
                      args.ldb,     args.ldc,     args.c_dtype, bias_epilogue,
                      alignments.a, alignments.b, alignments.c, alignments.bias};
    if (auto found = plans.find(key); found != plans.end()) return found->second;
    if (plans.size() >= kMaxCallPlans) plans.clear();

    const PinKey pin_key{args.n, args.k, args.c_dtype, bias_epilogue};
    auto pin = pinned.find(pin_key);
    if (pin == pinned.end()) {
      const Layouts representative = make_layouts(args, kReferenceRows);
      pin = pinned
                .emplace(pin_key, heuristic_choice(desc, representative, alignments, args, kReferenceRows))
                .first;
    }
    const int64_t bucket = static_cast<int64_t>(
        std::bit_ceil(static_cast<uint64_t>(std::max(args.m, kMinBucketRows))));

    Layouts layouts = make_layouts(args, args.m);
    cublasLtMatmulAlgo_t algo = pin->second;
    if (bucket < kReferenceRows) {
      // While the stream is captured the check cannot run: the reference, and the bucket is
      // decided at its first direct call.
      auto found = bucket_algorithms.find({pin_key, bucket});
      if (found == bucket_algorithms.end() && bit_check_possible(stream)) {
        found = bucket_algorithms
                    .emplace(std::pair{pin_key, bucket},
                             choose_for_bucket(args, desc, layouts, alignments, pin_key, pin->second,
                                               bucket, stream))
                    .first;
      }
      if (found != bucket_algorithms.end() && runs(desc, layouts, found->second)) {
        return plans.emplace(key, CallPlan{std::move(layouts), found->second}).first->second;
      }
    }
    if (!runs(desc, layouts, algo)) {
      std::fprintf(
          stderr,
          "mosaic: note: the pinned cuBLASLt algorithm for n=%lld k=%lld does not run "
          "m=%lld lda=%lld ldc=%lld (alignments A %u C %u); this shape gets its own "
          "algorithm, so its rows may differ in the last bits from other row chunks\n",
          static_cast<long long>(args.n), static_cast<long long>(args.k),
          static_cast<long long>(args.m), static_cast<long long>(args.lda),
          static_cast<long long>(args.ldc), alignments.a, alignments.c);
      algo = heuristic_choice(desc, layouts, alignments, args, args.m);
    }
    return plans.emplace(key, CallPlan{std::move(layouts), algo}).first->second;
  }
};

Gemm::Gemm(uint64_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  MOSAIC_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  if (workspace_bytes > 0) {
    const cudaError_t status = cudaMalloc(&impl_->workspace, workspace_bytes);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      cublasLtDestroy(impl_->handle);
      throw Error("cuBLASLt workspace of " + std::to_string(workspace_bytes >> 20) +
                  " MiB does not fit on the device: " + cudaGetErrorString(status));
    }
  }
  impl_->workspace_bytes = workspace_bytes;
  impl_->plain_desc = Impl::make_desc(false);
  impl_->bias_desc = Impl::make_desc(true);
  const char* small_rows_setting = std::getenv("MOSAIC_SMALL_ROWS_GEMM");
  impl_->small_rows_allowed = small_rows_setting == nullptr || std::strcmp(small_rows_setting, "0") != 0;
}

Gemm::~Gemm() {
  // Destructors never throw or abort: errors here are ignored.
  impl_->plans.clear();
  if (impl_->plain_desc != nullptr) cublasLtMatmulDescDestroy(impl_->plain_desc);
  if (impl_->bias_desc != nullptr) cublasLtMatmulDescDestroy(impl_->bias_desc);
  if (impl_->workspace != nullptr) cudaFree(impl_->workspace);
  if (impl_->handle != nullptr) cublasLtDestroy(impl_->handle);
}

uint64_t Gemm::workspace_bytes() const { return impl_->workspace_bytes; }

const std::vector<GemmBucketChoice>& Gemm::bucket_choices() const { return impl_->bucket_choices; }

void Gemm::run(const GemmArgs& args, cudaStream_t stream) {
  GEMM_REQUIRE(args.m >= 0 && args.n > 0 && args.k > 0);
  GEMM_REQUIRE(args.c_dtype == DType::bf16 || args.c_dtype == DType::f32);
  GEMM_REQUIRE(args.lda >= args.k && args.ldb >= args.k && args.ldc >= args.n);
  // The graph never asks for both; the order of the two additions would otherwise be a choice.
  GEMM_REQUIRE(!(args.accumulate && args.bias != nullptr));
  if (args.m == 0) return;
  GEMM_REQUIRE(args.a != nullptr && args.b != nullptr && args.c != nullptr);

  // bf16 output: the bias rides in the epilogue (bf16 bias = D's type, as cuBLASLt requires; one
  // rounding of acc + bias, as PyTorch's addmm). f32 output: cuBLASLt would want an f32 bias, so
  // the bias is added by a small kernel instead, with the same fp32 arithmetic.
  const bool bias_epilogue = args.bias != nullptr && args.c_dtype == DType::bf16;
  cublasLtMatmulDesc_t desc = bias_epilogue ? impl_->bias_desc : impl_->plain_desc;
  if (bias_epilogue) {
    // Before planning: the heuristics read the pointer's alignment.
    MOSAIC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &args.bias, sizeof(args.bias)));
  }
  // beta does not enter the algorithm choice: one pinned algorithm serves both forms. With beta = 1
  // cuBLASLt reads C and writes D = A B + C in place (C and D share pointer and layout).
  const Impl::CallPlan& plan = impl_->plan_for(args, desc, bias_epilogue, stream);
  const float alpha = 1.0f, beta = args.accumulate ? 1.0f : 0.0f;
  const auto matmul = [&] {
    return cublasLtMatmul(impl_->handle, desc, &alpha, args.b, plan.layouts.weight.get(), args.a,
                          plan.layouts.activation.get(), &beta, args.c, plan.layouts.output.get(), args.c,
                          plan.layouts.output.get(), &plan.algo, impl_->workspace, impl_->workspace_bytes, stream);
  };
  if (impl_->small_rows_allowed && small_rows_gemm_fits(args) && small_rows_gemm_available()) {
    const Impl::PinKey pin_key{args.n, args.k, args.c_dtype, bias_epilogue};
    const int64_t bucket = args.m <= 64 ? 64 : kSmallRowsMaxRows;
    const std::tuple<Impl::PinKey, bool, int64_t> small_rows_key{pin_key, args.accumulate, bucket};
    auto found = impl_->small_rows.find(small_rows_key);
    if (found == impl_->small_rows.end() && bit_check_possible(stream)) {
      // The plan's algorithm computes the reference's bits (plan_for), so it stands for the reference.
      GemmBucketChoice choice;
      std::tie(choice.n, choice.k, choice.c_dtype, choice.bias) = pin_key;
      choice.bucket = bucket, choice.own_choice_differs = true, choice.small_rows_kernel = true;
      choice.accumulate = args.accumulate;
      const RunComparison comparison = compare_runs(
          args, stream, [&] { return matmul() == CUBLAS_STATUS_SUCCESS; },
          [&] {
            small_rows_gemm(args, stream);
            return true;
          },
          kSmallRowsTimedRounds);
      choice.same_bits = comparison.same_bits;
      choice.reference_ms = comparison.reference_ms, choice.candidate_ms = comparison.candidate_ms;
      choice.faster = choice.same_bits && comparison.candidate_ms < kSmallRowsRequiredSpeedup * comparison.reference_ms;
      log_bucket_choice(choice);
      impl_->bucket_choices.push_back(choice);
      found = impl_->small_rows.emplace(small_rows_key, choice.uses_own_choice()).first;
    }
    if (found != impl_->small_rows.end() && found->second) {
      small_rows_gemm(args, stream);
      return;
    }
  }
  MOSAIC_CUBLAS_CHECK(matmul());
  if (args.bias != nullptr && !bias_epilogue) {
    constexpr int kThreads = 256;
    const int blocks =
        static_cast<int>(std::min<int64_t>((args.m * args.n + kThreads - 1) / kThreads, 8192));
    add_bias_f32_kernel<<<blocks, kThreads, 0, stream>>>(
        args.m, args.n, static_cast<float*>(args.c), args.ldc,
        static_cast<const __nv_bfloat16*>(args.bias));
    MOSAIC_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace mosaic::cuda
