// The CUDA backend's small kernels (elementwise.h gives the numerics), all memory-bound.
//
// Every kernel walks its rows in chunks of 8 elements: one 16-byte access of bf16 when the row
// length, the strides and the base pointers allow it (the "aligned" instantiation), element by
// element otherwise. Both instantiations do the same arithmetic in the same order on the same
// chunks, so which one ran never changes a bit — RMSNorm's sums included, whose order depends on
// the row length only (not on the row count, a gather or a pointer's alignment). Loops are
// grid-stride, so any row count runs on a bounded grid.
#include "backend/cuda/elementwise.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/swiglu_math.cuh"

namespace mosaic::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kChunk = 8;             // elements per chunk: 16 bytes of bf16
constexpr int kThreads = 256;         // threads per block of the flat kernels
constexpr int64_t kMaxBlocks = 8192;  // grid cap; H200 keeps ~1k blocks of 256 resident
constexpr int kMaxRopeHalf = 128;     // head_dim <= 256: the frequency table travels as a parameter


bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

int grid_for(int64_t work_items, int threads) {
  return static_cast<int>(std::min<int64_t>((work_items + threads - 1) / threads, kMaxBlocks));
}

// ---- chunk access -------------------------------------------------------------------------

__device__ __forceinline__ float to_f32(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float round_bf16(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

// v[e] = p[e] for e < count (count <= kChunk), 0 beyond. kAligned: the chunk is full and p is
// 16-byte aligned.
template <bool kAligned, typename T>
__device__ __forceinline__ void load_chunk(const T* p, int count, float (&v)[kChunk]) {
  if constexpr (kAligned) {
    if constexpr (std::is_same_v<T, float>) {
      const float4 lo = reinterpret_cast<const float4*>(p)[0];
      const float4 hi = reinterpret_cast<const float4*>(p)[1];
      v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w;
      v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
    } else {
      static_assert(sizeof(T) == 2, "load_chunk: bf16, f16 or f32");
      const uint4 raw = *reinterpret_cast<const uint4*>(p);
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int i = 0; i < kChunk; ++i) v[i] = to_f32(e[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) v[i] = i < count ? to_f32(p[i]) : 0.0f;
  }
}

// p[e] = bf16(v[e]) for e < count, rounded to nearest even.
template <bool kAligned>
__device__ __forceinline__ void store_chunk(bf16* p, int count, const float (&v)[kChunk]) {
  if constexpr (kAligned) {
    uint4 raw;
    bf16* e = reinterpret_cast<bf16*>(&raw);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) e[i] = __float2bfloat16_rn(v[i]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      if (i < count) p[i] = __float2bfloat16_rn(v[i]);
    }
  }
}

// The flat kernels iterate over (row, chunk) pairs: item i is chunk i % chunks_per_row of row
// i / chunks_per_row.
struct ChunkGrid {
  int64_t rows, dim, chunks_per_row;
  __host__ __device__ int64_t items() const { return rows * chunks_per_row; }
};
ChunkGrid chunk_grid(int64_t rows, int64_t dim) { return {rows, dim, (dim + kChunk - 1) / kChunk}; }

__device__ __forceinline__ int64_t first_item() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t item_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// ---- kernels ------------------------------------------------------------------------------

template <bool kAligned, typename T>
__global__ void embedding_gather_kernel(ChunkGrid grid, const int32_t* __restrict__ ids,
                                        const T* __restrict__ table, bf16* __restrict__ out,
                                        int64_t out_stride) {
  for (int64_t i = first_item(); i < grid.items(); i += item_stride()) {
    const int64_t t = i / grid.chunks_per_row;
    const int64_t c = (i - t * grid.chunks_per_row) * kChunk;
    const int count = static_cast<int>(min(int64_t{kChunk}, grid.dim - c));
    float v[kChunk];
    load_chunk<kAligned>(table + static_cast<int64_t>(ids[t]) * grid.dim + c, count, v);
    store_chunk<kAligned>(out + t * out_stride + c, count, v);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;  // the butterfly leaves the same bits in every lane
}

// kThreadsPerRow = 32: a warp per row, 8 rows per block; 256: a block per row.
template <bool kAligned, int kThreadsPerRow>
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(int64_t rows, int64_t dim, const bf16* x, int64_t x_stride,
                    const int32_t* __restrict__ rows_index, const bf16* __restrict__ weight,
                    float eps, bf16* out, int64_t out_stride) {
  static_assert(kThreadsPerRow == 32 || kThreadsPerRow == kThreads);
  constexpr int kRowsPerBlock = kThreads / kThreadsPerRow;
  constexpr int kWarpsPerRow = kThreadsPerRow / 32;
  __shared__ float warp_sums[kWarpsPerRow];
  const int lane = threadIdx.x % kThreadsPerRow;
  const int64_t chunks = (dim + kChunk - 1) / kChunk;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreadsPerRow;
       r < rows; r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    // In block mode r is uniform over the block, so every thread reaches the barriers.
    const int64_t in_row = rows_index != nullptr ? rows_index[r] : r;
    const bf16* xr = x + in_row * x_stride;
    bf16* outr = out + r * out_stride;

    // Fixed order: each thread its chunks in increasing order, elements in order, one fma each;
    // then the butterfly; then the warps in index order.
    float sum = 0.0f;
    for (int64_t c = lane; c < chunks; c += kThreadsPerRow) {
      float v[kChunk];
      load_chunk<kAligned>(xr + c * kChunk,
                           static_cast<int>(min(int64_t{kChunk}, dim - c * kChunk)), v);
#pragma unroll
      for (int e = 0; e < kChunk; ++e) sum = fmaf(v[e], v[e], sum);
    }
    sum = warp_sum(sum);
    if constexpr (kWarpsPerRow > 1) {
      if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
      __syncthreads();
      sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarpsPerRow; ++w) sum += warp_sums[w];
      __syncthreads();  // warp_sums is rewritten by the next row
    }
    const float inv_rms = rsqrtf(sum / static_cast<float>(dim) + eps);

    // Each thread rewrites exactly the chunks it read above, so out may alias x.
    for (int64_t c = lane; c < chunks; c += kThreadsPerRow) {
      const int count = static_cast<int>(min(int64_t{kChunk}, dim - c * kChunk));
      float v[kChunk], w[kChunk];
      load_chunk<kAligned>(xr + c * kChunk, count, v);
      load_chunk<kAligned>(weight + c * kChunk, count, w);
#pragma unroll
      for (int e = 0; e < kChunk; ++e) v[e] = round_bf16(v[e] * inv_rms) * w[e];
      store_chunk<kAligned>(outr + c * kChunk, count, v);
    }
  }
}

template <bool kAligned>
__global__ void swiglu_kernel(ChunkGrid grid, bf16* gate, int64_t gate_stride, const bf16* up,
                              int64_t up_stride) {
  for (int64_t i = first_item(); i < grid.items(); i += item_stride()) {
    const int64_t r = i / grid.chunks_per_row;
    const int64_t c = (i - r * grid.chunks_per_row) * kChunk;
    const int count = static_cast<int>(min(int64_t{kChunk}, grid.dim - c));
    float g[kChunk], u[kChunk];
    load_chunk<kAligned>(gate + r * gate_stride + c, count, g);
    load_chunk<kAligned>(up + r * up_stride + c, count, u);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) g[e] = silu_times(g[e], u[e]);
    store_chunk<kAligned>(gate + r * gate_stride + c, count, g);
  }
}

