// Tensor parallelism over R ranks (docs/design/tensor-parallel.md): what one rank of a dense
// decoder holds. Attention heads and FFN columns are split in contiguous ranges, so a rank's
// layer is the same pre-norm decoder layer over fewer heads and a narrower FFN:
//
//   q, k, v (+ biases)   rows of rank r's heads       column-parallel: no communication
//   o                    its heads' input columns     row-parallel: partial sums, all-reduced
//   gate, up             rows [r F/R, (r+1) F/R)      column-parallel
//   down                 the same input columns       row-parallel: all-reduced
//   embedding, lm_head   vocabulary rows [r V/R, (r+1) V/R): the embedding's rows of other
//                        ranks' ids are zero before an all-reduce, the head's per-row summaries
//                        are combined across ranks (core/head_stats_combine.h)
//   norms                whole, on every rank
//
// With fewer key/value heads than ranks (grouped-query attention), each key/value head is held
// by the ranks whose query heads read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/model_weights.h"

namespace mosaic {

// Throws mosaic::Error naming the dimension when `config` cannot be split over `ranks` (heads,
// key/value heads, FFN width or vocabulary not divisible; a mixture-of-experts model, which
// --expert-parallel splits, not --tensor-parallel).
void check_tensor_parallel(const ModelConfig& config, int64_t ranks);

// The configuration one rank computes: heads / R query heads, max(1, kv_heads / R) key/value
// heads, FFN width F / R and vocabulary V / R; everything else as `config`. Checks first.
ModelConfig tensor_parallel_config(const ModelConfig& config, int64_t ranks);

// The weight bytes each rank of `ranks` holds (TensorParallelShard::weights().bytes), without
// building a shard. Checks first.
uint64_t tensor_parallel_rank_bytes(const Model& model, int64_t ranks);

// Rank `rank`'s weights of `model`, shaped as tensor_parallel_config says. Row ranges are views
// into the model's tensors; the row-parallel projections' column ranges (o, down) are copies the
// shard owns. `vocab_begin` is the global id of the rank's first vocabulary row.
class TensorParallelShard {
 public:
  TensorParallelShard(const Model& model, int64_t rank, int64_t ranks);
  TensorParallelShard(const TensorParallelShard&) = delete;
  TensorParallelShard& operator=(const TensorParallelShard&) = delete;

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  int64_t rank() const { return rank_; }
  int64_t ranks() const { return ranks_; }
  int64_t vocab_begin() const { return vocab_begin_; }

 private:
  WeightView own_columns(const WeightView& whole, int64_t first, int64_t cols);

  ModelConfig config_;
  ModelWeights weights_;
  int64_t rank_ = 0, ranks_ = 1, vocab_begin_ = 0;
  std::vector<std::unique_ptr<std::byte[]>> owned_;
};

}  // namespace mosaic
