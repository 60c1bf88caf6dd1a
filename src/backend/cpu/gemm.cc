// fp32 NT GEMM in dot-product form: B is packed panel by panel into fp32, and one register-tiled
// micro-kernel computes every element of C. docs/design/cpu-gemm.md explains the choices.
//
// Per element C[i, n] (the determinism contract of gemm.h), with K8 = K rounded down to 8:
//   1. lane l in 0..7 starts at +0 and accumulates fma(A[i, k], B[n, k], lane) for k = l, l+8, ...
//      below K8, in increasing k;
//   2. the lanes are summed by one fixed tree: ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7));
//   3. the tail k in [K8, K) is added in increasing k, each with fma(A[i, k], B[n, k], sum);
//   4. bias[n], when given, is added last;
//   5. with `accumulate`, the result is added to the C[i, n] already there (C + result, once).
// Edge tiles are not special-cased: a partial tile repeats its last valid A row and zero-pads its
// missing B columns, runs the one full-size kernel, and stores only the valid elements. Every
// element therefore goes through the same instructions wherever it falls.
#include "backend/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/widen.h"
#include "core/error.h"

#if defined(__AVX2__) && defined(__FMA__)
#define MOSAIC_GEMM_AVX2 1
#include <immintrin.h>
#else
#define MOSAIC_GEMM_AVX2 0
#endif

