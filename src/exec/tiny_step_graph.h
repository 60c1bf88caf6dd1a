// The step graph of the tiny LLaDA test model (bf16 activations) for a shape and chunk counts:
// what the tests of the CUDA executor's graph rules (attention_tail_split, gate_up_swiglu_fusion)
// inspect. Test-only.
#pragma once

#include "graph/step_graph.h"
#include "model/test_model.h"

namespace mosaic {

inline Graph tiny_step_graph(StepShape shape, ChunkConfig chunks = {}) {
  const ModelConfig config = test_model_preset(Family::llada, "tiny");
  return instantiate_step_graph(config, shape, chunks, {.activations = DType::bf16});
}

}  // namespace mosaic
