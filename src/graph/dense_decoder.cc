// Step graph template of the dense pre-norm decoders (LLaDA-8B, Dream-7B):
//
//   x = embed(ids)                                          residual [T, H]
//   per layer:
//     K/V pass, per qkv chunk of rows R:    n = norm(x[R]); K[R] = n Wk^T; V[R] = n Wv^T; rope(K[R])
//     query pass, per attention chunk Q:    n = norm(x[Q]); q = n Wq^T; rope(q)
//                                           x[Q] += attention(q, K, V) Wo^T
//     FFN, per ffn chunk F:                 n = norm(x[F]); x[F] += (silu(n Wg^T) * n Wu^T) Wd^T
//   (each "x +=" is the projection itself, accumulating into the residual rows: no projection
//   output tensor, no separate add; docs/design/fused-residual.md)
//   head, per head chunk C of candidates:  h = norm(x[logit_rows[C]]); logits[C] = h Wlm^T
//                                           (or per-row statistics when fused)
//
// Unchunked, the norm feeding Q, K and V is computed once; chunked, the query pass recomputes
// it for its rows (cheap) so that no full-length Q or norm output is ever live. Every row's
// arithmetic is the same in both forms, so chunking never changes a result.
//
// The last layer's outputs feed only the head, which reads only the candidate rows. So after
// its K/V pass over all rows, the last layer gathers the candidates' residual rows and
// positions (xc = x[logit_rows]) and runs its query pass and FFN over those M rows alone, the
// head reading xc directly (docs/design/last-layer-candidates.md). Each row's arithmetic is the
// same as in the full layer, so this too changes no result.
#include <algorithm>

#include "graph/graph_builder.h"
#include "graph/step_graph.h"

namespace mosaic {
namespace {

using Cat = TensorCategory;
using Role = TensorRole;

struct Builder {
  const ModelConfig& c;
  const ChunkConfig& chunks;
  const GraphOptions& options;
  GraphBuilder g;
  std::vector<int64_t> offsets;  // packed sequence starts, size batch + 1
  std::vector<int64_t> candidate_offsets;  // candidate rows per sequence, packed, size batch + 1
  int32_t ids = -1, positions = -1, logit_rows = -1;
  int64_t T = 0, M = 0;
  // The rows the query pass and the FFN work on: every token's (x, positions, offsets, T), or in
  // the last layer the candidates' (candidate_residual, candidate_positions, candidate_offsets, M).
  int32_t x = -1, row_positions = -1;
  int64_t R = 0;
  const std::vector<int64_t>* row_offsets = &offsets;
  bool head_reads_candidates = false;  // x holds exactly the head's rows, in logit_rows order
  ChunkGroup group = ChunkGroup::none;  // stamped on every op added

  void op(GraphOp op) {
    op.group = group;
    g.op(op);
  }

  DType act() const { return options.activations; }

  GraphOp make(OpKind kind, int32_t layer, WeightRole weight, TensorRef out, TensorRef a,
               int64_t rows) {
    GraphOp op;
    op.kind = kind, op.layer = layer, op.weight = weight, op.out = out, op.a = a, op.rows = rows;
    return op;
  }

  void norm(int32_t layer, WeightRole weight, int32_t out, int64_t row, int64_t rows) {
    op(make(OpKind::rms_norm, layer, weight, {out, 0}, {x, row}, rows));
  }

  void linear(int32_t layer, WeightRole weight, TensorRef out, int32_t in, int64_t rows,
              bool bias = false) {
    GraphOp op = make(OpKind::linear, layer, weight, out, {in, 0}, rows);
    op.has_bias = bias;
    this->op(op);
  }

  // x[row, row + rows) += in W^T: a projection closing a residual block.
  void linear_into_residual(int32_t layer, WeightRole weight, int32_t in, int64_t row, int64_t rows) {
    GraphOp op = make(OpKind::linear, layer, weight, {x, row}, {in, 0}, rows);
    op.accumulate = true;
    this->op(op);
  }

  void rope(TensorRef target, int32_t positions_of_rows, int64_t row, int64_t rows) {
    GraphOp op = make(OpKind::rope, -1, WeightRole::embedding, target, {}, rows);
    op.b = {positions_of_rows, row};
    this->op(op);
  }

  // Segments of the query rows [row, row + rows) of the current rows (row_offsets): every
  // sequence they touch, against all of that sequence's keys. q_begin is relative to the query
  // tensor's first row.
  int32_t segments_for(int64_t row, int64_t rows, int32_t* count) {
    const std::vector<int64_t>& q = *row_offsets;
    std::vector<AttentionSegment> segments;
    for (size_t s = 0; s + 1 < q.size(); ++s) {
      const int64_t begin = std::max(row, q[s]), end = std::min(row + rows, q[s + 1]);
      if (begin >= end) continue;
      segments.push_back({begin - row, end - begin, offsets[s], offsets[s + 1] - offsets[s]});
    }
    *count = static_cast<int32_t>(segments.size());
    return g.add_segments(segments);
  }

