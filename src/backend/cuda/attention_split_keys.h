// Attention for segments whose keys are read in parts (AttentionSegment::key_splits > 0: a few
// query rows against a KV cache; docs/design/split-keys-attention.md). Each part runs on its own
// CTA of a cluster of as many CTAs as parts, and the parts are merged, in order, through
// distributed shared memory: a 32-row block against 32,768 cached keys runs 8 CTAs per head
// instead of 1. Where the query tiles alone fill the GPU, one CTA per tile runs the parts in turn
// (the same bits). Hopper (compute capability 9.0) only; elsewhere attention() runs such segments
// in its other kernels.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/attention.h"

namespace mosaic::cuda {

// Whether the current device runs the kernel: compute capability 9.0, this binary holds it, and a
// cluster of eight of its CTAs fits.
bool split_keys_attention_available();

// Whether split segments of these arguments run here: a compute capability 9.0 device that
// holds a cluster of eight of the kernel's CTAs, head_dim 128, 16-byte aligned rows.
bool split_keys_attention_fits(const AttentionArgs& args);

// The segments with key_splits > 0 (their most query rows: args.max_split_q_rows); the others
// are left alone. Arguments validated by attention().
void split_keys_attention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace mosaic::cuda
