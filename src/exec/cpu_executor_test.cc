// The planned executor against the direct forward: bit-identical logits, for both families,
// unchunked and chunked, single sequences and a packed batch; LLaDA-MoE and LLaDA 2.x too (the
// expert FFN, the shared expert and the grouped router chunked by rows change no bit).
#include "exec/cpu_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <numeric>
#include <random>

#include "exec/direct_forward.h"
#include "graph/step_graph.h"
#include "graph/weight_staging.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

class PlannedExecution : public ::testing::TestWithParam<Family> {
 protected:
  static void SetUpTestSuite() {
    for (Family family : {Family::llada, Family::dream, Family::llada_moe, Family::llada2}) {
      ModelConfig config = test_model_preset(family, "tiny");
      config.hidden = 128, config.heads = family == Family::dream ? 4 : 2;
      config.kv_heads = family == Family::dream ? 2 : 2, config.head_dim = config.hidden / config.heads;
      config.ffn = 192, config.vocab = 1024 + 37;
      const fs::path dir = fs::temp_directory_path() /
                           ("mosaic_exec_test_" + std::to_string(::getpid()) + std::string(family_name(family)));
      write_test_model(config, {.dtype = DType::bf16, .seed = 11, .progress = {}}, dir);
      models()[static_cast<int>(family)] = Model::load(dir);
      fs::remove_all(dir);  // the mapping keeps the data alive
    }
  }
  static void TearDownTestSuite() { for (auto& m : models()) m.reset(); }
  static std::array<std::unique_ptr<Model>, 4>& models() {
    static std::array<std::unique_ptr<Model>, 4> storage;
    return storage;
  }
  const Model& model() const { return *models()[static_cast<int>(GetParam())]; }

  // Random canvases with a random subset of rows requested.
  struct Sequence { std::vector<int32_t> ids, rows; };
  std::vector<Sequence> random_batch(std::vector<int64_t> lengths, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<Sequence> batch;
    for (int64_t length : lengths) {
      Sequence s;
      for (int64_t p = 0; p < length; ++p) s.ids.push_back(static_cast<int32_t>(rng() % model().config().vocab));
      for (int64_t p = 0; p < length; ++p) if (rng() % 3 == 0 || p == length - 1) s.rows.push_back(int32_t(p));
      batch.push_back(std::move(s));
    }
    return batch;
  }
  PackedBatch pack(const std::vector<Sequence>& batch) const {
    std::vector<SequenceRows> views;
    for (const Sequence& s : batch) views.push_back({s.ids, s.rows});
    return pack_batch(model().config(), views);
  }
  StepShape shape_of(const std::vector<Sequence>& batch) const {
    StepShape shape;
    for (const Sequence& s : batch) {
      shape.lengths.push_back(static_cast<int64_t>(s.ids.size()));
      shape.candidates.push_back(static_cast<int64_t>(s.rows.size()));
    }
    return shape;
  }
  std::vector<float> planned(const std::vector<Sequence>& batch, const ChunkConfig& chunks,
                             HeadMode head = HeadMode::logits, std::vector<int32_t> streamed = {}) const {
    GraphOptions options{.head = head};
    options.streamed_layers = std::move(streamed);
    options.staged_weight_bytes = dtype_size(model().weights().layers[0].q.dtype);
    StepPlanner planner(model().config(), options);
    const Graph graph = planner.instantiate(shape_of(batch), chunks);
    CpuArena arena;
    return CpuExecutor(model()).run(graph, *planner.plan(graph), arena, pack(batch));
  }
};

TEST_P(PlannedExecution, BitIdenticalToTheDirectForward) {
  const auto batch = random_batch({57}, 1);
  const std::vector<float> direct = direct_forward(model(), pack(batch));
  EXPECT_EQ(planned(batch, {}), direct);
  for (const ChunkConfig& chunks : {ChunkConfig{1, 1, 4, 1}, ChunkConfig{3, 1, 1, 1},
                                    ChunkConfig{1, 5, 1, 1}, ChunkConfig{2, 7, 3, 4},
                                    ChunkConfig{64, 64, 64, 64}, ChunkConfig{1, 1, 1, 1, true},
                                    ChunkConfig{2, 7, 3, 4, true}})
    EXPECT_EQ(planned(batch, chunks), direct) << chunks.to_string();
}