  void attention(int32_t layer, int32_t out, int32_t q, int32_t k, int32_t v, int64_t row,
                 int64_t rows) {
    GraphOp op = make(OpKind::attention, layer, WeightRole::embedding, {out, 0}, {q, 0}, rows);
    op.b = {k, 0}, op.c = {v, 0};
    op.segment_begin = segments_for(row, rows, &op.segment_count);
    this->op(op);
  }

  bool candidates_only(int32_t l) const {
    return last_layer_over_candidates(options, chunks) && l + 1 == static_cast<int32_t>(c.layers);
  }

  void attention_block(int32_t l) {
    group = ChunkGroup::attention;  // unchunked, the shared norm/Q/K/V ops count as the query side
    const int32_t k = g.tensor(Role::k, Cat::kv, act(), T, c.kv_dim(), l);
    const int32_t v = g.tensor(Role::v, Cat::kv, act(), T, c.kv_dim(), l);
    if (chunks.qkv == 1 && chunks.attention == 1 && !candidates_only(l)) {
      const int32_t n = g.tensor(Role::attn_norm, Cat::norm, act(), T, c.hidden, l);
      norm(l, WeightRole::attn_norm, n, 0, T);
      const int32_t q = g.tensor(Role::q, Cat::query, act(), T, c.q_dim(), l);
      linear(l, WeightRole::q, {q, 0}, n, T, c.qkv_bias);
      linear(l, WeightRole::k, {k, 0}, n, T, c.qkv_bias);
      linear(l, WeightRole::v, {v, 0}, n, T, c.qkv_bias);
      rope({q, 0}, positions, 0, T);
      rope({k, 0}, positions, 0, T);
      query_tail(l, q, k, v, 0, T, -1);
      return;
    }
    group = ChunkGroup::qkv;
    const int64_t kv_rows = row_chunk(T, chunks.qkv, 0).rows;
    for (int64_t j = 0; j < chunks.qkv; ++j) {
      const RowChunk r = row_chunk(T, chunks.qkv, j);
      const int32_t n = g.tensor(Role::attn_norm, Cat::norm, act(), kv_rows, c.hidden, l, int32_t(j));
      norm(l, WeightRole::attn_norm, n, r.begin, r.rows);
      linear(l, WeightRole::k, {k, r.begin}, n, r.rows, c.qkv_bias);
      linear(l, WeightRole::v, {v, r.begin}, n, r.rows, c.qkv_bias);
      rope({k, r.begin}, positions, r.begin, r.rows);
    }
    group = ChunkGroup::attention;
    if (candidates_only(l)) gather_candidates();
    const int64_t q_rows = row_chunk(R, chunks.attention, 0).rows;
    for (int64_t i = 0; i < chunks.attention; ++i) {
      const RowChunk r = row_chunk(R, chunks.attention, i);
      const int32_t chunk = static_cast<int32_t>(i);
      const int32_t n = g.tensor(Role::attn_norm, Cat::norm, act(), q_rows, c.hidden, l, chunk);
      norm(l, WeightRole::attn_norm, n, r.begin, r.rows);
      const int32_t q = g.tensor(Role::q, Cat::query, act(), q_rows, c.q_dim(), l, chunk);
      linear(l, WeightRole::q, {q, 0}, n, r.rows, c.qkv_bias);
      rope({q, 0}, row_positions, r.begin, r.rows);
      query_tail(l, q, k, v, r.begin, r.rows, chunk);
    }
  }

  // From here on the rows are the candidates: their residual rows and positions gathered in
  // logit_rows order (a sequence's candidates are contiguous there, sequence by sequence).
  void gather_candidates() {
    const int32_t xc = g.tensor(Role::candidate_residual, Cat::residual, act(), M, c.hidden);
    GraphOp rows = make(OpKind::gather_rows, -1, WeightRole::embedding, {xc, 0}, {x, 0}, M);
    rows.index = {logit_rows, 0};
    op(rows);
    const int32_t pc = g.tensor(Role::candidate_positions, Cat::query, DType::i32, M, 1);
    GraphOp pos = make(OpKind::gather_rows, -1, WeightRole::embedding, {pc, 0}, {positions, 0}, M);
    pos.index = {logit_rows, 0};
    op(pos);
    x = xc, row_positions = pc, R = M, row_offsets = &candidate_offsets;
    head_reads_candidates = true;
  }

  // attention over the query rows [row, row + rows) held in q, its projection added to x.
  void query_tail(int32_t l, int32_t q, int32_t k, int32_t v, int64_t row, int64_t rows,
                  int32_t chunk) {
    const int64_t cap = g.graph().tensors[q].rows;
    const int32_t a = g.tensor(Role::attn_out, Cat::attention, act(), cap, c.q_dim(), l, chunk);
    attention(l, a, q, k, v, row, rows);
    linear_into_residual(l, WeightRole::o, a, row, rows);
  }