// inv_freq by value: at most 512 bytes of kernel parameters, nothing to allocate or cache, and
// safe inside CUDA graph capture.
struct RopeFrequencies {
  float inv_freq[kMaxRopeHalf];
};

// One block per token (grid-stride): the token's cos/sin table is built once in shared memory,
// then the block rotates all its heads, a chunk of 8 (lo, hi) pairs per thread.
template <bool kAligned, bool kBf16Tables>
__global__ void rope_kernel(int64_t tokens, int heads, int half, int head_stride, bf16* x, int64_t x_stride,
                            const int32_t* __restrict__ positions, RopeFrequencies frequencies) {
  __shared__ float cos_table[kMaxRopeHalf], sin_table[kMaxRopeHalf];
  const int chunks_per_head = (half + kChunk - 1) / kChunk;
  const int items = heads * chunks_per_head;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float position = static_cast<float>(positions[t]);
    for (int j = threadIdx.x; j < half; j += blockDim.x) {
      float sin_angle, cos_angle;
      sincosf(__fmul_rn(position, frequencies.inv_freq[j]), &sin_angle, &cos_angle);
      cos_table[j] = kBf16Tables ? round_bf16(cos_angle) : cos_angle;
      sin_table[j] = kBf16Tables ? round_bf16(sin_angle) : sin_angle;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < items; i += blockDim.x) {
      const int h = i / chunks_per_head;
      const int j0 = (i - h * chunks_per_head) * kChunk;
      const int count = min(kChunk, half - j0);
      bf16* lo = x + t * x_stride + static_cast<int64_t>(h) * head_stride + j0;
      bf16* hi = lo + half;
      float a[kChunk], b[kChunk];
      load_chunk<kAligned>(lo, count, a);
      load_chunk<kAligned>(hi, count, b);
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        const int j = min(j0 + e, half - 1);  // lanes past count compute on valid entries, unused
        const float c = cos_table[j], s = sin_table[j];
        const float x_lo = a[e], x_hi = b[e];
        // y = x * cos + rotate_half(x) * sin, rotate_half(x) = (-x_hi, x_lo). Explicit _rn
        // operations: the compiler may not fuse a product into the sum (PyTorch rounds each
        // elementwise op on its own).
        if constexpr (kBf16Tables) {
          // PyTorch in bf16: each product rounded to bf16, the sum rounded to bf16
          // (bf16(-x_hi * s) = -bf16(x_hi * s): rounding to nearest is symmetric).
          a[e] = __fsub_rn(round_bf16(__fmul_rn(x_lo, c)), round_bf16(__fmul_rn(x_hi, s)));
          b[e] = __fadd_rn(round_bf16(__fmul_rn(x_hi, c)), round_bf16(__fmul_rn(x_lo, s)));
        } else {
          a[e] = __fsub_rn(__fmul_rn(x_lo, c), __fmul_rn(x_hi, s));
          b[e] = __fadd_rn(__fmul_rn(x_hi, c), __fmul_rn(x_lo, s));
        }
      }
      store_chunk<kAligned>(lo, count, a);
      store_chunk<kAligned>(hi, count, b);
    }
    __syncthreads();  // the next token rewrites the tables
  }
}

