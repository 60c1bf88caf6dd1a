#include "backend/cuda/tensor_map.h"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mosaic::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 function = [] {
    void* pointer = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pointer, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess || pointer == nullptr) {
      (void)cudaGetLastError();
      throw std::runtime_error("the CUDA driver does not provide cuTensorMapEncodeTiled (needs a CUDA 12+ driver)");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(pointer);
  }();
  return function;
}

bool addressable(const void* base, uint64_t row_stride) {
  return reinterpret_cast<uintptr_t>(base) % 16 == 0 && row_stride % 8 == 0 && row_stride < (uint64_t{1} << 39);
}

// The last maps this thread encoded: an attention call needs two (K and V) and a step's layers
// mostly reuse the same buffers, so a step encodes a handful instead of two per layer. A map is a
// pure function of its arguments, so a hit returns exactly what encoding would.
struct CachedMap {
  const void* base = nullptr;
  uint64_t columns = 0, rows = 0, row_stride = 0;
  uint32_t box_columns = 0, box_rows = 0;
  bool valid = false;
  CUtensorMap map;
};
constexpr int kCachedMaps = 8;

}  // namespace

CUtensorMap bf16_row_major_map(const void* base, uint64_t columns, uint64_t rows, uint64_t row_stride,
                               uint32_t box_columns, uint32_t box_rows) {
  thread_local CachedMap cache[kCachedMaps];
  thread_local int next_slot = 0;
  for (const CachedMap& entry : cache) {
    if (entry.valid && entry.base == base && entry.columns == columns && entry.rows == rows &&
        entry.row_stride == row_stride && entry.box_columns == box_columns && entry.box_rows == box_rows) {
      return entry.map;
    }
  }
  CachedMap& entry = cache[next_slot];
  next_slot = (next_slot + 1) % kCachedMaps;
  entry = CachedMap{};  // invalid until encoded
  if (!addressable(base, row_stride)) {
    throw std::runtime_error("tensor map: the base must be 16-byte aligned and the row stride (" +
                             std::to_string(row_stride) + " elements) a multiple of 8 below 2^39");
  }
  CUtensorMap map;
  const cuuint64_t dims[2] = {columns, rows};
  const cuuint64_t strides[1] = {row_stride * 2};
  const cuuint32_t box[2] = {box_columns, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
                     element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    throw std::runtime_error("cuTensorMapEncodeTiled failed (error " + std::to_string(static_cast<int>(result)) +
                             ") for a " + std::to_string(rows) + " x " + std::to_string(columns) +
                             " bf16 map, row stride " + std::to_string(row_stride) + ", box " +
                             std::to_string(box_rows) + " x " + std::to_string(box_columns));
  }
  entry = CachedMap{base, columns, rows, row_stride, box_columns, box_rows, true, map};
  return map;
}

}  // namespace mosaic::cuda
