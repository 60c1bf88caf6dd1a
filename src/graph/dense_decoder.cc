// Step graph template of the pre-norm decoders (LLaDA-8B, Dream-7B, LLaDA-MoE; a layer's FFN is
// the dense SwiGLU below or the mixture-of-experts group of graph/moe_ffn.h, its q and k
// normalised per head where the model says so):
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
#include "graph/decoder_builder.h"
#include "graph/graph_builder.h"
#include "graph/step_graph.h"

namespace mosaic {
namespace {

using Cat = TensorCategory;
using Role = TensorRole;

// A layer's attention block over the step's own K and V (full length: every row of every
// sequence). A sequence's keys are its packed rows; block-causal layouts cut each run of queries'
// range to its block's end.
void attention_block(DecoderBuilder& b, int32_t l) {
  const ModelConfig& c = b.c;
  const ChunkConfig& chunks = b.chunks;
  GraphBuilder& g = b.g;
  const int64_t T = b.T;
  b.group = ChunkGroup::attention;  // unchunked, the shared norm/Q/K/V ops count as the query side
  const int32_t k = g.tensor(Role::k, Cat::kv, b.act(), T, c.kv_dim(), l);
  const int32_t v = g.tensor(Role::v, Cat::kv, b.act(), T, c.kv_dim(), l);
  if (chunks.qkv == 1 && chunks.attention == 1 && !b.candidates_only(l)) {
    b.query_tail(l, b.project_qkv(l, k, v), k, v, 0, T, -1);
    return;
  }
  b.group = ChunkGroup::qkv;
  const int64_t kv_rows = row_chunk(T, chunks.qkv, 0).rows;
  for (int64_t j = 0; j < chunks.qkv; ++j) {
    const RowChunk r = row_chunk(T, chunks.qkv, j);
    const int32_t n = g.tensor(Role::attn_norm, Cat::norm, b.act(), kv_rows, c.hidden, l, int32_t(j));
    b.norm(l, WeightRole::attn_norm, n, r.begin, r.rows);
    b.linear(l, WeightRole::k, {k, r.begin}, n, r.rows, c.qkv_bias);
    b.linear(l, WeightRole::v, {v, r.begin}, n, r.rows, c.qkv_bias);
    b.encode_positions(l, WeightRole::k, {k, r.begin}, b.positions, r.begin, r.rows);
  }
  b.query_pass(l, k, v);
}

}  // namespace

Graph build_dense_decoder_graph(const ModelConfig& config, const StepShape& shape,
                                const ChunkConfig& chunks, const GraphOptions& options) {
  DecoderBuilder b(config, shape, chunks, options);
  b.kv_begin.assign(b.offsets.begin(), b.offsets.end() - 1);  // a sequence's keys: its packed rows
  b.begin();
  for (int32_t l = 0; l < static_cast<int32_t>(config.layers); ++l) {
    attention_block(b, l);
    b.ffn(l);
  }
  return b.finish();
}

}  // namespace mosaic