template <typename T>
void launch_embedding_gather(int64_t tokens, int64_t dim, const int32_t* ids, const T* table,
                             bf16* out, int64_t out_stride, cudaStream_t stream) {
  const ChunkGrid grid = chunk_grid(tokens, dim);
  const bool aligned =
      dim % kChunk == 0 && out_stride % kChunk == 0 && aligned16(table) && aligned16(out);
  const int blocks = grid_for(grid.items(), kThreads);
  if (aligned) {
    embedding_gather_kernel<true>
        <<<blocks, kThreads, 0, stream>>>(grid, ids, table, out, out_stride);
  } else {
    embedding_gather_kernel<false>
        <<<blocks, kThreads, 0, stream>>>(grid, ids, table, out, out_stride);
  }
  MOSAIC_CUDA_CHECK_LAUNCH();
}

// kScatter false: out row r = in row index[r]; true: out row index[r] = in row r. Copied in units
// of T (uint4, uint32_t or unsigned char: the widest that divides the row length, both strides
// and both base addresses).
template <typename T, bool kScatter>
__global__ void indexed_rows_kernel(int64_t rows, int64_t units_per_row, const T* __restrict__ in,
                                    int64_t in_stride, const int32_t* __restrict__ index,
                                    T* __restrict__ out, int64_t out_stride) {
  const int64_t items = rows * units_per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / units_per_row, u = i - r * units_per_row;
    const int64_t indexed = static_cast<int64_t>(index[r]);
    if constexpr (kScatter) {
      out[indexed * out_stride + u] = in[r * in_stride + u];
    } else {
      out[r * out_stride + u] = in[indexed * in_stride + u];
    }
  }
}

