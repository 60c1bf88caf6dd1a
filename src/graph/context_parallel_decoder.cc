// Step graph template of one context-parallel rank (graph/context_parallel.h): the dense
// decoder's ops over the rank's S rows, each layer's keys and values gathered from every rank.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "graph/context_parallel.h"
#include "graph/decoder_builder.h"
#include "graph/graph_builder.h"

namespace mosaic {
namespace {

using Cat = TensorCategory;
using Role = TensorRole;

// The rank's rows of the layer's K and V, gathered into K and V over every rank's rows; then the
// query pass of its rows against them.
void attention_block(DecoderBuilder& b, int32_t l, int64_t gathered_rows) {
  const ModelConfig& c = b.c;
  GraphBuilder& g = b.g;
  const int64_t S = b.T;
  const int32_t k_rows = g.tensor(Role::k_rows, Cat::kv, b.act(), S, c.kv_dim(), l);
  const int32_t v_rows = g.tensor(Role::v_rows, Cat::kv, b.act(), S, c.kv_dim(), l);
  const int32_t k = g.tensor(Role::k, Cat::kv, b.act(), gathered_rows, c.kv_dim(), l);
  const int32_t v = g.tensor(Role::v, Cat::kv, b.act(), gathered_rows, c.kv_dim(), l);
  auto gather = [&] {
    for (const auto& [to, from] : {std::pair{k, k_rows}, std::pair{v, v_rows}}) {
      GraphOp op{.kind = OpKind::all_gather_rows};
      op.layer = l, op.out = {to, 0}, op.a = {from, 0}, op.rows = S, op.group = b.group;
      g.op(op);
    }
  };
  if (b.chunks.qkv == 1 && b.chunks.attention == 1 && !b.candidates_only(l)) {
    b.group = ChunkGroup::attention;  // one norm feeds Q, K and V
    const int32_t q = b.project_qkv(l, k_rows, v_rows);
    gather();
    b.query_tail(l, q, k, v, 0, S, -1);
    return;
  }
  b.group = ChunkGroup::qkv;
  const int64_t chunk_rows = row_chunk(S, b.chunks.qkv, 0).rows;
  for (int64_t j = 0; j < b.chunks.qkv; ++j) {
    const RowChunk r = row_chunk(S, b.chunks.qkv, j);
    const int32_t n = g.tensor(Role::attn_norm, Cat::norm, b.act(), chunk_rows, c.hidden, l, int32_t(j));
    b.norm(l, WeightRole::attn_norm, n, r.begin, r.rows);
    b.linear(l, WeightRole::k, {k_rows, r.begin}, n, r.rows, c.qkv_bias);
    b.linear(l, WeightRole::v, {v_rows, r.begin}, n, r.rows, c.qkv_bias);
    b.encode_positions(l, WeightRole::k, {k_rows, r.begin}, b.positions, r.begin, r.rows);
  }
  gather();
  b.query_pass(l, k, v);
}

}  // namespace

Graph build_context_parallel_decoder_graph(const ModelConfig& config, const StepShape& shape,
                                           const ChunkConfig& chunks, const GraphOptions& options) {
  const int64_t ranks = options.context_parallel, rank = options.context_rank;
  if (rank < 0 || rank >= ranks) fail("context-parallel rank {} of {}", rank, ranks);
  if (shape.is_cached()) fail("--context-parallel {}: a cached step is not supported yet (expected --cache none)", ranks);
  DecoderBuilder b(config, shape, chunks, options);
  // Keys: every sequence's packed rows, in the gathered K and V.
  b.kv_begin.assign(b.offsets.begin(), b.offsets.end() - 1);
  const int64_t T = b.T, S = context_parallel_rows(T, ranks), first = rank * S;
  const int64_t real = std::clamp<int64_t>(T - first, 0, S);
  // The rank's query runs, from the batch's (their key ranges unchanged), in its own row numbers;
  // its ghost rows attend to key 0 (any real key: they are never read).
  std::vector<QueryRun> local;
  for (const QueryRun& run : b.row_runs) {
    const int64_t begin = std::max(run.row, first), end = std::min(run.row + run.rows, first + real);
    if (begin < end) local.push_back({begin - first, end - begin, run.sequence, run.key_end});
  }
  if (real < S) local.push_back({real, S - real, 0, 1});
  b.row_runs = std::move(local);
  b.runs = &b.row_runs;
  b.T = b.R = S;
  b.begin();
  for (int32_t l = 0; l < static_cast<int32_t>(config.layers); ++l) {
    attention_block(b, l, ranks * S);
    b.ffn(l);
  }
  Graph graph = b.finish();
  graph.context_parallel = ranks;
  return graph;
}

}  // namespace mosaic
