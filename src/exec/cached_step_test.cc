// The cached step (graph/cached_decoder.cc) on the CPU executor against the full step: a cached
// step that computes every row gives the full step's bits; one that computes some rows against
// a cache the same canvas filled gives the full step's bits for them; block-causal layouts the
// same in both forms; and chunking, batching and page placement change no bit.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <random>

#include "cache/kv_page_pool.h"
#include "core/error.h"
#include "exec/cpu_executor.h"
#include "exec/kv_cache_views.h"
#include "exec/step_chunker.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kPageRows = 16;

class CachedStep : public ::testing::TestWithParam<Family> {
 protected:
  static void SetUpTestSuite() {
    for (Family family : {Family::llada, Family::dream}) {
      ModelConfig config = test_model_preset(family, "tiny");
      config.hidden = 64, config.heads = 4, config.kv_heads = 2, config.head_dim = 16;
      config.ffn = 96, config.vocab = 1000 + 17, config.layers = 2;
      const fs::path dir = fs::temp_directory_path() /
                           ("mosaic_cached_step_test_" + std::to_string(::getpid()) + std::string(family_name(family)));
      write_test_model(config, {.dtype = DType::bf16, .seed = 7, .progress = {}}, dir);
      models()[static_cast<int>(family)] = Model::load(dir);
      fs::remove_all(dir);
    }
  }
  static void TearDownTestSuite() { for (auto& m : models()) m.reset(); }
  static std::array<std::unique_ptr<Model>, 3>& models() {
    static std::array<std::unique_ptr<Model>, 3> storage;
    return storage;
  }
  const Model& model() const { return *models()[static_cast<int>(GetParam())]; }
  const ModelConfig& config() const { return model().config(); }

  struct Sequence {
    std::vector<int32_t> ids, rows;
    BlockLayout layout;
    uint64_t cache = 0;
    int64_t begin = 0, end = 0;
  };

  std::vector<Sequence> random_batch(std::vector<int64_t> lengths, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<Sequence> batch;
    for (const int64_t length : lengths) {
      Sequence s;
      for (int64_t p = 0; p < length; ++p) s.ids.push_back(static_cast<int32_t>(rng() % config().vocab));
      s.begin = 0, s.end = length;
      batch.push_back(std::move(s));
    }
    return batch;
  }

  std::vector<SequenceRows> views(const std::vector<Sequence>& batch, bool cached) const {
    std::vector<SequenceRows> out;
    for (const Sequence& s : batch) {
      SequenceRows rows{s.ids, s.rows};
      rows.layout = s.layout;
      if (cached) rows.cache_id = s.cache, rows.begin = s.begin, rows.end = s.end;
      out.push_back(rows);
    }
    return out;
  }

  // The step's logits [rows, vocab]: the full step without a cache, or the cached step against
  // `cache` (its pages from `pool`).
  std::vector<float> run(const std::vector<Sequence>& batch, const ChunkConfig& chunks, KvPagePool* pool = nullptr,
                         CpuKvCache* cache = nullptr) const {
    const std::vector<SequenceRows> rows = views(batch, pool != nullptr);
    PackedBatch packed = pack_batch(config(), rows);
    StepShape shape = step_shape_of(config(), rows);
    if (pool != nullptr) add_cache_views(*pool, rows, shape, packed);
    StepPlanner planner(config(), {.head = HeadMode::logits});
    const Graph graph = planner.instantiate(shape, chunks);
    CpuArena arena;
    return CpuExecutor(model()).run(graph, *planner.plan(graph), arena, packed, {}, cache);
  }

  // Every position of every sequence requested (Dream: position 0 reads its own row).
  static void request_all(std::vector<Sequence>& batch) {
    for (Sequence& s : batch) {
      s.rows.clear();
      for (int64_t p = s.begin; p < s.end; ++p) s.rows.push_back(static_cast<int32_t>(p));
    }
  }

  // Logits of the rows of `batch` requested, picked out of a step over every row.
  std::vector<float> rows_of(const std::vector<float>& all, const std::vector<Sequence>& full,
                             const std::vector<Sequence>& some) const {
    std::vector<float> out;
    const int64_t vocab = config().vocab;
    int64_t base = 0;
    for (size_t s = 0; s < full.size(); ++s) {
      for (const int32_t row : some[s].rows) {
        const auto at = std::find(full[s].rows.begin(), full[s].rows.end(), row) - full[s].rows.begin();
        out.insert(out.end(), all.begin() + (base + at) * vocab, all.begin() + (base + at + 1) * vocab);
      }
      base += static_cast<int64_t>(full[s].rows.size());
    }
    return out;
  }

  struct Cache {
    KvPagePool pool{kPageRows};
    CpuKvCache memory;
    explicit Cache(const ModelConfig& c) : memory(c.layers, c.kv_dim(), kPageRows) {}
    void reserve(std::vector<Sequence>& batch) {
      for (Sequence& s : batch) s.cache = pool.reserve(pool.pages_for(static_cast<int64_t>(s.ids.size())));
      memory.resize(pool.high_water());
    }
  };
};

