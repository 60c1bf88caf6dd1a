// The CUDA backend's small kernels, on raw device pointers and dimensions (no graph types).
// Storage is bf16 (__nv_bfloat16 passed as void*), arithmetic fp32, following the reference
// numerics of shared/reference/models.md:
//  - RMSNorm: x cast to fp32, x * rsqrt(mean(x^2) + eps), cast to bf16, times the bf16 weight
//    (the product rounded to bf16).
//  - RoPE, half-split layout: inv_freq and angles in fp32 as on the CPU (backend/cpu/rope.h).
//    `RopePrecision::fp32` (LLaDA): q/k upcast to fp32, rotated with fp32 cos/sin, cast back.
//    `RopePrecision::bf16_tables` (Dream, LLaDA-MoE): cos/sin rounded to bf16, products and sums
//    rounded to bf16 as PyTorch computes `q * cos + rotate_half(q) * sin` in bf16.
//  - SwiGLU: silu(gate) * up in fp32 from bf16 inputs, rounded to bf16.
// All take a cudaStream_t and launch asynchronously. Row strides are in elements.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace mosaic::cuda {

// out[t, :] = bf16(table[ids[t], :]); the table may be bf16, f16 or f32. ids are device int32.
void embedding_gather(int64_t tokens, int64_t dim, const int32_t* ids, const void* table,
                      DType table_dtype, void* out, int64_t out_stride, cudaStream_t stream);

// out[r] = rms_norm(x[r]) * weight (weight bf16 [dim]); out may alias x. With `rows_index`
// (device int32, may be null), input row r is x[rows_index[r]] (the head's candidate gather);
// out must then not overlap x.
void rms_norm(int64_t rows, int64_t dim, const void* x, int64_t x_stride, const int32_t* rows_index,
              const void* weight, float eps, void* out, int64_t out_stride, cudaStream_t stream);

enum class RopePrecision { fp32, bf16_tables };

// In place on x [tokens, heads, head_dim] (bf16); positions device int32 [tokens].
// head_stride > 0: the heads lie head_stride apart and only their first head_dim values turn
// (partial rotary, LLaDA 2.x); 0: head_stride = head_dim.
void rope(int64_t tokens, int64_t heads, int64_t head_dim, void* x, int64_t x_stride,
          const int32_t* positions, double theta, RopePrecision precision, cudaStream_t stream,
          int64_t head_stride = 0);

// gate = silu(gate) * up, in place on gate (bf16).
void swiglu(int64_t rows, int64_t dim, void* gate, int64_t gate_stride, const void* up,
            int64_t up_stride, cudaStream_t stream);

// out[r, :] = in[index[r], :] for r < rows: rows of row_bytes bytes of any dtype (index device
// int32; strides in bytes). out must not overlap in.
void gather_rows(int64_t rows, int64_t row_bytes, const void* in, int64_t in_stride_bytes,
                 const int32_t* index, void* out, int64_t out_stride_bytes, cudaStream_t stream);

// out[index[r], :] = in[r, :] for r < rows (the indices distinct): a cached step's fresh K/V rows
// into the KV cache. out must not overlap in.
void scatter_rows(int64_t rows, int64_t row_bytes, const void* in, int64_t in_stride_bytes,
                  const int32_t* index, void* out, int64_t out_stride_bytes, cudaStream_t stream);

}  // namespace mosaic::cuda
