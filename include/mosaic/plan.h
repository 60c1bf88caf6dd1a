// Memory planning from a configuration alone: what one denoising step of a model needs, before
// any weight is loaded (what `mosaic plan` prints).
//
//   mosaic::PlanRequest request{.model = "llada-8b", .lengths = {32768}, .candidates = {16384}};
//   mosaic::PlanReport report = mosaic::plan_step(request);
//   report.activation_peak  // bytes the arena must map for this step
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mosaic/error.h"

namespace mosaic {

struct PlanRequest {
  std::string model;                 // "llada-8b", "dream-7b", or a model folder (config.json)
  std::vector<int64_t> lengths;      // tokens per sequence of the batch
  std::vector<int64_t> candidates;   // rows whose prediction is wanted, per sequence
  std::string activations = "bf16";  // "bf16" (CUDA backend) or "fp32" (CPU reference)
  std::string head = "stats";        // "stats": fused LM head (generation); "logits": materialised
  int64_t qkv_chunks = 1, attention_chunks = 1, ffn_chunks = 1, head_chunks = 1;
  std::string planner = "greedy-by-size";  // or "first-fit"
};

struct PlanCategoryBytes {
  std::string category;
  uint64_t bytes = 0;
};

struct PlanTensorBytes {
  std::string name;
  std::string category;
  uint64_t bytes = 0;
};

struct PlanReport {
  std::string model, family;
  int64_t layers = 0, hidden = 0, vocab = 0;
  uint64_t weight_bytes = 0;       // at the checkpoint's dtype (bf16 for the presets)
  std::string weight_dtype;
  int64_t tokens = 0, candidates = 0, sequences = 0;
  uint64_t activation_peak = 0;    // planned arena bytes
  uint64_t lower_bound = 0;        // max over ops of live bytes
  uint64_t average_live = 0;       // mean over ops of live bytes
  double par = 0, inflation = 0;   // peak / average, peak / lower bound
  int64_t tensor_count = 0, op_count = 0;
  double planning_ms = 0;
  int64_t peak_op = 0;
  std::string peak_op_name;
  std::vector<PlanCategoryBytes> live_at_peak;   // by category, largest first
  std::vector<PlanTensorBytes> largest_at_peak;  // up to 8 tensors
  std::vector<std::string> categories;           // category order of the timeline
  std::vector<std::vector<uint64_t>> timeline;   // [op][category] live bytes
  std::vector<std::string> op_names;             // one per op, e.g. "layer3.linear(gate)"
};

// Throws mosaic::Error for an unknown preset, an unreadable config, or an impossible shape.
PlanReport plan_step(const PlanRequest& request);

// An SVG picture of the report's timeline: live bytes per op stacked by category, the planned
// peak and the lower bound marked.
std::string plan_timeline_svg(const PlanReport& report);

}  // namespace mosaic
