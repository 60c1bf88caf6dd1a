// Memory planning from a configuration alone: what one denoising step of a model needs, before
// any weight is loaded (what `mosaic plan` prints).
//
//   mosaic::PlanRequest request{.model = "llada-8b", .lengths = {32768}, .candidates = {16384}};
//   mosaic::PlanReport report = mosaic::plan_step(request);
//   report.activation_peak  // bytes the arena must map for this step
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mosaic/error.h"

namespace mosaic {

struct PlanRequest {
  std::string model;                 // "llada-8b", "dream-7b", "llada-moe-7b", or a model folder (config.json)
  std::vector<int64_t> lengths;      // tokens per sequence of the batch
  std::vector<int64_t> candidates;   // rows whose prediction is wanted, per sequence
  // A cached step (docs/design/kv-cache.md), when given: per sequence, the rows it computes — the
  // last ones of the sequence — against a KV cache holding the K/V of all its positions. The
  // candidates must lie among them. Empty: the full step (every row computed, no cache).
  std::vector<int64_t> cached_rows;
  // "cuda": bf16 activations, 2 MiB pages, a 64 MiB workspace reserve (cuBLASLt and small
  // buffers); "cpu": fp32 activations, 64 KiB granules, no workspace.
  std::string device = "cuda";
  std::string activations;           // "" = the device's; or "bf16" / "fp32"
  std::string head = "stats";        // "stats": fused LM head (generation); "logits": materialised
  int64_t qkv_chunks = 1, attention_chunks = 1, ffn_chunks = 1, head_chunks = 1;
  // Total bytes the engine may allocate (weights + workspace + arena). When set, the chunk counts
  // above are ignored and lazy chunking chooses the fewest chunks that fit.
  std::optional<uint64_t> budget;
  // Sampling temperature of the step. Mosaic draws Gumbel noise inside the fused head, so it
  // changes no tensor; it is recorded so reports say what was planned.
  double temperature = 0;
  // "best" (the lower of greedy-by-area and greedy-by-size), "greedy-by-area", "greedy-by-size",
  // "first-fit"
  std::string planner = "best";
  // A PEFT LoRA adapter folder the engine would merge at load (docs/design/lora-adapters.md), or
  // empty. It is bound to the model's projections as the engine binds it (a mismatch is the
  // engine's error); on the CPU its merged fp32 projections replace the base tensors in the weights.
  std::string adapter;
  // Where the decoder layers' product weights live (docs/design/weight-staging.md): "device"
  // (resident: the default), "host" (every layer's in host memory, staged into the arena one
  // layer ahead of use), or "auto" (with a budget: the fewest layers, the last ones, streamed that
  // let the step fit). Norm weights, biases, the embedding and the LM head stay on the device.
  std::string weights = "device";
  // Where the residual stream lives (docs/design/residual-staging.md): "auto" (the default: on
  // the device wherever the step fits so, else in pinned host memory, staged by rows — what a CUDA
  // engine does; the CPU keeps it where everything is), "device", or "host".
  std::string residual = "auto";
  // The rates the report predicts copy and compute times with, per layer: host-to-device link
  // bytes/s and the device's flop/s. Defaults: measured on the H200 (PCIe gen 5 x16: 32 layers'
  // 436 MB copies in 257 ms, about 54 GB/s; LLaDA-8B's long steps: about 650 TFLOP/s).
  double link_bytes_per_second = 54e9;
  double compute_flops_per_second = 650e12;
  // Tensor parallelism over this many ranks (docs/design/tensor-parallel.md): the plan is one
  // rank's (its shard of the weights, its activations, its collectives' buffers), the budget each
  // rank's. `collective_bytes_per_second`: the all-reduce bus bandwidth (NCCL's busbw) the report
  // predicts the collectives with; default an assumption for NVLink between H200s (NCCL's
  // all-reduce reaches roughly 360-480 GB/s busbw on 8 NVSwitch-connected Hopper GPUs), not
  // measured by Mosaic yet.
  int64_t tensor_parallel = 1;
  double collective_bytes_per_second = 360e9;
  // Context parallelism over this many ranks (docs/design/context-parallel.md): the plan is the
  // rank's that holds the most candidates (each sequence's candidates taken as its last rows, the
  // generation after its prompt), the budget each rank's.
  int64_t context_parallel = 1;
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
  // With PlanRequest::adapter: the projections it changes, its rank, and what merging adds to
  // weight_bytes (fp32 copies on the CPU; 0 on CUDA, which holds the merged weights in bf16).
  std::string adapter;
  int64_t adapter_projections = 0, adapter_rank = 0;
  uint64_t adapter_merged_extra_bytes = 0;
  int64_t tokens = 0, candidates = 0, sequences = 0;
  uint64_t activation_peak = 0;    // planned arena bytes
  // A cached step's KV cache: the pages of its sequences (resident, beside the arena) and the
  // memory the cache maps for them. Lower bound, average, PAR and inflation count it.
  uint64_t cache_bytes = 0, cache_mapped_bytes = 0;
  int64_t cache_page_rows = 0;
  uint64_t lower_bound = 0;        // max over ops of live bytes
  uint64_t average_live = 0;       // mean over ops of live bytes
  double par = 0, inflation = 0;   // (cache + peak) / average, (cache + peak) / lower bound
  int64_t tensor_count = 0, op_count = 0;
  double planning_ms = 0;
  int64_t peak_op = 0;
  std::string peak_op_name;
  std::vector<PlanCategoryBytes> live_at_peak;   // by category, largest first
  std::vector<PlanTensorBytes> largest_at_peak;  // up to 8 tensors
  std::vector<std::string> categories;           // category order of the timeline
  std::vector<std::vector<uint64_t>> timeline;   // [op][category] live bytes
  std::vector<std::string> op_names;             // one per op, e.g. "layer3.linear(gate)"
  // With anything in host memory (streamed weights, the residual stream): per op, the bytes it
  // copies from host memory into the arena and back; empty otherwise. The timeline above is the
  // device's: tensors in host memory are counted in host_weight_bytes / host_residual_bytes.
  std::vector<uint64_t> copied_in, copied_out;

