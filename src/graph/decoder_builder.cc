#include "graph/decoder_builder.h"

#include <algorithm>

#include "core/error.h"
#include "graph/moe_ffn.h"

namespace mosaic {
namespace {

using Cat = TensorCategory;
using Role = TensorRole;

// The canvas length of sequence s: what full attention sees.
int64_t keys_of(const StepShape& shape, size_t s) {
  return shape.is_cached() ? shape.cached[s].keys : shape.lengths[s];
}

BlockLayout layout_of(const StepShape& shape, size_t s) {
  return shape.layouts.empty() ? BlockLayout{} : shape.layouts[s];
}

}  // namespace

DecoderBuilder::DecoderBuilder(const ModelConfig& config, const StepShape& step, const ChunkConfig& chunk_config,
                               const GraphOptions& graph_options)
    : c(config), shape(step), chunks(chunk_config), options(graph_options), offsets{0}, candidate_offsets{0} {
  for (const int64_t length : shape.lengths) offsets.push_back(offsets.back() + length);
  for (const int64_t count : shape.candidates) candidate_offsets.push_back(candidate_offsets.back() + count);
  T = shape.tokens();
  M = shape.total_candidates();
  R = T;
  // Runs of rows with one key range: a whole sequence under full attention, a block of it under
  // block-causal attention.
  for (size_t s = 0; s < shape.lengths.size(); ++s) {
    const int32_t sequence = static_cast<int32_t>(s);
    const BlockLayout layout = layout_of(shape, s);
    const int64_t keys = keys_of(shape, s);
    if (!layout.block_causal()) {
      row_runs.push_back({offsets[s], shape.lengths[s], sequence, keys});
      candidate_runs.push_back({candidate_offsets[s], shape.candidates[s], sequence, keys});
      continue;
    }
    const int64_t first = shape.first_position(s), end = first + shape.lengths[s];
    for (int64_t p = first; p < end;) {
      const int64_t until = std::min(end, layout.same_keys_until(p));
      row_runs.push_back({offsets[s] + p - first, until - p, sequence, layout.key_end(p)});
      p = until;
    }
    for (int64_t i = candidate_offsets[s]; i < candidate_offsets[s + 1]; ++i) {
      const int64_t key_end = layout.key_end(shape.candidate_positions[static_cast<size_t>(i)]);
      if (!candidate_runs.empty() && candidate_runs.back().sequence == sequence &&
          candidate_runs.back().key_end == key_end)
        ++candidate_runs.back().rows;
      else
        candidate_runs.push_back({i, 1, sequence, key_end});
    }
  }
  runs = &row_runs;
  kv_begin.assign(shape.lengths.size(), 0);
  kv_pages.assign(shape.lengths.size(), -1);
}

void DecoderBuilder::op(GraphOp op) {
  op.group = group;
  g.op(op);
}

GraphOp DecoderBuilder::make(OpKind kind, int32_t layer, WeightRole weight, TensorRef out, TensorRef a,
                             int64_t rows) const {
  GraphOp op;
  op.kind = kind, op.layer = layer, op.weight = weight, op.out = out, op.a = a, op.rows = rows;
  return op;
}

void DecoderBuilder::begin() {
  ids = g.tensor(Role::ids, Cat::input, DType::i32, T, 1);
  positions = g.tensor(Role::positions, Cat::input, DType::i32, T, 1);
  logit_rows = g.tensor(Role::logit_rows, Cat::input, DType::i32, M, 1);
  x = g.tensor(Role::residual, Cat::residual, act(), T, c.hidden);
  row_positions = positions;
  g.op(make(OpKind::embed, -1, WeightRole::embedding, {x, 0}, {ids, 0}, T));
}

void DecoderBuilder::norm(int32_t layer, WeightRole weight, int32_t out, int64_t row, int64_t rows) {
  op(make(OpKind::rms_norm, layer, weight, {out, 0}, {x, row}, rows));
}

void DecoderBuilder::linear(int32_t layer, WeightRole weight, TensorRef out, int32_t in, int64_t rows, bool bias) {
  GraphOp op = make(OpKind::linear, layer, weight, out, {in, 0}, rows);
  op.has_bias = bias;
  this->op(op);
}

void DecoderBuilder::linear_into_residual(int32_t layer, WeightRole weight, int32_t in, int64_t row, int64_t rows) {
  GraphOp op = make(OpKind::linear, layer, weight, {x, row}, {in, 0}, rows);
  op.accumulate = true;
  this->op(op);
}

void DecoderBuilder::rope(TensorRef target, int32_t positions_of_rows, int64_t row, int64_t rows) {
  GraphOp op = make(OpKind::rope, -1, WeightRole::embedding, target, {}, rows);
  op.b = {positions_of_rows, row};
  this->op(op);
}

void DecoderBuilder::encode_positions(int32_t layer, WeightRole projection, TensorRef target,
                                      int32_t positions_of_rows, int64_t row, int64_t rows) {
  if (c.qk_norm) {
    GraphOp norm = make(OpKind::head_norm, layer, projection == WeightRole::q ? WeightRole::q_norm : WeightRole::k_norm,
                        target, {}, rows);
    op(norm);
  }
  rope(target, positions_of_rows, row, rows);
}

void DecoderBuilder::attention(int32_t layer, int32_t out, int32_t q, int32_t k, int32_t v, int64_t row,
                               int64_t rows) {
  GraphOp op = make(OpKind::attention, layer, WeightRole::embedding, {out, 0}, {q, 0}, rows);
  op.b = {k, 0}, op.c = {v, 0};
  // Every run the query rows touch, against its keys; q_begin is relative to q's first row.
  std::vector<AttentionSegment> segments;
  for (const QueryRun& run : *runs) {
    const int64_t begin = std::max(row, run.row), end = std::min(row + rows, run.row + run.rows);
    if (begin >= end) continue;
    const size_t s = static_cast<size_t>(run.sequence);
    const int64_t splits = attention_key_splits(kv_pages[s] >= 0, shape.lengths[s], run.key_end);
    segments.push_back({begin - row, end - begin, kv_begin[s], run.key_end, kv_pages[s], splits});
  }
  op.segment_count = static_cast<int32_t>(segments.size());
  op.segment_begin = g.add_segments(segments);
  this->op(op);
}

void DecoderBuilder::query_tail(int32_t l, int32_t q, int32_t k, int32_t v, int64_t row, int64_t rows,
                                int32_t chunk) {
  const int64_t cap = g.graph().tensors[q].rows;
  const int32_t a = g.tensor(Role::attn_out, Cat::attention, act(), cap, c.q_dim(), l, chunk);
  attention(l, a, q, k, v, row, rows);
  linear_into_residual(l, WeightRole::o, a, row, rows);
}

int32_t DecoderBuilder::project_qkv(int32_t l, int32_t k, int32_t v) {
  const int32_t n = g.tensor(TensorRole::attn_norm, TensorCategory::norm, act(), T, c.hidden, l);
  norm(l, WeightRole::attn_norm, n, 0, T);
  const int32_t q = g.tensor(TensorRole::q, TensorCategory::query, act(), T, c.q_dim(), l);
  linear(l, WeightRole::q, {q, 0}, n, T, c.qkv_bias);
  linear(l, WeightRole::k, {k, 0}, n, T, c.qkv_bias);
  linear(l, WeightRole::v, {v, 0}, n, T, c.qkv_bias);
  encode_positions(l, WeightRole::q, {q, 0}, positions, 0, T);
  encode_positions(l, WeightRole::k, {k, 0}, positions, 0, T);
  return q;
}

void DecoderBuilder::query_pass(int32_t l, int32_t k, int32_t v) {
  group = ChunkGroup::attention;
  if (candidates_only(l)) gather_candidates();
  const int64_t q_rows = row_chunk(R, chunks.attention, 0).rows;
  for (int64_t i = 0; i < chunks.attention; ++i) {
    const RowChunk r = row_chunk(R, chunks.attention, i);
    const int32_t chunk = static_cast<int32_t>(i);
    const int32_t n = g.tensor(TensorRole::attn_norm, TensorCategory::norm, act(), q_rows, c.hidden, l, chunk);
    norm(l, WeightRole::attn_norm, n, r.begin, r.rows);
    const int32_t q = g.tensor(TensorRole::q, TensorCategory::query, act(), q_rows, c.q_dim(), l, chunk);
    linear(l, WeightRole::q, {q, 0}, n, r.rows, c.qkv_bias);
    encode_positions(l, WeightRole::q, {q, 0}, row_positions, r.begin, r.rows);
    query_tail(l, q, k, v, r.begin, r.rows, chunk);
  }
}

bool DecoderBuilder::candidates_only(int32_t l) const {
  return last_layer_over_candidates(options, chunks) && l + 1 == static_cast<int32_t>(c.layers);
}

// From here on the rows are the candidates: their residual rows and positions gathered in
// logit_rows order (a sequence's candidates are contiguous there, sequence by sequence).
void DecoderBuilder::gather_candidates() {
  const int32_t xc = g.tensor(Role::candidate_residual, Cat::residual, act(), M, c.hidden);
  GraphOp rows = make(OpKind::gather_rows, -1, WeightRole::embedding, {xc, 0}, {x, 0}, M);
  rows.index = {logit_rows, 0};
  op(rows);
  const int32_t pc = g.tensor(Role::candidate_positions, Cat::query, DType::i32, M, 1);
  GraphOp pos = make(OpKind::gather_rows, -1, WeightRole::embedding, {pc, 0}, {positions, 0}, M);
  pos.index = {logit_rows, 0};
  op(pos);
  x = xc, row_positions = pc, R = M, runs = &candidate_runs;
  head_reads_candidates = true;
}

void DecoderBuilder::ffn(int32_t l) {
  if (c.moe_layer(l)) moe_ffn_block(*this, l);
  else ffn_block(l);
}

void DecoderBuilder::ffn_block(int32_t l) {
  group = ChunkGroup::ffn;
  const int64_t cap = row_chunk(R, chunks.ffn, 0).rows;
  for (int64_t f = 0; f < chunks.ffn; ++f) {
    const RowChunk r = row_chunk(R, chunks.ffn, f);
    const int32_t chunk = chunks.ffn == 1 ? -1 : static_cast<int32_t>(f);
    const int32_t n = g.tensor(Role::ffn_norm, Cat::norm, act(), cap, c.hidden, l, chunk);
    norm(l, WeightRole::ffn_norm, n, r.begin, r.rows);
    swiglu_into_residual(l, n, r.begin, r.rows, c.ffn, cap, chunk);
  }
}

void DecoderBuilder::swiglu_into_residual(int32_t l, int32_t n, int64_t row, int64_t rows, int64_t width, int64_t cap,
                                          int32_t chunk) {
  const int32_t gate = g.tensor(Role::gate, Cat::ffn, act(), cap, width, l, chunk);
  linear(l, WeightRole::gate, {gate, 0}, n, rows);
  const int32_t up = g.tensor(Role::up, Cat::ffn, act(), cap, width, l, chunk);
  linear(l, WeightRole::up, {up, 0}, n, rows);
  GraphOp swiglu = make(OpKind::swiglu, l, WeightRole::embedding, {gate, 0}, {}, rows);
  swiglu.b = {up, 0};
  op(swiglu);
  linear_into_residual(l, WeightRole::down, gate, row, rows);
}

int32_t DecoderBuilder::head() {
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

Graph DecoderBuilder::finish() {
  const int32_t output = head();
  Graph graph = std::move(g).finish(output);
  graph.ids = ids, graph.positions = positions, graph.logit_rows = logit_rows;
  graph.tokens = T, graph.candidates = M;
  graph.chunks = chunks;
  return graph;
}

}  // namespace mosaic