// The last layer runs its queries and MLP over the candidates' gathered rows in request order:
// rows requested out of order, and (Dream, whose row r reads the hidden state of r - 1, and row 0
// its own) rows 0 and 1 sharing one hidden row, split across chunks, still give the direct
// forward's bits.
TEST_P(PlannedExecution, LastLayerOverCandidatesTakesRowsInAnyOrderAndShared) {
  auto batch = random_batch({29, 12}, 5);
  batch[0].rows = {17, 1, 28, 0, 5, 6};
  batch[1].rows = {11, 0, 1};
  const std::vector<float> direct = direct_forward(model(), pack(batch));
  for (const ChunkConfig& chunks : {ChunkConfig{}, ChunkConfig{1, 4, 5, 2}, ChunkConfig{3, 9, 9, 9}})
    EXPECT_EQ(planned(batch, chunks), direct) << chunks.to_string();
}

TEST_P(PlannedExecution, BatchOfThreeEqualsEachAlone) {
  const auto batch = random_batch({23, 1, 40}, 2);
  const std::vector<float> together = planned(batch, {});
  const std::vector<float> chunked = planned(batch, {2, 3, 5, 2});
  EXPECT_EQ(chunked, together);
  const int64_t vocab = model().config().vocab;
  size_t row = 0;
  for (const auto& sequence : batch) {
    const std::vector<float> alone = planned({sequence}, {});
    ASSERT_EQ(alone.size(), sequence.rows.size() * vocab);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + row * vocab));
    row += sequence.rows.size();
  }
}

TEST_P(PlannedExecution, FusedHeadAgreesWithMaterialisedLogits) {
  const auto batch = random_batch({31, 9}, 3);
  const std::vector<float> logits = planned(batch, {});
  const std::vector<float> stats = planned(batch, {1, 2, 2, 3}, HeadMode::stats);
  const int64_t vocab = model().config().vocab, rows = static_cast<int64_t>(logits.size()) / vocab;
  ASSERT_EQ(static_cast<int64_t>(stats.size()), rows * kHeadStatsCols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits.data() + r * vocab;
    const int64_t best = std::max_element(l, l + vocab) - l;  // first maximum
    EXPECT_EQ(stats[r * kHeadStatsCols + 0], static_cast<float>(best));  // greedy choice
    EXPECT_EQ(stats[r * kHeadStatsCols + 2], l[best]);
    EXPECT_EQ(stats[r * kHeadStatsCols + 3], static_cast<float>(best));
  }
}

// Property: any chunk configuration, on any batch shape, gives bit-identical candidate logits
// and bit-identical head statistics (hence the same sampled tokens) as the unchunked step.
TEST_P(PlannedExecution, RandomChunkingChangesNoBit) {
  std::mt19937 rng(GetParam() == Family::llada ? 101 : 202);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<int64_t> lengths;
    const int sequences = 1 + static_cast<int>(rng() % 3);
    for (int s = 0; s < sequences; ++s) lengths.push_back(1 + static_cast<int64_t>(rng() % 70));
    const auto batch = random_batch(lengths, static_cast<uint32_t>(rng()));
    const ChunkConfig chunks{1 + int64_t(rng() % 9), 1 + int64_t(rng() % 9), 1 + int64_t(rng() % 9),
                             1 + int64_t(rng() % 5)};
    const HeadMode head = trial % 2 == 0 ? HeadMode::logits : HeadMode::stats;
    EXPECT_EQ(planned(batch, chunks, head), planned(batch, {}, head))
        << "trial " << trial << ": " << chunks.to_string();
  }
}