TEST_P(CachedStep, EveryRowComputedIsTheFullStep) {
  auto batch = random_batch({37, 5, 16}, 1);
  request_all(batch);
  const std::vector<float> full = run(batch, {});
  Cache cache(config());
  const uint64_t spacer = cache.pool.reserve(2);  // the sequences' pages do not start at 0
  cache.reserve(batch);
  cache.pool.release(spacer);
  EXPECT_EQ(run(batch, {}, &cache.pool, &cache.memory), full);
  for (const ChunkConfig& chunks : {ChunkConfig{3, 1, 1, 1}, ChunkConfig{2, 7, 3, 4}, ChunkConfig{1, 1, 1, 1, true},
                                    ChunkConfig{64, 64, 64, 64}})
    EXPECT_EQ(run(batch, chunks, &cache.pool, &cache.memory), full) << chunks.to_string();
}

TEST_P(CachedStep, SomeRowsAgainstTheCacheOfTheSameCanvasAreTheFullStep) {
  auto batch = random_batch({41, 23}, 2);
  request_all(batch);
  const std::vector<float> full = run(batch, {});
  Cache cache(config());
  cache.reserve(batch);
  run(batch, {}, &cache.pool, &cache.memory);  // fills the cache
  auto some = batch;
  some[0].begin = 17, some[0].end = 33, some[0].rows = {18, 20, 32};
  some[1].begin = 0, some[1].end = 9, some[1].rows = {3, 8};
  const std::vector<float> expected = rows_of(full, batch, some);
  EXPECT_EQ(run(some, {}, &cache.pool, &cache.memory), expected);
  for (const ChunkConfig& chunks : {ChunkConfig{2, 3, 2, 2}, ChunkConfig{5, 1, 9, 1, true}})
    EXPECT_EQ(run(some, chunks, &cache.pool, &cache.memory), expected) << chunks.to_string();
}

TEST_P(CachedStep, RowsOutsideTheComputedOnesAreRefused) {
  auto batch = random_batch({20}, 3);
  Cache cache(config());
  cache.reserve(batch);
  batch[0].begin = 8, batch[0].end = 16, batch[0].rows = {17};  // reads hidden row 17 (Dream: 16)
  EXPECT_THROW(run(batch, {}, &cache.pool, &cache.memory), Error);
}

// Block-causal layouts: the full step under the mask, and the cached step of one block against
// the cache the full step's canvas filled, agree bit for bit; the mask changes the logits.
TEST_P(CachedStep, BlockCausalLayoutsAgreeInBothForms) {
  for (const BlockAttention kind : {BlockAttention::prompt, BlockAttention::absolute}) {
    auto batch = random_batch({29, 18}, 4);
    batch[0].layout = {kind, 7, 8, 29};
    batch[1].layout = {kind, 5, 4, 18};
    request_all(batch);
    const std::vector<float> masked = run(batch, {});
    auto unmasked = batch;
    for (Sequence& s : unmasked) s.layout = {};
    EXPECT_NE(run(unmasked, {}), masked);
    Cache cache(config());
    cache.reserve(batch);
    EXPECT_EQ(run(batch, {}, &cache.pool, &cache.memory), masked);
    auto block = batch;  // a middle block of each, candidates inside it
    block[0].begin = 15, block[0].end = 23, block[0].rows = {16, 19, 22};
    block[1].begin = 9, block[1].end = 13, block[1].rows = {10, 12};
    const std::vector<float> expected = rows_of(masked, batch, block);
    EXPECT_EQ(run(block, {}, &cache.pool, &cache.memory), expected) << block_attention_name(kind);
    EXPECT_EQ(run(block, {2, 2, 2, 2}, &cache.pool, &cache.memory), expected) << block_attention_name(kind);
    for (const ChunkConfig& chunks : {ChunkConfig{3, 5, 2, 3}, ChunkConfig{1, 1, 1, 1, true}})
      EXPECT_EQ(run(batch, chunks), masked) << block_attention_name(kind) << " " << chunks.to_string();
  }
}

TEST_P(CachedStep, RandomChunkingOfCachedStepsChangesNoBit) {
  std::mt19937 rng(GetParam() == Family::llada ? 31 : 32);
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<int64_t> lengths;
    const int sequences = 1 + static_cast<int>(rng() % 3);
    for (int s = 0; s < sequences; ++s) lengths.push_back(2 + static_cast<int64_t>(rng() % 60));
    auto batch = random_batch(lengths, static_cast<uint32_t>(rng()));
    Cache cache(config());
    cache.reserve(batch);
    request_all(batch);
    run(batch, {}, &cache.pool, &cache.memory);
    for (Sequence& s : batch) {
      const int64_t length = static_cast<int64_t>(s.ids.size());
      s.begin = 1 + static_cast<int64_t>(rng() % (length - 1));
      s.end = s.begin + 1 + static_cast<int64_t>(rng() % (length - s.begin));
      s.rows.clear();
      for (int64_t p = s.begin + 1; p < s.end; ++p)
        if (rng() % 2 == 0) s.rows.push_back(static_cast<int32_t>(p));
    }
    const ChunkConfig chunks{1 + int64_t(rng() % 5), 1 + int64_t(rng() % 5), 1 + int64_t(rng() % 5),
                             1 + int64_t(rng() % 3)};
    EXPECT_EQ(run(batch, chunks, &cache.pool, &cache.memory), run(batch, {}, &cache.pool, &cache.memory))
        << "trial " << trial << ": " << chunks.to_string();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CachedStep, ::testing::Values(Family::llada, Family::dream),
                         [](const auto& info) { return std::string(family_name(info.param)); });

}  // namespace
}  // namespace mosaic