namespace mosaic::cpu {
namespace {

constexpr int64_t kLanes = 8;  // accumulation lanes per element (one AVX2 register)
constexpr int kTileRows = 4;   // rows of A per micro-kernel tile (MR)
constexpr int kTileCols = 3;   // rows of B ("columns" of C) per packed panel (NR)

// ---- 8 lanes of fp32: AVX2 registers, or a portable array with the same arithmetic ----------

#if MOSAIC_GEMM_AVX2
using Lanes = __m256;
inline Lanes lanes_zero() { return _mm256_setzero_ps(); }
inline Lanes lanes_load(const float* p) { return _mm256_loadu_ps(p); }
inline Lanes lanes_fma(Lanes a, Lanes b, Lanes acc) { return _mm256_fmadd_ps(a, b, acc); }
inline void lanes_store(float* p, Lanes x) { _mm256_storeu_ps(p, x); }
#else
struct Lanes {
  float lane[kLanes];
};
inline Lanes lanes_zero() { return Lanes{}; }
inline Lanes lanes_load(const float* p) {
  Lanes x;
  std::memcpy(x.lane, p, sizeof(x.lane));
  return x;
}
inline Lanes lanes_fma(Lanes a, Lanes b, Lanes acc) {
  for (int l = 0; l < kLanes; ++l) acc.lane[l] = std::fma(a.lane[l], b.lane[l], acc.lane[l]);
  return acc;
}
inline void lanes_store(float* p, Lanes x) { std::memcpy(p, x.lane, sizeof(x.lane)); }
#endif

// Step 2 of the contract for four accumulators at once: sums[i] = reduce(x_i) with the tree
//   ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
// The AVX2 version performs the same additions on the same operands as the scalar one (it only
// moves lanes between them), so the two agree bitwise.
#if MOSAIC_GEMM_AVX2
inline void reduce_lanes4(Lanes x0, Lanes x1, Lanes x2, Lanes x3, float sums[4]) {
  // p_l = l + l+4 for l < 4; two accumulators per register: [x0 p0..p3 | x1 p0..p3].
  const __m256 p01 = _mm256_add_ps(_mm256_permute2f128_ps(x0, x1, 0x20),
                                   _mm256_permute2f128_ps(x0, x1, 0x31));
  const __m256 p23 = _mm256_add_ps(_mm256_permute2f128_ps(x2, x3, 0x20),
                                   _mm256_permute2f128_ps(x2, x3, 0x31));
  // q = [p0+p2, p1+p3] per accumulator: [x0 q0 q1, x2 q0 q1 | x1 q0 q1, x3 q0 q1].
  const __m256 q = _mm256_add_ps(_mm256_shuffle_ps(p01, p23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(p01, p23, _MM_SHUFFLE(3, 2, 3, 2)));
  // q0 + q1: [x0, x2, x0, x2 | x1, x3, x1, x3].
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(q, q, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(q, q, _MM_SHUFFLE(3, 1, 3, 1)));
  _mm_storeu_ps(sums, _mm_unpacklo_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1)));
}
#else
inline float reduce_lanes(const Lanes& x) {
  const float* l = x.lane;
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}
inline void reduce_lanes4(Lanes x0, Lanes x1, Lanes x2, Lanes x3, float sums[4]) {
  sums[0] = reduce_lanes(x0), sums[1] = reduce_lanes(x1);
  sums[2] = reduce_lanes(x2), sums[3] = reduce_lanes(x3);
}
#endif

// ---- packing: kTileCols rows of B -> one fp32 panel ------------------------------------------
//
// Panel layout for K8 = k / 8 * 8 (all fp32, kTileCols * k elements):
//   [K8 / 8][kTileCols][8]   the vector part, in the order the micro-kernel reads it
//   [kTileCols][k - K8]      the scalar tail
// Columns past the end of B are zero (their results are never stored).

template <DType kDtype>
void pack_panel(const GemmArgs& args, int64_t col_begin, float* panel) {
  const int64_t k = args.k, k8 = k / kLanes * kLanes, tail = k - k8;
  if (k == 0) return;  // an empty panel (and possibly a null buffer)
  const int64_t valid_cols = std::min<int64_t>(kTileCols, args.n - col_begin);
  constexpr int64_t elem_size = kDtype == DType::f32 ? 4 : 2;
  for (int64_t j = 0; j < kTileCols; ++j) {
    float* tail_out = panel + k8 * kTileCols + j * tail;
    if (j >= valid_cols) {
      for (int64_t kb = 0; kb < k8; kb += kLanes) {
        std::memset(panel + kb * kTileCols + j * kLanes, 0, kLanes * sizeof(float));
      }
      std::memset(tail_out, 0, tail * sizeof(float));
      continue;
    }
    const char* row = static_cast<const char*>(args.b) + (col_begin + j) * args.ldb * elem_size;
    for (int64_t kb = 0; kb < k8; kb += kLanes) {
      widen_to_f32<kDtype>(row + kb * elem_size, kLanes, panel + kb * kTileCols + j * kLanes);
    }
    widen_to_f32<kDtype>(row + k8 * elem_size, tail, tail_out);
  }
}

// ---- the micro-kernel ------------------------------------------------------------------------

// out[r][j] = dot(a_rows[r], panel column j) + bias[j], following steps 1-4 of the contract.
// bias is kTileCols long (zero-padded) or null.
void dot_tile(int64_t k, const float* const* a_rows, const float* panel, const float* bias,
              float out[kTileRows][kTileCols]) {
  const int64_t k8 = k / kLanes * kLanes;
  Lanes acc[kTileRows][kTileCols];
  for (int r = 0; r < kTileRows; ++r)
    for (int j = 0; j < kTileCols; ++j) acc[r][j] = lanes_zero();

  const float* b = panel;
  for (int64_t kb = 0; kb < k8; kb += kLanes, b += kTileCols * kLanes) {
    Lanes a[kTileRows];
    for (int r = 0; r < kTileRows; ++r) a[r] = lanes_load(a_rows[r] + kb);
    for (int j = 0; j < kTileCols; ++j) {
      const Lanes bj = lanes_load(b + j * kLanes);
      for (int r = 0; r < kTileRows; ++r) acc[r][j] = lanes_fma(a[r], bj, acc[r][j]);
    }
  }

  static_assert(kTileRows == 4, "the epilogue reduces one column of four rows at a time");
  for (int j = 0; j < kTileCols; ++j) {
    float column[kTileRows];
    reduce_lanes4(acc[0][j], acc[1][j], acc[2][j], acc[3][j], column);
    for (int r = 0; r < kTileRows; ++r) out[r][j] = column[r];
  }

  const int64_t tail = k - k8;
  if (tail > 0) {
    const float* b_tail = panel + k8 * kTileCols;
    for (int r = 0; r < kTileRows; ++r) {
      for (int j = 0; j < kTileCols; ++j) {
        for (int64_t t = 0; t < tail; ++t) {
          out[r][j] = std::fma(a_rows[r][k8 + t], b_tail[j * tail + t], out[r][j]);
        }
      }
    }
  }
  if (bias) {
    for (int r = 0; r < kTileRows; ++r)
      for (int j = 0; j < kTileCols; ++j) out[r][j] = out[r][j] + bias[j];
  }
}

// ---- driver ----------------------------------------------------------------------------------
//
// Panels are split into contiguous groups, one or more per thread. A thread packs a group once,
// then walks the tiles of A rows, running every panel of the group against a tile before moving
// on: the tile (MR rows of A) stays in L1 while the packed group streams from L2 (or from L1 when
// K is small, as in attention's K = head_dim).

// Packed panels per group: their fp32 copy should sit in L2 next to the A tile (~192 KiB).
int64_t panels_per_group(int64_t k) {
  const int64_t bytes_per_panel = std::max<int64_t>(k, 1) * kTileCols * sizeof(float);
  return std::clamp<int64_t>((192 << 10) / bytes_per_panel, 1, 64);
}

template <DType kDtype>
void gemm_panel_group(const GemmArgs& args, int64_t panel_begin, int64_t panel_end,
                      std::vector<float>& packed) {
  const int64_t panel_elems = args.k * kTileCols;
  packed.resize(static_cast<size_t>((panel_end - panel_begin) * panel_elems));
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    pack_panel<kDtype>(args, p * kTileCols, packed.data() + (p - panel_begin) * panel_elems);
  }

