// What both attention kernels (attention.cu, attention_sm90.cu) receive: validated AttentionArgs
// as typed pointers, with the scale taken to base 2 (scores are exponentiated with ex2). Include
// only from .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention.h"

namespace mosaic::cuda {

struct AttentionKernelArgs {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  __nv_bfloat16* out;
  int64_t q_stride, k_stride, v_stride, out_stride;
  int group;          // q heads per kv head
  float scale_log2;   // scale * log2(e): scores are taken to base 2 in one multiply
  const AttentionSegment* segments;
};

inline AttentionKernelArgs kernel_args_of(const AttentionArgs& args) {
  AttentionKernelArgs kernel_args;
  kernel_args.q = static_cast<const __nv_bfloat16*>(args.q);
  kernel_args.k = static_cast<const __nv_bfloat16*>(args.k);
  kernel_args.v = static_cast<const __nv_bfloat16*>(args.v);
  kernel_args.out = static_cast<__nv_bfloat16*>(args.out);
  kernel_args.q_stride = args.q_stride, kernel_args.k_stride = args.k_stride;
  kernel_args.v_stride = args.v_stride, kernel_args.out_stride = args.out_stride;
  kernel_args.group = static_cast<int>(args.q_heads / args.kv_heads);
  kernel_args.scale_log2 = args.scale * 1.4426950408889634f;
  kernel_args.segments = args.segments;
  return kernel_args;
}

}  // namespace mosaic::cuda
