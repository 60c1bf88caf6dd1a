#include "model/tensor_parallel.h"

#include <cstring>

#include "core/error.h"

namespace mosaic {
namespace {

// Rows [first, first + rows) of a 2-D weight, or elements of a 1-D one (a bias), as a view.
WeightView leading_range(const WeightView& whole, int64_t first, int64_t rows) {
  if (!whole) return whole;
  const int64_t row_elements = whole.shape.size() > 1 ? whole.shape[1] : 1;
  WeightView view = whole;
  view.data = static_cast<const std::byte*>(whole.data) + static_cast<size_t>(first * row_elements) * dtype_size(whole.dtype);
  view.shape[0] = rows;
  return view;
}

uint64_t view_bytes(const WeightView& view) {
  if (!view) return 0;
  uint64_t count = 1;
  for (const int64_t extent : view.shape) count *= static_cast<uint64_t>(extent);
  return count * dtype_size(view.dtype);
}

}  // namespace

void check_tensor_parallel(const ModelConfig& config, int64_t ranks) {
  if (ranks < 1) fail("--tensor-parallel {}: the rank count must be at least 1", ranks);
  if (ranks == 1) return;
  if (config.experts > 0)
    fail("--tensor-parallel {}: {} is a mixture-of-experts model; its experts are split by --expert-parallel, "
         "and tensor parallelism covers dense models (LLaDA, Dream) only",
         ranks, config.architecture);
  auto divides = [&](int64_t value, std::string_view what) {
    if (value % ranks != 0)
      fail("--tensor-parallel {}: the model's {} {} do not divide into {} equal parts", ranks, value, what, ranks);
  };
  divides(config.heads, "attention heads");
  if (config.kv_heads >= ranks) divides(config.kv_heads, "key/value heads");
  else if (ranks % config.kv_heads != 0)
    fail("--tensor-parallel {}: the model's {} key/value heads cannot be shared evenly by {} ranks (the rank count "
         "must divide them or be a multiple of them)",
         ranks, config.kv_heads, ranks);
  divides(config.ffn, "FFN columns");
  divides(config.vocab, "vocabulary rows");
}

ModelConfig tensor_parallel_config(const ModelConfig& config, int64_t ranks) {
  check_tensor_parallel(config, ranks);
  ModelConfig rank = config;
  rank.heads = config.heads / ranks;
  rank.kv_heads = std::max<int64_t>(1, config.kv_heads / ranks);
  rank.ffn = config.ffn / ranks;
  rank.vocab = config.vocab / ranks;
  return rank;
}

TensorParallelShard::TensorParallelShard(const Model& model, int64_t rank, int64_t ranks)
    : config_(tensor_parallel_config(model.config(), ranks)), rank_(rank), ranks_(ranks) {
  MOSAIC_ASSERT(rank >= 0 && rank < ranks, "rank {} of {}", rank, ranks);
  const ModelConfig& whole = model.config();
  const ModelWeights& from = model.weights();
  const int64_t q_rows = config_.q_dim(), kv_rows = config_.kv_dim(), ffn_rows = config_.ffn;
  // The first key/value head this rank reads: its own share, or the one its query heads share.
  const int64_t kv_head = whole.kv_heads >= ranks ? rank * config_.kv_heads : rank / (ranks / whole.kv_heads);
  const int64_t kv_first = kv_head * whole.head_dim;
  vocab_begin_ = rank * config_.vocab;

  weights_.embedding = leading_range(from.embedding, vocab_begin_, config_.vocab);
  weights_.final_norm = from.final_norm;
  weights_.lm_head = whole.tied_embeddings ? weights_.embedding : leading_range(from.lm_head, vocab_begin_, config_.vocab);
  weights_.layers.resize(from.layers.size());
  for (size_t l = 0; l < from.layers.size(); ++l) {
    const LayerWeights& src = from.layers[l];
    LayerWeights& dst = weights_.layers[l];
    dst.attn_norm = src.attn_norm, dst.ffn_norm = src.ffn_norm;
    dst.q_norm = src.q_norm, dst.k_norm = src.k_norm;
    dst.q = leading_range(src.q, rank * q_rows, q_rows);
    dst.q_bias = leading_range(src.q_bias, rank * q_rows, q_rows);
    dst.k = leading_range(src.k, kv_first, kv_rows);
    dst.k_bias = leading_range(src.k_bias, kv_first, kv_rows);
    dst.v = leading_range(src.v, kv_first, kv_rows);
    dst.v_bias = leading_range(src.v_bias, kv_first, kv_rows);
    dst.o = own_columns(src.o, rank * q_rows, q_rows);
    dst.gate = leading_range(src.gate, rank * ffn_rows, ffn_rows);
    dst.up = leading_range(src.up, rank * ffn_rows, ffn_rows);
    dst.down = own_columns(src.down, rank * ffn_rows, ffn_rows);
  }
  weights_.bytes = tensor_parallel_rank_bytes(model, ranks);
}

uint64_t tensor_parallel_rank_bytes(const Model& model, int64_t ranks) {
  const ModelConfig& whole = model.config();
  const ModelConfig rank = tensor_parallel_config(whole, ranks);
  const ModelWeights& w = model.weights();
  uint64_t bytes = view_bytes(w.final_norm) + view_bytes(w.embedding) / static_cast<uint64_t>(ranks);
  if (!whole.tied_embeddings) bytes += view_bytes(w.lm_head) / static_cast<uint64_t>(ranks);
  for (const LayerWeights& layer : w.layers) {
    for (const WeightView* whole_on_each : {&layer.attn_norm, &layer.ffn_norm, &layer.q_norm, &layer.k_norm})
      bytes += view_bytes(*whole_on_each);
    for (const WeightView* split : {&layer.q, &layer.q_bias, &layer.o, &layer.gate, &layer.up, &layer.down})
      bytes += view_bytes(*split) / static_cast<uint64_t>(ranks);
    // The rank's key/value heads of all of them (one head each where ranks share heads).
    for (const WeightView* kv : {&layer.k, &layer.k_bias, &layer.v, &layer.v_bias})
      bytes += view_bytes(*kv) / static_cast<uint64_t>(whole.kv_heads) * static_cast<uint64_t>(rank.kv_heads);
  }
  return bytes;
}

// Columns [first, first + cols) of a [rows, *] weight, copied so that the shard's rows are
// contiguous (a GEMM reads the weight as [rows, cols] with no stride of its own).
WeightView TensorParallelShard::own_columns(const WeightView& whole, int64_t first, int64_t cols) {
  const int64_t rows = whole.shape.at(0), stride = whole.shape.at(1);
  const size_t element = dtype_size(whole.dtype);
  auto copy = std::make_unique<std::byte[]>(static_cast<size_t>(rows * cols) * element);
  const auto* src = static_cast<const std::byte*>(whole.data);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(copy.get() + static_cast<size_t>(r * cols) * element,
                src + static_cast<size_t>(r * stride + first) * element, static_cast<size_t>(cols) * element);
  WeightView view{copy.get(), whole.dtype, {rows, cols}, whole.name};
  owned_.push_back(std::move(copy));
  return view;
}

}  // namespace mosaic