  for (int64_t row = 0; row < args.m; row += kTileRows) {
    const int64_t valid_rows = std::min<int64_t>(kTileRows, args.m - row);
    const float* a_rows[kTileRows];
    for (int r = 0; r < kTileRows; ++r) {
      const int64_t i = row + std::min<int64_t>(r, valid_rows - 1);  // pad with the last row
      const int64_t source_row = args.a_rows ? args.a_rows[i] : i;
      a_rows[r] = args.a + source_row * args.lda;
    }
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      const int64_t col = p * kTileCols;
      const int64_t valid_cols = std::min<int64_t>(kTileCols, args.n - col);
      float bias[kTileCols] = {};
      if (args.bias) std::copy_n(args.bias + col, valid_cols, bias);
      float out[kTileRows][kTileCols];
      dot_tile(args.k, a_rows, packed.data() + (p - panel_begin) * panel_elems,
               args.bias ? bias : nullptr, out);
      float* c_tile = args.c + row * args.ldc + col;
      if (args.accumulate) {
        for (int64_t r = 0; r < valid_rows; ++r)
          for (int64_t j = 0; j < valid_cols; ++j) c_tile[r * args.ldc + j] += out[r][j];
      } else if (valid_rows == kTileRows && valid_cols == kTileCols) {  // fixed-size: plain moves
        for (int r = 0; r < kTileRows; ++r)
          for (int j = 0; j < kTileCols; ++j) c_tile[r * args.ldc + j] = out[r][j];
      } else {
        for (int64_t r = 0; r < valid_rows; ++r)
          for (int64_t j = 0; j < valid_cols; ++j) c_tile[r * args.ldc + j] = out[r][j];
      }
    }
  }
}

template <DType kDtype>
void gemm_typed(const GemmArgs& args) {
  const int64_t panels = (args.n + kTileCols - 1) / kTileCols;
  // At most one group per thread, fewer when the packed panels would outgrow the cache.
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t group = std::min(panels_per_group(args.k), (panels + threads - 1) / threads);
  const int64_t groups = (panels + group - 1) / group;
  // Static schedule over groups of panels; any split gives the same bits (see the contract).
  // Tiny products stay on the calling thread: waking the pool costs more than they do.
  const bool parallel = groups > 1 && args.m * args.n * args.k >= (1 << 16) && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t g = 0; g < groups; ++g) {
    thread_local std::vector<float> packed;
    gemm_panel_group<kDtype>(args, g * group, std::min(panels, (g + 1) * group), packed);
  }
}

}  // namespace

void gemm_nt(const GemmArgs& args) {
  MOSAIC_ASSERT(args.m >= 0 && args.n >= 0 && args.k >= 0, "m={} n={} k={}", args.m, args.n,
                args.k);
  if (args.m == 0 || args.n == 0) return;
  MOSAIC_ASSERT(args.c && (args.k == 0 || (args.a && args.b)), "gemm_nt: null operand");
  // A stride matters only when more than one row of A is read; likewise B and C.
  MOSAIC_ASSERT((args.m == 1 && !args.a_rows) || args.lda >= args.k, "lda={} k={}", args.lda,
                args.k);
  MOSAIC_ASSERT(args.n == 1 || args.ldb >= args.k, "ldb={} k={}", args.ldb, args.k);
  MOSAIC_ASSERT(args.m == 1 || args.ldc >= args.n, "ldc={} n={}", args.ldc, args.n);
  switch (args.b_dtype) {
    case DType::f32: return gemm_typed<DType::f32>(args);
    case DType::bf16: return gemm_typed<DType::bf16>(args);
    case DType::f16: return gemm_typed<DType::f16>(args);
    default:
      MOSAIC_ASSERT(false, "gemm_nt: B dtype {} is not a weight float", dtype_name(args.b_dtype));
  }
}

}  // namespace mosaic::cpu
