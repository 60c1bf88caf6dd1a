// What the step templates of the dense pre-norm decoders share (dense_decoder.cc: the full step;
// cached_decoder.cc: the cached step): the inputs and the embedding, the norms and projections,
// the last layer's candidate rows, the FFN and the LM head, and the attention segments of a run
// of query rows. The templates differ only in where a layer's keys and values live — the step's
// own K/V tensors, or the sequences' cache pages — so each writes its attention block itself.
#pragma once

#include <vector>

#include "graph/graph_builder.h"
#include "graph/step_shape.h"
#include "model/config.h"

namespace mosaic {

// Query rows [row, row + rows) of one sequence whose key ranges are the same: keys [0, key_end)
// of the sequence.
struct QueryRun {
  int64_t row = 0, rows = 0;
  int32_t sequence = 0;
  int64_t key_end = 0;
};

struct DecoderBuilder {
  DecoderBuilder(const ModelConfig& config, const StepShape& shape, const ChunkConfig& chunks,
                 const GraphOptions& options);

  const ModelConfig& c;
  const StepShape& shape;
  const ChunkConfig& chunks;
  const GraphOptions& options;
  GraphBuilder g;
  std::vector<int64_t> offsets;            // packed computed rows per sequence, size batch + 1
  std::vector<int64_t> candidate_offsets;  // candidate rows per sequence, packed, size batch + 1
  int32_t ids = -1, positions = -1, logit_rows = -1;
  int64_t T = 0, M = 0;
  // The rows the query pass and the FFN work on: every computed row's (x, positions, T), or in the
  // last layer the candidates' (candidate_residual, candidate_positions, M), with their runs.
  int32_t x = -1, row_positions = -1;
  int64_t R = 0;
  const std::vector<QueryRun>* runs = nullptr;
  std::vector<QueryRun> row_runs, candidate_runs;
  // Per sequence, where its keys are: the first key row and the page table's offset (-1: rows of
  // the step's own K/V).
  std::vector<int64_t> kv_begin, kv_pages;
  bool head_reads_candidates = false;  // x holds exactly the head's rows, in logit_rows order
  ChunkGroup group = ChunkGroup::none;  // stamped on every op added

  DType act() const { return options.activations; }
  void op(GraphOp op);
  GraphOp make(OpKind kind, int32_t layer, WeightRole weight, TensorRef out, TensorRef a, int64_t rows) const;

  // The inputs, the residual stream and the embedding (the template adds its own inputs first).
  void begin();
  void norm(int32_t layer, WeightRole weight, int32_t out, int64_t row, int64_t rows);
  void linear(int32_t layer, WeightRole weight, TensorRef out, int32_t in, int64_t rows, bool bias = false);
  // x[row, row + rows) += in W^T: a projection closing a residual block.
  void linear_into_residual(int32_t layer, WeightRole weight, int32_t in, int64_t row, int64_t rows);
  void rope(TensorRef target, int32_t positions_of_rows, int64_t row, int64_t rows);
  // Positions into freshly projected q or k rows (`projection`: q or k): the per-head norm of a
  // model that has one (LLaDA-MoE's q_norm / k_norm), then RoPE.
  void encode_positions(int32_t layer, WeightRole projection, TensorRef target, int32_t positions_of_rows,
                        int64_t row, int64_t rows);
  // out = attention of the current rows [row, row + rows) (their queries in q, from row 0)
  // against k / v, over the segments of their runs.
  void attention(int32_t layer, int32_t out, int32_t q, int32_t k, int32_t v, int64_t row, int64_t rows);
  // The unchunked K/V and Q projections of layer l over every row into k, v (T rows) and a new
  // q, from one norm, RoPE'd; returns q.
  int32_t project_qkv(int32_t l, int32_t k, int32_t v);
  // attention over the query rows [row, row + rows) held in q, its projection added to x.
  void query_tail(int32_t layer, int32_t q, int32_t k, int32_t v, int64_t row, int64_t rows, int32_t chunk);
  // The chunked query pass of layer l once its keys and values are in k and v: the candidates'
  // rows gathered first in the last layer (candidates_only), then per attention chunk the norm,
  // the Q projection, RoPE and query_tail.
  void query_pass(int32_t l, int32_t k, int32_t v);
  // Whether layer l runs its query pass and FFN over the candidate rows only.
  bool candidates_only(int32_t l) const;
  // From here on the rows are the candidates (their residual rows and positions gathered).
  void gather_candidates();
  // Layer l's FFN: the dense SwiGLU (ffn_block) or, for a mixture-of-experts layer, the expert
  // group (graph/moe_ffn.h), over the current rows in ffn chunks.
  void ffn(int32_t l);
  void ffn_block(int32_t l);
  // x[row, row + rows) += down(silu(gate(n)) * up(n)) of layer l's gate / up / down weights, width
  // `width`, over normalised rows n: the dense FFN, or LLaDA 2.x's shared expert in an expert layer.
  void swiglu_into_residual(int32_t l, int32_t n, int64_t row, int64_t rows, int64_t width, int64_t cap, int32_t chunk);
  int32_t head();
  Graph finish();
};

}  // namespace mosaic
