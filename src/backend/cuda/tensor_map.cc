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

}  // namespace

CUtensorMap bf16_row_major_map(const void* base, uint64_t columns, uint64_t rows, uint64_t row_stride,
                               uint32_t box_columns, uint32_t box_rows) {
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
  return map;
}

}  // namespace mosaic::cuda