  // Chunking and budget.
  int64_t qkv_chunks = 1, attention_chunks = 1, ffn_chunks = 1, head_chunks = 1;
  // The last layer ran over every row rather than the candidates only (a budget at the floor
  // needs it: ChunkConfig::last_layer_all_rows).
  bool last_layer_all_rows = false;
  uint64_t workspace_bytes = 0;    // reserved beside weights and arena
  uint64_t granule = 1;            // the arena maps whole granules
  uint64_t mapped_bytes = 0;       // activation peak rounded up to granules
  std::optional<uint64_t> budget;
  uint64_t floor_bytes = 0;        // with a budget: least activation bytes any chunking reaches
  int64_t chunk_probes = 0;
  double chunk_search_ms = 0;
  std::vector<std::string> chunk_steps;  // "ffn -> 2 (peak 16.0 GiB)"
  // Streamed weights (PlanRequest::weights): the layers whose product weights live in host memory,
  // the weight bytes left on the device (what total_bytes counts) and those in host memory; per
  // streamed layer the largest staged size, and the fewest flops of the step (products and
  // attention) that a streamed layer's bytes arrive under: a transfer at B bytes/s hides under a
  // layer computing at F flop/s when flops_per_streamed_byte >= F / B.
  std::string weights_placement = "device";
  int64_t streamed_layers = 0;
  uint64_t device_weight_bytes = 0, host_weight_bytes = 0;
  uint64_t staged_layer_bytes = 0;
  double flops_per_streamed_byte = 0;
  // The residual stream's placement ("device" or "host"); in host memory: its pinned bytes, the
  // bytes its rows move per step (staged in and written back), the most of those in one layer,
  // and the fewest flops of a layer per byte it moves (as flops_per_streamed_byte).
  std::string residual_placement = "device";
  uint64_t host_residual_bytes = 0, residual_moved_bytes = 0, residual_layer_moved_bytes = 0;
  double flops_per_residual_byte = 0;
  // Predicted at the request's rates, per layer: the streamed layer's copy against the least
  // compute it arrives under, and x's copies of a layer against that layer's compute (ms; 0 when
  // nothing of the kind is in host memory). A copy hides where its ms <= the compute's.
  double link_bytes_per_second = 0, compute_flops_per_second = 0;
  double weight_copy_ms = 0, weight_compute_ms = 0;
  double residual_copy_ms = 0, residual_compute_ms = 0;
  // x's write-backs run on the step's own stream (exec/cuda_host_rows.h), so they add to the
  // step whatever the compute: their bytes over the step and in its busiest layer, and the ms the
  // step's write-backs take at the link's rate (the CUDA step pays them in full).
  uint64_t residual_written_bytes = 0, residual_layer_written_bytes = 0;
  double residual_writeback_ms = 0;
  // Tensor parallelism (PlanRequest::tensor_parallel): the ranks; every byte figure above is one
  // rank's. Per step, the all-reduces (the embedding, then every output and down projection's
  // rows), the bytes they reduce and the largest one, the bytes of the head's gathered summaries,
  // the predicted collective time (ring all-reduce: 2 (R - 1) / R of the bytes over the bus
  // bandwidth) against the rank's compute at the request's rate.
  int64_t tensor_parallel = 1;
  // Context parallelism (PlanRequest::context_parallel): the ranks, the plan's rank and the step's
  // rows in all (`tokens` above are the rank's rows); per step the K and V gathers and the bytes
  // they gather; collective_ms then predicts each rank receiving (R - 1) / R of them.
  int64_t context_parallel = 1, context_rank = 0, context_tokens = 0;
  int64_t all_gathers = 0;
  uint64_t all_gather_bytes = 0;
  int64_t all_reduces = 0;
  uint64_t all_reduce_bytes = 0, largest_all_reduce_bytes = 0, head_gather_bytes = 0;
  double collective_bytes_per_second = 0, collective_ms = 0, rank_compute_ms = 0;
  uint64_t total_bytes() const {
    return device_weight_bytes + workspace_bytes + cache_mapped_bytes + mapped_bytes;
  }
};

// Throws mosaic::Error for an unknown preset, an unreadable config, an impossible shape, or a
// budget that no chunking meets (the message gives the bytes needed at least, L and the budget).
PlanReport plan_step(const PlanRequest& request);

// L_max under request.budget: the largest total length L, a multiple of 1024, for which one
// step fits with prompt L/2 and the other L/2 positions masked candidates (lengths and
// candidates of the request are ignored). The report is the plan at L_max; L_max = 0 when not
// even 1024 tokens fit.
struct LmaxReport {
  int64_t l_max = 0;
  PlanReport at_l_max;
  int64_t steps_tried = 0;
  double search_ms = 0;
};
LmaxReport find_lmax(const PlanRequest& request);

// An SVG picture of the report's timeline: live bytes per op stacked by category, the planned
// peak and the lower bound marked.
std::string plan_timeline_svg(const PlanReport& report);

}  // namespace mosaic
