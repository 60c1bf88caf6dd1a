// An instantiated step graph: every tensor of one denoising step with its size and lifetime,
// and the ops that produce and consume them, in execution order. The executor runs exactly
// these ops over exactly these tensors (there is no other description of the model's step),
// and the planner places exactly these tensors.
//
// Tensors are row-major 2-D [rows, cols]. An op addresses a tensor through a TensorRef: the
// tensor plus a first row, so a chunked op reads or writes a block of rows of a full-length
// tensor (e.g. rows [a, b) of K) without a separate tensor. In-place ops (RoPE, SwiGLU, and the
// accumulating linear that adds a projection to the residual stream) write the tensor they read;
// the graph records them as aliases of their input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/attention_segment.h"
#include "core/dtype.h"
#include "graph/step_shape.h"
#include "model/weight_names.h"

namespace mosaic {

enum class TensorCategory : uint8_t {
  input,      // token ids, positions, logit rows
  residual,   // the residual stream x
  norm,       // RMSNorm outputs feeding projections
  query,      // Q
  kv,         // K and V (full length: every query attends to every key)
  attention,  // attention output (its projection accumulates into the residual)
  ffn,        // gate and up projections (SwiGLU writes over gate)
  head,       // LM head input and results
  kv_cache,   // a sequence's cached K and V (resident: not in the arena, planned beside it)
  experts,    // a mixture-of-experts FFN: router logits, routes, the rows permuted by expert
  weights,    // a streamed layer's product weights, staged from host memory (graph/weight_staging.h)
  count,
};

enum class TensorRole : uint8_t {
  ids, positions, logit_rows, residual,
  attn_norm, q, k, v, attn_out,
  ffn_norm, gate, up,
  head_norm, logits, head_stats, head_scratch,
  candidate_residual, candidate_positions,  // the last layer's candidate rows (gathered)
  kv_rows,                                   // cached step: each computed row's row in the cache
  cache_k, cache_v,                          // cached step: a layer's K / V cache (resident)
  // A mixture-of-experts FFN (graph/moe_ffn.h), R rows each taking K of E experts:
  router_logits,   // [R, E]
  route_experts,   // i32 [R, K]: each row's experts, ascending
  route_weights,   // f32 [R, K]: their router probabilities
  route_slots,     // i32 [R, K]: where each (row, expert) sits among the permuted rows
  expert_rows,     // i32 [E + 1 + R K, 1]: each expert's first permuted row, then each permuted row's source row
  expert_input,    // [R K, hidden]: the rows permuted by expert
  expert_gate, expert_up,  // [R K, expert_ffn]
  expert_output,   // [R K, hidden]
  // A streamed layer's product weights staged from host memory, laid out as
  // graph/weight_staging.h says: u8 [1, the layer's staged bytes].
  staged_weights,
  // Rows of a residual stream that lives in host memory (graph/residual_staging.h), staged into
  // the arena for the ops of one visit: [the visit's rows, hidden].
  residual_rows,
  // Tensor parallelism (graph/tensor_parallel.h): a row-parallel projection's partial sums
  // [rows, hidden] before they are all-reduced into x, and one rank's fused-head summaries
  // [rows, kHeadPartialCount] before they are combined across ranks.
  reduce_partial,
  head_partials,
  // Context parallelism (graph/context_parallel.h): a rank's own rows of a layer's K and V
  // [rows per rank, kv_dim], before they are gathered into every rank's K and V.
  k_rows, v_rows,
};

struct GraphTensor {
  TensorRole role;
  TensorCategory category;
  DType dtype;
  int32_t layer = -1;  // decoder layer, -1 outside the stack
  int32_t chunk = -1;  // chunk index for per-chunk tensors, -1 for whole tensors
  int64_t rows = 0, cols = 0;
  int32_t first_op = -1, last_op = -1;  // lifetime, inclusive
  // Lives outside the arena for longer than the step (the KV cache): the planner places nothing
  // for it and counts its bytes beside the arena's; the executor binds it to the cache.
  bool resident = false;
  // Lives in pinned host memory for the step (a residual stream staged by rows,
  // graph/residual_staging.h): the planner places nothing for it and counts its bytes as host
  // bytes; the executor binds it to its host buffer.
  bool host = false;

