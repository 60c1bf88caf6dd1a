// Small fp32 element-wise kernels of the decoder block.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace mosaic::cpu {

// out[t, :] = float(table[ids[t], :]) for t < tokens; table is [rows, dim] in f32/bf16/f16.
// Callers validate ids (0 <= id < rows) before calling.
void embedding_gather(int64_t tokens, int64_t dim, const int32_t* ids, const void* table,
                      DType table_dtype, float* out, int64_t out_stride);

// One tensor-parallel rank's share of the embedding: `table` holds rows [first_id, first_id + rows)
// of the vocabulary; a token of another rank's ids gets a row of zeros (the ranks' all-reduce
// then holds every token's row exactly, since the other ranks add zeros). embedding_gather is the
// share of the whole vocabulary.
void embedding_gather_share(int64_t tokens, int64_t dim, const int32_t* ids, const void* table, DType table_dtype,
                            int64_t first_id, int64_t rows, float* out, int64_t out_stride);

// gate[t, f] = silu(gate[t, f]) * up[t, f], silu(x) = x / (1 + exp(-x)). In place on gate.
void swiglu(int64_t rows, int64_t dim, float* gate, int64_t gate_stride, const float* up,
            int64_t up_stride);

// x[t, :] += y[t, :]
void add_inplace(int64_t rows, int64_t dim, float* x, int64_t x_stride, const float* y,
                 int64_t y_stride);

}  // namespace mosaic::cpu

namespace mosaic::cpu {

// out[i] = float(src[i]) for a f32/bf16/f16 array (exact widening).
void convert_to_f32(int64_t count, const void* src, DType dtype, float* out);

}  // namespace mosaic::cpu