  void ffn_block(int32_t l) {
    group = ChunkGroup::ffn;
    const int64_t cap = row_chunk(R, chunks.ffn, 0).rows;
    for (int64_t f = 0; f < chunks.ffn; ++f) {
      const RowChunk r = row_chunk(R, chunks.ffn, f);
      const int32_t chunk = chunks.ffn == 1 ? -1 : static_cast<int32_t>(f);
      const int32_t n = g.tensor(Role::ffn_norm, Cat::norm, act(), cap, c.hidden, l, chunk);
      norm(l, WeightRole::ffn_norm, n, r.begin, r.rows);
      const int32_t gate = g.tensor(Role::gate, Cat::ffn, act(), cap, c.ffn, l, chunk);
      linear(l, WeightRole::gate, {gate, 0}, n, r.rows);
      const int32_t up = g.tensor(Role::up, Cat::ffn, act(), cap, c.ffn, l, chunk);
      linear(l, WeightRole::up, {up, 0}, n, r.rows);
      GraphOp swiglu = make(OpKind::swiglu, l, WeightRole::embedding, {gate, 0}, {}, r.rows);
      swiglu.b = {up, 0};
      op(swiglu);
      linear_into_residual(l, WeightRole::down, gate, r.begin, r.rows);
    }
  }

  int32_t head() {
    group = ChunkGroup::head;
    const bool fused = options.head == HeadMode::stats;
    const int32_t out = fused ? g.tensor(Role::head_stats, Cat::head, DType::f32, M, kHeadStatsCols)
                              : g.tensor(Role::logits, Cat::head, DType::f32, M, c.vocab);
    const int64_t cap = row_chunk(M, chunks.head, 0).rows;
    for (int64_t h = 0; h < chunks.head; ++h) {
      const RowChunk r = row_chunk(M, chunks.head, h);
      const int32_t chunk = chunks.head == 1 ? -1 : static_cast<int32_t>(h);
      const int32_t n = g.tensor(Role::head_norm, Cat::head, act(), cap, c.hidden, -1, chunk);
      if (head_reads_candidates) {
        op(make(OpKind::rms_norm, -1, WeightRole::final_norm, {n, 0}, {x, r.begin}, r.rows));
      } else {
        GraphOp gather = make(OpKind::rms_norm, -1, WeightRole::final_norm, {n, 0}, {x, 0}, r.rows);
        gather.index = {logit_rows, r.begin};
        op(gather);
      }
      GraphOp lm_head = make(fused ? OpKind::lm_head_stats : OpKind::lm_head, -1, WeightRole::lm_head,
                             {out, r.begin}, {n, 0}, r.rows);
      if (fused && options.head_scratch_per_row > 0)
        lm_head.scratch = {g.tensor(Role::head_scratch, Cat::head, DType::u8, cap,
                                    static_cast<int64_t>(options.head_scratch_per_row), -1, chunk), 0};
      op(lm_head);
    }
    return out;
  }
};

}  // namespace

Graph build_dense_decoder_graph(const ModelConfig& config, const StepShape& shape,
                                const ChunkConfig& chunks, const GraphOptions& options) {
  Builder b{config, chunks, options, {}, {0}, {0}};
  for (const int64_t length : shape.lengths) b.offsets.push_back(b.offsets.back() + length);
  for (const int64_t count : shape.candidates) b.candidate_offsets.push_back(b.candidate_offsets.back() + count);
  b.T = shape.tokens();
  b.M = shape.total_candidates();
  b.R = b.T;
  b.ids = b.g.tensor(Role::ids, Cat::input, DType::i32, b.T, 1);
  b.positions = b.g.tensor(Role::positions, Cat::input, DType::i32, b.T, 1);
  b.logit_rows = b.g.tensor(Role::logit_rows, Cat::input, DType::i32, b.M, 1);
  b.x = b.g.tensor(Role::residual, Cat::residual, options.activations, b.T, config.hidden);
  b.row_positions = b.positions;
  b.g.op(b.make(OpKind::embed, -1, WeightRole::embedding, {b.x, 0}, {b.ids, 0}, b.T));
  for (int32_t l = 0; l < static_cast<int32_t>(config.layers); ++l) {
    b.attention_block(l);
    b.ffn_block(l);
  }
  const int32_t output = b.head();
  Graph graph = std::move(b.g).finish(output);
  graph.ids = b.ids, graph.positions = b.positions, graph.logit_rows = b.logit_rows;
  graph.tokens = b.T, graph.candidates = b.M;
  graph.chunks = chunks;
  return graph;
}

}  // namespace mosaic