// Layers whose product weights are staged into the arena ahead of use (graph/weight_staging.h)
// read the same bytes: every layer, some, chunked, either head, the bits of the resident step.
TEST_P(PlannedExecution, StreamedLayerWeightsChangeNoBit) {
  const auto batch = random_batch({33, 8}, 7);
  const int32_t layers = static_cast<int32_t>(model().config().layers);
  std::vector<int32_t> every(static_cast<size_t>(layers));
  std::iota(every.begin(), every.end(), 0);
  for (const HeadMode head : {HeadMode::logits, HeadMode::stats}) {
    const std::vector<float> resident = planned(batch, {}, head);
    EXPECT_EQ(planned(batch, {}, head, every), resident);
    EXPECT_EQ(planned(batch, {2, 3, 4, 2}, head, every), resident);
    EXPECT_EQ(planned(batch, {1, 2, 1, 1}, head, {layers - 1}), resident);
  }
}

// The residual stream in host memory, its rows staged for each visit (graph/residual_staging.h):
// unchunked (one visit of every row), chunked so that phases' rows overlap and not, with the last
// layer over the candidates (its rows gathered from host memory) or over every row, with the
// layers' weights streamed too, either head: the direct forward's bits.
TEST_P(PlannedExecution, ResidualInHostChangesNoBit) {
  auto batch = random_batch({41, 9}, 13);
  batch[0].rows = {40, 3, 0, 17};
  const std::vector<float> direct = direct_forward(model(), pack(batch));
  for (const ChunkConfig& chunks :
       {ChunkConfig{1, 1, 1, 1, false, true}, ChunkConfig{2, 1, 2, 1, false, true},
        ChunkConfig{3, 4, 2, 2, false, true}, ChunkConfig{5, 7, 3, 1, true, true},
        ChunkConfig{64, 64, 64, 64, false, true}})
    EXPECT_EQ(planned(batch, chunks), direct) << chunks.to_string();
  const int32_t layers = static_cast<int32_t>(model().config().layers);
  std::vector<int32_t> every(static_cast<size_t>(layers));
  std::iota(every.begin(), every.end(), 0);
  const std::vector<float> stats = planned(batch, {}, HeadMode::stats);
  EXPECT_EQ(planned(batch, {2, 3, 4, 2, false, true}, HeadMode::stats), stats);
  EXPECT_EQ(planned(batch, {2, 3, 4, 2, false, true}, HeadMode::stats, every), stats);
}

// The plan holds the staged weights: two layers' worth live at once at most (the one computing
// and the one arriving), so the peak grows by no more than that.
TEST_P(PlannedExecution, ThePlanHoldsTwoStagedLayersAtMost) {
  const ModelConfig& config = model().config();
  std::vector<int32_t> every(static_cast<size_t>(config.layers));
  std::iota(every.begin(), every.end(), 0);
  GraphOptions options{.activations = DType::bf16, .head = HeadMode::stats};
  for (const ChunkConfig& chunks : {ChunkConfig{}, ChunkConfig{2, 3, 4, 2}}) {
    const StepShape shape{{48}, {12}};
    const PlannedStep resident = plan_graph(instantiate_step_graph(config, shape, chunks, options));
    options.streamed_layers = every;
    const Graph streamed = instantiate_step_graph(config, shape, chunks, options);
    options.streamed_layers.clear();
    uint64_t largest = 0;
    for (const StagedLayer& layer : staged_layers(config, 2)) largest = std::max(largest, layer.bytes);
    const PlannedStep planned = plan_graph(streamed);
    EXPECT_GT(planned.plan.peak_bytes, resident.plan.peak_bytes) << chunks.to_string();
    EXPECT_LE(planned.plan.peak_bytes, resident.plan.peak_bytes + 2 * largest) << chunks.to_string();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PlannedExecution,
                         ::testing::Values(Family::llada, Family::dream, Family::llada_moe, Family::llada2),
                         [](const auto& info) {
                           std::string name(family_name(info.param));
                           std::replace(name.begin(), name.end(), '-', '_');  // gtest names: [A-Za-z0-9_]
                           return name;
                         });

}  // namespace
}  // namespace mosaic
