// Step graph template of the cached step of the dense pre-norm decoders (LLaDA, Dream;
// docs/design/kv-cache.md): only some rows of each sequence are computed — the positions
// [begin, begin + rows) — and their queries read the keys and values of the whole canvas from the
// sequence's KV cache, into which the step first writes its own rows' fresh K and V.
//
//   x = embed(ids of the computed rows)                     residual [T, H]
//   per layer:
//     K/V pass, per qkv chunk of rows R:  n = norm(x[R]); k = n Wk^T; v = n Wv^T; rope(k)
//                                         cache_k[kv_rows[R]] = k; cache_v[kv_rows[R]] = v
//     query pass, per attention chunk Q:  n = norm(x[Q]); q = n Wq^T; rope(q)
//                                         x[Q] += attention(q, cache_k, cache_v) Wo^T
//     FFN and head:                       as the full step (decoder_builder.h)
//
// cache_k and cache_v are resident tensors (the pool's K and V of the layer): the plan places
// nothing for them, the executor binds them to the cache. A query's keys are positions
// [0, key_end) of its sequence (the canvas, or its block's end under block-causal attention),
// reached through the sequence's page table. Row for row the arithmetic is that of the full step,
// so a step that computes every row of a canvas gives the full step's bits; and as there, neither
// chunking nor the last layer's candidate rows change a result.
#include "graph/decoder_builder.h"
#include "graph/graph_builder.h"
#include "graph/step_graph.h"

namespace mosaic {
namespace {

using Cat = TensorCategory;
using Role = TensorRole;

struct CachedLayerTensors {
  int32_t cache_k = -1, cache_v = -1;
};

// K/V of rows [row, row + rows) (held in k, v from row 0) into the cache, at their rows there.
void store_rows(DecoderBuilder& b, int32_t cache, int32_t fresh, int32_t kv_rows, int64_t row, int64_t rows) {
  GraphOp store = b.make(OpKind::scatter_rows, -1, WeightRole::embedding, {cache, 0}, {fresh, 0}, rows);
  store.index = {kv_rows, row};
  b.op(store);
}

void attention_block(DecoderBuilder& b, int32_t l, const CachedLayerTensors& cache, int32_t kv_rows) {
  const ModelConfig& c = b.c;
  const ChunkConfig& chunks = b.chunks;
  GraphBuilder& g = b.g;
  const int64_t T = b.T;
  b.group = ChunkGroup::attention;  // unchunked, the shared norm/Q/K/V ops count as the query side
  if (chunks.qkv == 1 && chunks.attention == 1 && !b.candidates_only(l)) {
    const int32_t k = g.tensor(Role::k, Cat::kv, b.act(), T, c.kv_dim(), l);
    const int32_t v = g.tensor(Role::v, Cat::kv, b.act(), T, c.kv_dim(), l);
    const int32_t q = b.project_qkv(l, k, v);
    store_rows(b, cache.cache_k, k, kv_rows, 0, T);
    store_rows(b, cache.cache_v, v, kv_rows, 0, T);
    b.query_tail(l, q, cache.cache_k, cache.cache_v, 0, T, -1);
    return;
  }
  b.group = ChunkGroup::qkv;
  const int64_t kv_cap = row_chunk(T, chunks.qkv, 0).rows;
  for (int64_t j = 0; j < chunks.qkv; ++j) {
    const RowChunk r = row_chunk(T, chunks.qkv, j);
    const int32_t chunk = static_cast<int32_t>(j);
    const int32_t n = g.tensor(Role::attn_norm, Cat::norm, b.act(), kv_cap, c.hidden, l, chunk);
    b.norm(l, WeightRole::attn_norm, n, r.begin, r.rows);
    const int32_t k = g.tensor(Role::k, Cat::kv, b.act(), kv_cap, c.kv_dim(), l, chunk);
    const int32_t v = g.tensor(Role::v, Cat::kv, b.act(), kv_cap, c.kv_dim(), l, chunk);
    b.linear(l, WeightRole::k, {k, 0}, n, r.rows, c.qkv_bias);
    b.linear(l, WeightRole::v, {v, 0}, n, r.rows, c.qkv_bias);
    b.encode_positions(l, WeightRole::k, {k, 0}, b.positions, r.begin, r.rows);
    store_rows(b, cache.cache_k, k, kv_rows, r.begin, r.rows);
    store_rows(b, cache.cache_v, v, kv_rows, r.begin, r.rows);
  }
  b.query_pass(l, cache.cache_k, cache.cache_v);
}

}  // namespace

Graph build_cached_decoder_graph(const ModelConfig& config, const StepShape& shape,
                                 const ChunkConfig& chunks, const GraphOptions& options) {
  DecoderBuilder b(config, shape, chunks, options);
  // Every sequence's keys are its cache positions from 0, through its page table.
  std::vector<int32_t> pages;
  int64_t cache_rows = 0;
  for (size_t s = 0; s < shape.cached.size(); ++s) {
    b.kv_pages[s] = static_cast<int64_t>(pages.size());
    pages.insert(pages.end(), shape.cached[s].pages.begin(), shape.cached[s].pages.end());
    cache_rows += static_cast<int64_t>(shape.cached[s].pages.size()) * shape.page_rows;
  }
  const int32_t kv_rows = b.g.tensor(Role::kv_rows, Cat::input, DType::i32, b.T, 1);
  std::vector<CachedLayerTensors> cache(static_cast<size_t>(config.layers));
  for (int32_t l = 0; l < static_cast<int32_t>(config.layers); ++l) {
    CachedLayerTensors& layer = cache[static_cast<size_t>(l)];
    layer.cache_k = b.g.tensor(Role::cache_k, Cat::kv_cache, options.activations, cache_rows, config.kv_dim(), l);
    layer.cache_v = b.g.tensor(Role::cache_v, Cat::kv_cache, options.activations, cache_rows, config.kv_dim(), l);
    b.g.graph().tensors[static_cast<size_t>(layer.cache_k)].resident = true;
    b.g.graph().tensors[static_cast<size_t>(layer.cache_v)].resident = true;
  }
  b.begin();
  for (int32_t l = 0; l < static_cast<int32_t>(config.layers); ++l) {
    attention_block(b, l, cache[static_cast<size_t>(l)], kv_rows);
    b.ffn(l);
  }
  Graph graph = b.finish();
  graph.kv_rows = kv_rows;
  graph.kv_pages = std::move(pages);
  graph.kv_page_rows = shape.page_rows;
  return graph;
}

}  // namespace mosaic
