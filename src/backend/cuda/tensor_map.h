// Tensor maps for the Tensor Memory Accelerator (TMA, compute capability 9.0+): the descriptor a
// kernel passes to cp.async.bulk.tensor to copy a box of a 2-D row-major bf16 matrix into shared
// memory. Built on the host through the driver's cuTensorMapEncodeTiled, reached with
// cudaGetDriverEntryPointByVersion so that nothing links libcuda directly.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace mosaic::cuda {

// A map of `rows` rows of `columns` bf16 elements, row r at base + r * row_stride elements,
// copied in boxes of [box_rows][box_columns] with the 128-byte swizzle (box_columns * 2 <= 128).
// Rows at or past `rows` read as zeros. Throws std::runtime_error naming the failed requirement
// (TMA needs a 16-byte aligned base and a row stride that is a multiple of 16 bytes, < 2^40 bytes).
CUtensorMap bf16_row_major_map(const void* base, uint64_t columns, uint64_t rows, uint64_t row_stride,
                               uint32_t box_columns, uint32_t box_rows);

}  // namespace mosaic::cuda
