// Applying a LoRA adapter to a base checkpoint by merging it at load (docs/design/lora-adapters.md):
//   1. bind: every adapter module is matched to one linear projection of the base (its path, or
//      its path with "model." in front), must be selected by target_modules, and its A and B must
//      be [r, in] and [out, r] for the base weight [out, in]; every projection target_modules
//      selects must have tensors;
//   2. merge: W' = W + scaling * (B @ A), computed and stored in fp32.
// The fp32 result is the exact linear map of PEFT's unmerged branch x W^T + scaling (x A^T) B^T
// up to fp32 rounding; the CUDA backend rounds it to bf16 once, on upload.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "model/lora_adapter.h"
#include "model/model_weights.h"
#include "model/weight_names.h"

namespace mosaic {

struct LoraTarget {
  const WeightSpec* base = nullptr;  // the projection of the base checkpoint
  const LoraModule* module = nullptr;
};

// Throws mosaic::Error naming the adapter file, the tensor or field, and the shape or name
// expected. `tied_embeddings`: the LM head is the embedding, which LoRA cannot change alone.
std::vector<LoraTarget> bind_lora(const LoraAdapter& adapter, std::span<const WeightSpec> specs,
                                  std::string_view family, bool tied_embeddings);

// W + scaling * (B @ A) as fp32 [out, in], for a base weight [out, in] of any float dtype.
std::vector<float> merge_lora(const WeightView& base, const LoraModule& module, double scaling);

}  // namespace mosaic