template <bool kScatter>
void launch_indexed_rows(int64_t rows, int64_t row_bytes, const void* in, int64_t in_stride_bytes,
                         const int32_t* index, void* out, int64_t out_stride_bytes, cudaStream_t stream) {
  MOSAIC_CUDA_REQUIRE(row_bytes > 0 && in_stride_bytes >= row_bytes && out_stride_bytes >= row_bytes);
  if (rows <= 0) return;
  const auto divides = [&](uint64_t unit) {
    return row_bytes % unit == 0 && in_stride_bytes % unit == 0 && out_stride_bytes % unit == 0 &&
           reinterpret_cast<uintptr_t>(in) % unit == 0 && reinterpret_cast<uintptr_t>(out) % unit == 0;
  };
  auto launch = [&](auto unit) {
    using T = decltype(unit);
    const int64_t units = row_bytes / int64_t(sizeof(T));
    indexed_rows_kernel<T, kScatter><<<grid_for(rows * units, kThreads), kThreads, 0, stream>>>(
        rows, units, static_cast<const T*>(in), in_stride_bytes / int64_t(sizeof(T)), index,
        static_cast<T*>(out), out_stride_bytes / int64_t(sizeof(T)));
    MOSAIC_CUDA_CHECK_LAUNCH();
  };
  if (divides(16)) launch(uint4{});
  else if (divides(4)) launch(uint32_t{});
  else launch(static_cast<unsigned char>(0));
}

}  // namespace

void embedding_gather(int64_t tokens, int64_t dim, const int32_t* ids, const void* table,
                      DType table_dtype, void* out, int64_t out_stride, cudaStream_t stream) {
  MOSAIC_CUDA_REQUIRE(dim > 0 && out_stride >= dim);
  if (tokens <= 0) return;
  bf16* out_bf16 = static_cast<bf16*>(out);
  switch (table_dtype) {
    case DType::bf16:
      return launch_embedding_gather(tokens, dim, ids, static_cast<const bf16*>(table), out_bf16,
                                     out_stride, stream);
    case DType::f16:
      return launch_embedding_gather(tokens, dim, ids, static_cast<const __half*>(table), out_bf16,
                                     out_stride, stream);
    case DType::f32:
      return launch_embedding_gather(tokens, dim, ids, static_cast<const float*>(table), out_bf16,
                                     out_stride, stream);
    default:
      MOSAIC_CUDA_REQUIRE(table_dtype == DType::bf16 || table_dtype == DType::f16 ||
                          table_dtype == DType::f32);
  }
}

void rms_norm(int64_t rows, int64_t dim, const void* x, int64_t x_stride, const int32_t* rows_index,
              const void* weight, float eps, void* out, int64_t out_stride, cudaStream_t stream) {
  MOSAIC_CUDA_REQUIRE(dim > 0 && x_stride >= dim && out_stride >= dim);
  // In place works row by row; a gather in place would let one row overwrite another's input.
  MOSAIC_CUDA_REQUIRE(rows_index == nullptr || out != x);
  if (rows <= 0) return;
  const bf16* xb = static_cast<const bf16*>(x);
  const bf16* wb = static_cast<const bf16*>(weight);
  bf16* ob = static_cast<bf16*>(out);
  const bool aligned = dim % kChunk == 0 && x_stride % kChunk == 0 && out_stride % kChunk == 0 &&
                       aligned16(x) && aligned16(weight) && aligned16(out);
  // The mode depends on dim alone, so a row's bits never depend on how many rows a call has.
  const bool warp_per_row = dim <= 4 * 32 * kChunk;
  if (warp_per_row) {
    const int blocks = static_cast<int>(std::min<int64_t>((rows + 7) / 8, kMaxBlocks));
    if (aligned) {
      rms_norm_kernel<true, 32><<<blocks, kThreads, 0, stream>>>(
          rows, dim, xb, x_stride, rows_index, wb, eps, ob, out_stride);
    } else {
      rms_norm_kernel<false, 32><<<blocks, kThreads, 0, stream>>>(
          rows, dim, xb, x_stride, rows_index, wb, eps, ob, out_stride);
    }
  } else {
    const int blocks = static_cast<int>(std::min<int64_t>(rows, kMaxBlocks));
    if (aligned) {
      rms_norm_kernel<true, kThreads><<<blocks, kThreads, 0, stream>>>(
          rows, dim, xb, x_stride, rows_index, wb, eps, ob, out_stride);
    } else {
      rms_norm_kernel<false, kThreads><<<blocks, kThreads, 0, stream>>>(
          rows, dim, xb, x_stride, rows_index, wb, eps, ob, out_stride);
    }
  }
  MOSAIC_CUDA_CHECK_LAUNCH();
}

