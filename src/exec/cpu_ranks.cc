#include "exec/cpu_ranks.h"

#include <algorithm>
#include <exception>
#include <string>
#include <thread>

#include <omp.h>

#include "core/error.h"

namespace mosaic {

struct CpuRanks::Rank {
  Rank(const Model& model, int64_t rank, int64_t tensor_parallel, CpuThreadGroup* group, int64_t page_rows)
      : shard(tensor_parallel > 1 ? std::make_unique<TensorParallelShard>(model, rank, tensor_parallel) : nullptr),
        communicator(group != nullptr ? std::make_unique<CpuThreadCommunicator>(*group, rank) : nullptr),
        executor(config(model), weights(model),
                 ParallelRank{shard ? shard->vocab_begin() : 0, communicator.get()}),
        cache(config(model).layers, config(model).kv_dim(), page_rows) {}

  const ModelConfig& config(const Model& model) const { return shard ? shard->config() : model.config(); }
  const ModelWeights& weights(const Model& model) const { return shard ? shard->weights() : model.weights(); }

  std::unique_ptr<TensorParallelShard> shard;
  std::unique_ptr<CpuThreadCommunicator> communicator;
  CpuExecutor executor;
  CpuArena arena;
  CpuKvCache cache;
};

CpuRanks::CpuRanks(const Model& model, int64_t tensor_parallel, int64_t context_parallel, int64_t cache_page_rows)
    : model_(model) {
  if (tensor_parallel < 1 || context_parallel < 1)
    fail("rank counts must be at least 1 (--tensor-parallel {}, --context-parallel {})", tensor_parallel,
         context_parallel);
  if (tensor_parallel > 1 && context_parallel > 1)
    fail("--tensor-parallel {} with --context-parallel {}: not supported yet (one of them at a time)", tensor_parallel,
         context_parallel);
  if (context_parallel > 1 && model.config().experts > 0)
    fail("--context-parallel {}: {} is a mixture-of-experts model; context parallelism covers dense models (LLaDA, "
         "Dream) only so far", context_parallel, model.config().architecture);
  const int64_t ranks = tensor_parallel * context_parallel;
  if (ranks > 1) group_ = std::make_unique<CpuThreadGroup>(ranks);
  for (int64_t r = 0; r < ranks; ++r)
    ranks_.push_back(std::make_unique<Rank>(model, r, tensor_parallel, group_.get(), cache_page_rows));
}

CpuRanks::~CpuRanks() = default;

uint64_t CpuRanks::weight_bytes() const { return ranks_.front()->weights(model_).bytes; }

uint64_t CpuRanks::cache_page_bytes() const { return ranks_.front()->cache.page_bytes(); }
uint64_t CpuRanks::cache_bytes() const { return ranks_.front()->cache.bytes(); }
int64_t CpuRanks::cache_pages() const { return ranks_.front()->cache.pages(); }
uint64_t CpuRanks::arena_bytes() const { return ranks_.front()->arena.size(); }

void CpuRanks::resize_caches(int64_t pages) {
  for (const auto& rank : ranks_) rank->cache.resize(pages);
}

std::vector<float> CpuRanks::run(const Graph& graph, const PlannedStep& planned, const PackedBatch& batch,
                                 std::span<const HeadRowSampling> sampling, bool cached) {
  if (ranks_.size() == 1) {
    Rank& only = *ranks_.front();
    return only.executor.run(graph, planned, only.arena, batch, sampling, cached ? &only.cache : nullptr);
  }
  std::vector<std::vector<float>> results = on_every_rank([&](Rank& rank, int64_t) {
    return rank.executor.run(graph, planned, rank.arena, batch, sampling, cached ? &rank.cache : nullptr);
  });
  const int64_t count = this->count();
  const GraphTensor& output = graph.tensors[static_cast<size_t>(graph.output)];
  if (output.role != TensorRole::logits) return std::move(results.front());
  // Each rank's [rows, V / R] columns, side by side.
  const int64_t rows = output.rows, cols = output.cols;
  std::vector<float> logits(static_cast<size_t>(rows * cols * count));
  for (int64_t r = 0; r < count; ++r)
    for (int64_t i = 0; i < rows; ++i)
      std::copy_n(results[static_cast<size_t>(r)].begin() + i * cols, cols,
                  logits.begin() + (i * count + r) * cols);
  return logits;
}

std::vector<std::vector<float>> CpuRanks::run_parts(std::span<const CpuRankStep> steps) {
  MOSAIC_ASSERT(static_cast<int64_t>(steps.size()) == count(), "{} steps for {} ranks", steps.size(), count());
  return on_every_rank([&](Rank& rank, int64_t r) {
    const CpuRankStep& step = steps[static_cast<size_t>(r)];
    return rank.executor.run(*step.graph, *step.planned, rank.arena, *step.batch, step.sampling);
  });
}

std::vector<std::vector<float>> CpuRanks::on_every_rank(
    const std::function<std::vector<float>(Rank&, int64_t)>& body) {
  const int64_t count = this->count();
  group_->reset();  // a failed step's abort ends with it
  std::vector<std::vector<float>> results(ranks_.size());
  std::vector<std::thread> threads;
  // The machine's OpenMP threads shared out among the ranks, not each rank taking all of them.
  const int threads_per_rank = std::max(1, omp_get_max_threads() / static_cast<int>(count));
  for (int64_t r = 0; r < count; ++r)
    threads.emplace_back([&, r] {
      Rank& rank = *ranks_[static_cast<size_t>(r)];
      omp_set_num_threads(threads_per_rank);
      try {
        results[static_cast<size_t>(r)] = body(rank, r);
      } catch (const std::exception& e) {
        rank.communicator->abort(e.what());
      }
    });
  for (std::thread& t : threads) t.join();
  if (const auto failure = group_->failure()) fail("{}-parallel {}", ranks_.front()->shard ? "tensor" : "context",
                                                    *failure);
  return results;
}

}  // namespace mosaic