  uint64_t bytes() const { return static_cast<uint64_t>(rows * cols) * dtype_size(dtype); }
  uint64_t row_bytes() const { return static_cast<uint64_t>(cols) * dtype_size(dtype); }
};

enum class OpKind : uint8_t {
  embed,      // out[r] = embedding[ids[r]]
  rms_norm,   // out[r] = rms_norm(in[r]) * w; with `index`, in row r is in[index[r]]
  linear,     // out = in W^T (+ bias); with `accumulate`, out += in W^T (the residual add)
  rope,       // in place on out (q or k rows), positions from `b`
  attention,  // out = softmax(q k^T / sqrt(d)) v over the op's segments; q = a, k = b, v = c
  swiglu,     // in place: out = silu(out) * b
  lm_head,    // out (logits, fp32) = a W_lm^T for the candidate rows
  lm_head_stats,  // fused: per candidate row, statistics of a W_lm^T without materialising it
  gather_rows,    // out[r] = a[index[r]], whole rows of any dtype (the last layer's candidates)
  scatter_rows,   // out[index[r]] = a[r], whole rows (a cached step's fresh K/V into the cache)
  head_norm,      // in place on out [rows, heads * head_dim]: RMSNorm of each head's head_dim values
  // The mixture-of-experts FFN (graph/moe_ffn.h):
  moe_route,      // a router logits [rows, E] -> out route_experts, out2 route_weights (top K of softmax)
  moe_route_grouped,  // the same from fp32 logits by LLaDA 2.x's rule (sigmoid, bias `weight`, groups)
  moe_permute,    // a route_experts -> out expert_rows (offsets, then source rows), out2 route_slots
  expert_linear,  // out[p] = a[p] W_e^T for the permuted rows p of each expert e (offsets: index)
  moe_combine,    // in place: out[r] += sum over K of b[r, j] * a[index[r, j]], in expert order
  stage_weights,  // out (staged_weights of `layer`) = the layer's product weights, from host memory
  stage_rows,     // out (residual_rows) = rows [a.row, a.row + rows) of a host tensor (a), copied in
  unstage_rows,   // rows [out.row, out.row + rows) of a host tensor (out) = a (residual_rows), copied back
  // Tensor parallelism (graph/tensor_parallel.h), collectives over every rank:
  all_reduce,          // rows of out = their sum over the ranks; with `accumulate`, out += the ranks' sum of a
  combine_head_stats,  // out head_stats rows = every rank's a (head_partials) combined (core/head_stats_combine.h)
  all_gather_rows,     // out rows [k rows, (k + 1) rows) = rank k's a, for every rank k (context parallelism)
};

struct TensorRef {
  int32_t tensor = -1;
  int64_t row = 0;  // first row of the view
  bool valid() const { return tensor >= 0; }
};

struct GraphOp {
  OpKind kind;
  int32_t layer = -1;            // weights of this decoder layer (-1: global weights)
  WeightRole weight = WeightRole::embedding;
  bool has_bias = false;         // linear: the weight's bias (q/k/v) is added
  bool accumulate = false;       // linear: adds its product to out (the residual stream) in place
  TensorRef out, a, b, c;        // see OpKind for the meaning of each
  TensorRef out2;                // a second output (moe_route, moe_permute)
  TensorRef index;               // rms_norm over gathered rows; gather_rows' source rows
  TensorRef scratch;             // memory the op uses only while it runs (the fused head's partials)
  // linear, expert_linear of a streamed layer: its weights are read here (staged_weights), at the
  // offset graph/weight_staging.h gives, instead of from the resident weights.
  TensorRef staged;
  int64_t rows = 0;              // rows processed
  int32_t segment_begin = 0, segment_count = 0;  // attention: Graph::segments
  ChunkGroup group = ChunkGroup::none;           // which chunk count splits this op
};

// Row blocks the executor and planner agree on: chunk c of n over `total` rows starts at
// c * ceil(total / n) and holds at most that many rows (the last one fewer, possibly none).
struct RowChunk {
  int64_t begin = 0, rows = 0;
};
RowChunk row_chunk(int64_t total, int64_t chunks, int64_t index);

struct Graph {
  std::vector<GraphTensor> tensors;
  std::vector<GraphOp> ops;
  std::vector<AttentionSegment> segments;
  // A cached step's page table (AttentionSegment::kv_pages indexes it) and the positions a page
  // holds.
  std::vector<int32_t> kv_pages;
  int64_t kv_page_rows = 0;
  int32_t ids = -1, positions = -1, logit_rows = -1;  // inputs, written before op 0
  int32_t kv_rows = -1;                                // a cached step's input, -1 otherwise
  int32_t output = -1;                                 // logits or head statistics
  int64_t tokens = 0, candidates = 0;
  ChunkConfig chunks;
  // Bytes per element of the staged weights (graph/weight_staging.h); 0 when nothing is staged.
  size_t staged_weight_bytes = 0;
  // The ranks of tensor parallelism this graph is one rank's step of (graph/tensor_parallel.h): its
  // tensors have the shard's widths, its collectives join the ranks. 1: one device, no collectives.
  int64_t tensor_parallel = 1;
  // The ranks of context parallelism this graph is one rank's step of (graph/context_parallel.h).
  int64_t context_parallel = 1;

  bool cached() const { return kv_rows >= 0; }
  // Bytes of the resident tensors (the cache pages of this step's sequences).
  uint64_t resident_bytes() const;
  // Bytes of the tensors held in host memory for the step (a residual stream staged by rows).
  uint64_t host_bytes() const;
  int32_t op_count() const { return static_cast<int32_t>(ops.size()); }
  // A readable name such as "layer3.gate[2]" for reports and the memory timeline.
  std::string tensor_name(int32_t tensor) const;
};

std::string_view category_name(TensorCategory category);
std::string_view op_kind_name(OpKind kind);

}  // namespace mosaic