void rope(int64_t tokens, int64_t heads, int64_t head_dim, void* x, int64_t x_stride,
          const int32_t* positions, double theta, RopePrecision precision, cudaStream_t stream,
          int64_t head_stride) {
  if (head_stride == 0) head_stride = head_dim;
  MOSAIC_CUDA_REQUIRE(head_dim > 0 && head_dim % 2 == 0 && head_dim <= 2 * kMaxRopeHalf && head_stride >= head_dim);
  MOSAIC_CUDA_REQUIRE(heads > 0 && x_stride >= heads * head_stride && theta > 0);
  if (tokens <= 0) return;
  const int half = static_cast<int>(head_dim / 2);
  // Exactly backend/cpu/rope.cc's rope_inv_freq (PyTorch: 1 / theta ** (arange(0, d, 2) / d), all
  // fp32), on the host so that the table's bits are the CPU backend's.
  RopeFrequencies frequencies{};
  for (int j = 0; j < half; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(head_dim);
    frequencies.inv_freq[j] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
  const int chunks = static_cast<int>(heads) * ((half + kChunk - 1) / kChunk);
  const int threads = std::clamp((chunks + 31) / 32 * 32, 64, kThreads);
  const int blocks = static_cast<int>(std::min<int64_t>(tokens, kMaxBlocks));
  const bool aligned = half % kChunk == 0 && head_stride % kChunk == 0 && x_stride % kChunk == 0 && aligned16(x);
  const int stride = static_cast<int>(head_stride);
  bf16* xb = static_cast<bf16*>(x);
  const int h = static_cast<int>(heads);
  if (precision == RopePrecision::bf16_tables) {
    if (aligned) {
      rope_kernel<true, true>
          <<<blocks, threads, 0, stream>>>(tokens, h, half, stride, xb, x_stride, positions, frequencies);
    } else {
      rope_kernel<false, true>
          <<<blocks, threads, 0, stream>>>(tokens, h, half, stride, xb, x_stride, positions, frequencies);
    }
  } else {
    if (aligned) {
      rope_kernel<true, false>
          <<<blocks, threads, 0, stream>>>(tokens, h, half, stride, xb, x_stride, positions, frequencies);
    } else {
      rope_kernel<false, false>
          <<<blocks, threads, 0, stream>>>(tokens, h, half, stride, xb, x_stride, positions, frequencies);
    }
  }
  MOSAIC_CUDA_CHECK_LAUNCH();
}

void swiglu(int64_t rows, int64_t dim, void* gate, int64_t gate_stride, const void* up,
            int64_t up_stride, cudaStream_t stream) {
  MOSAIC_CUDA_REQUIRE(dim > 0 && gate_stride >= dim && up_stride >= dim);
  if (rows <= 0) return;
  const ChunkGrid grid = chunk_grid(rows, dim);
  const bool aligned = dim % kChunk == 0 && gate_stride % kChunk == 0 && up_stride % kChunk == 0 &&
                       aligned16(gate) && aligned16(up);
  const int blocks = grid_for(grid.items(), kThreads);
  bf16* gb = static_cast<bf16*>(gate);
  const bf16* ub = static_cast<const bf16*>(up);
  if (aligned) {
    swiglu_kernel<true><<<blocks, kThreads, 0, stream>>>(grid, gb, gate_stride, ub, up_stride);
  } else {
    swiglu_kernel<false><<<blocks, kThreads, 0, stream>>>(grid, gb, gate_stride, ub, up_stride);
  }
  MOSAIC_CUDA_CHECK_LAUNCH();
}

void gather_rows(int64_t rows, int64_t row_bytes, const void* in, int64_t in_stride_bytes,
                 const int32_t* index, void* out, int64_t out_stride_bytes, cudaStream_t stream) {
  launch_indexed_rows<false>(rows, row_bytes, in, in_stride_bytes, index, out, out_stride_bytes, stream);
}

void scatter_rows(int64_t rows, int64_t row_bytes, const void* in, int64_t in_stride_bytes,
                  const int32_t* index, void* out, int64_t out_stride_bytes, cudaStream_t stream) {
  launch_indexed_rows<true>(rows, row_bytes, in, in_stride_bytes, index, out, out_stride_bytes, stream);
}

}  // namespace mosaic::cuda
