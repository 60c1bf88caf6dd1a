// On a GPU: the CUDA step equals the CPU fp32 reference on tiny models — candidate logits
// within bf16 tolerance, every greedy decision of a generation the same as the CPU's except at
// near-ties, chunked steps bit-identical to unchunked ones. Each test runs on the tiny LLaDA and
// Dream and on copies of them with other head dims: 128 (the real models'; a cached step's few rows
// read their keys in parts there), 80, 96 and 256 (attention's 16-byte tile
// copies), 32 and 72 (its element-wise copies, through the 64- and 80-wide kernels); and on the
// tiny LLaDA-MoE (per-head q/k norms, 8 experts, 2 per token) and the tiny LLaDA 2.x (fused QKV,
// partial RoPE, a dense first layer, grouped sigmoid routing, a shared expert; generations by
// block diffusion). Skipped without a device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string_view>

#include <fmt/format.h>

#include "backend/cuda/attention_split_keys.h"
#include "backend/cuda/gate_up_swiglu.h"
#include "core/error.h"
#include "exec/cuda_step_graphs.h"
#include "exec/replay_padding.h"
#include "exec/step_runner.h"
#include "gen/generator.h"
#include "mem/cuda_arena.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

// A tiny preset, with its heads widened (or narrowed) to head_dim when that is not 0.
struct TinyModel {
  Family family;
  int64_t head_dim = 0;
  // A mixture of experts whose every row takes every expert (LLaDA 2.x: 4 of 4 in one group):
  // routing cannot flip, so the dense bounds hold and any kernel error shows.
  bool every_expert = false;
};

// How far a model's GPU step may stray from the fp32 CPU (LockstepRunner says why; docs/design/moe.md
// gives the measurements): the lock-step logit tolerance, and where routing flips the share of logit
// rows beyond the dense tolerance, the percentile of lock-step errors bounded by the tolerance, and
// the share of decisive decisions taken otherwise. The tiny LLaDA 2.x has 3 layers and scales its
// experts' sum by 2.5: its bf16 error is larger even where no routing can flip (measured 0.032 with
// every expert taken, 0 decisions otherwise); its sigmoid scores lie closer together than
// LLaDA-MoE's softmax ones and its groups add a second choice to flip, so more of its rows flip.
struct StepBounds {
  double logit_tolerance = 0.025;
  double rows_beyond = 0, percentile = 1, mismatches = 0;  // percentile 1: not routed, the maximum
};
StepBounds step_bounds(const TinyModel& model) {
  if (model.family == Family::llada2) return model.every_expert ? StepBounds{0.04} : StepBounds{0.04, 0.15, 0.90, 0.08};
  if (model.family == Family::llada_moe) return {0.025, 0.10, 0.95, 0.05};
  return {};
}

std::string tiny_model_name(const TinyModel& model) {
  std::string name(family_name(model.family));
  std::replace(name.begin(), name.end(), '-', '_');  // gtest names: [A-Za-z0-9_]
  if (model.head_dim != 0) name += "_d" + std::to_string(model.head_dim);
  if (model.every_expert) name += "_every_expert";
  return name;
}

class CudaStep : public ::testing::TestWithParam<TinyModel> {
 protected:
  static Family family() { return GetParam().family; }
  // A mixture of experts: bf16 routing may pick other experts than the CPU's for near-tied rows.
  static bool routed() { return step_bounds(GetParam()).percentile < 1; }
  void SetUp() override {
    if (!cuda_devices_visible()) GTEST_SKIP() << "no CUDA device";
    ModelConfig config = test_model_preset(family(), "tiny");
    if (GetParam().head_dim != 0) {
      config.head_dim = GetParam().head_dim;
      config.hidden = config.heads * config.head_dim;
    }
    if (GetParam().every_expert) {
      config.experts = config.experts_per_token = 4;
      config.router_groups = config.router_top_groups = 1;
    }
    dir_ = fs::temp_directory_path() / ("mosaic_cuda_step_" + std::to_string(::getpid()));
    write_test_model(config, {.dtype = DType::bf16, .seed = 21}, dir_);
    model_ = Model::load(dir_);
  }
  void TearDown() override {
    model_.reset();
    fs::remove_all(dir_);
  }

  StepInput random_step(std::vector<int64_t> lengths, bool keep_logits, uint32_t seed) {
    std::mt19937 rng(seed);
    canvases_.clear();
    rows_.clear();
    canvases_.reserve(lengths.size());
    rows_.reserve(lengths.size());
    StepInput input;
    input.keep_logits = keep_logits;
    for (int64_t length : lengths) {
      std::vector<int32_t> ids, rows;
      for (int64_t p = 0; p < length; ++p) ids.push_back(int32_t(rng() % model_->config().vocab));
      for (int64_t p = 0; p < length; p += 3) rows.push_back(int32_t(p));
      canvases_.push_back(std::move(ids));
      rows_.push_back(std::move(rows));
      input.sequences.push_back({canvases_.back(), rows_.back()});
    }
    return input;
  }

  fs::path dir_;
  std::unique_ptr<Model> model_;
  std::vector<std::vector<int32_t>> canvases_, rows_;
};

TEST_P(CudaStep, LogitsMatchTheCpuReference) {
  CpuStepRunner cpu(*model_);
  CudaStepRunner gpu(*model_, 0, std::nullopt);
  const StepInput input = random_step({37, 5, 64}, /*keep_logits=*/true, 1);
  const StepOutput expected = cpu.run(input);
  const StepOutput got = gpu.run(input);
  ASSERT_EQ(got.values.size(), expected.values.size());
  const int64_t vocab = got.cols;
  // Every row within 2e-2; for a routed model (LockstepRunner says why) up to 10 % of the rows may
  // be further off (measured on the H200: 2 of 37), and the median row must be within 1e-2.
  const size_t rows = got.values.size() / vocab;
  std::vector<double> errors;
  for (size_t r = 0; r < rows; ++r) {
    double diff = 0, norm = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double g = got.values[r * vocab + v], e = expected.values[r * vocab + v];
      ASSERT_FALSE(std::isnan(g)) << "row " << r;
      diff += (g - e) * (g - e);
      norm += e * e;
    }
    errors.push_back(std::sqrt(diff / norm));
    if (!routed()) {
      EXPECT_LE(errors.back(), 2e-2) << "row " << r;
    }
  }
  const size_t beyond = std::count_if(errors.begin(), errors.end(), [](double e) { return e > 2e-2; });
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  if (routed()) {
    EXPECT_LE(double(beyond), step_bounds(GetParam()).rows_beyond * double(rows))
        << beyond << " of " << rows << " rows beyond 2e-2";
    EXPECT_LE(sorted[rows / 2], 1e-2);
  }
  std::printf("  %s: worst row |gpu - cpu| / |cpu| = %.2e, median %.2e, %zu of %zu rows beyond 2e-2\n",
              tiny_model_name(GetParam()).c_str(), sorted.back(), sorted[rows / 2], beyond, rows);
}

TEST_P(CudaStep, ChunkedStepIsBitIdentical) {
  const StepInput input = random_step({2048, 1500}, /*keep_logits=*/false, 2);
  CudaStepRunner whole(*model_, 0, std::nullopt);
  const StepOutput a = whole.run(input);
  // The tightest budget, in 2 MiB pages from 8 MiB of activations (the runner keeps 64 MiB for
  // workspaces beside the weights), that the step fits: well under the unchunked peak (20-30 MiB
  // for the tiny presets; the head's scratch alone is ~16 KiB for each of the 1,183 candidate
  // rows), so the chunker has to split several groups. A budget the step cannot fit, in live bytes
  // or in whole pages, is refused, and the next page is tried.
  constexpr uint64_t kPage = uint64_t{2} << 20;
  for (uint64_t activations = 4 * kPage; activations < a.planned_peak; activations += kPage) {
    CudaStepRunner tight(*model_, 0, model_->weights().bytes + (uint64_t{64} << 20) + activations);
    StepOutput b;
    try {
      b = tight.run(input);
    } catch (const std::exception& error) {
      const std::string_view what = error.what();  // exec/step_chunker.cc's two refusals
      if (what.find("does not fit") == what.npos && what.find("needs at least") == what.npos) throw;
      continue;
    }
    ASSERT_NE(b.chunks.to_string(), ChunkConfig{}.to_string()) << "the budget did not force chunking";
    EXPECT_EQ(a.values, b.values) << "chunks " << b.chunks.to_string();
    return;
  }
  FAIL() << "no budget under the unchunked peak of " << a.planned_peak << " bytes ran the step";
}

// The last layer over the candidates only (the default) against the last layer over every row
// (MOSAIC_LAST_LAYER_CANDIDATES_ONLY=0): the same bits, for both heads, with candidate rows out of
// order and (for Dream, whose rows 0 and 1 both read hidden row 0) sharing a hidden row.
TEST_P(CudaStep, LastLayerOverCandidatesIsBitIdenticalToEveryRow) {
  for (const bool keep_logits : {false, true}) {
    StepInput input = random_step({1200, 333, 70}, keep_logits, 5);
    rows_[1] = {332, 0, 1, 17, 200, 5};
    input.sequences[1].rows = rows_[1];
    ::setenv("MOSAIC_LAST_LAYER_CANDIDATES_ONLY", "0", 1);
    CudaStepRunner every_row(*model_, 0, std::nullopt);
    ::unsetenv("MOSAIC_LAST_LAYER_CANDIDATES_ONLY");
    CudaStepRunner candidates(*model_, 0, std::nullopt);
    const StepOutput a = every_row.run(input);
    const StepOutput b = candidates.run(input);
    ASSERT_FALSE(a.values.empty());
    EXPECT_EQ(a.values, b.values) << (keep_logits ? "logits" : "statistics");
  }
}

// A long attention op's last rows on the tail stream beside the o-projection of the rows before
// them (exec/attention_tail_split.h) against the whole op on the step's stream
// (MOSAIC_ATTENTION_TAIL_STREAM=0): the same bits, launched directly, captured and replayed.
TEST_P(CudaStep, AttentionTailOnASideStreamIsBitIdentical) {
  const StepInput input = random_step({9000}, /*keep_logits=*/false, 7);  // layer 0 splits at 8,448
  ::setenv("MOSAIC_ATTENTION_TAIL_STREAM", "0", 1);
  CudaStepRunner one_stream(*model_, 0, std::nullopt);
  ::unsetenv("MOSAIC_ATTENTION_TAIL_STREAM");
  CudaStepRunner split(*model_, 0, std::nullopt);
  const StepOutput expected = one_stream.run(input);
  ASSERT_FALSE(expected.values.empty());
  for (int run = 0; run < 3; ++run) {
    const StepOutput got = split.run(input);
    EXPECT_EQ(got.values, expected.values) << (run == 0 ? "direct" : run == 1 ? "captured" : "replayed");
  }
}

// A layer's gate and up products and SwiGLU as one fused product on Hopper
// (MOSAIC_FUSED_SWIGLU=1, exec/gate_up_swiglu_fusion.h) against the three ops: the same bits for
// a batch of two sequences and for a step that keeps its logits, launched directly, captured and
// replayed.
TEST_P(CudaStep, FusedGateUpSwigluIsBitIdentical) {
  if (!cuda::gate_up_swiglu_available()) GTEST_SKIP() << "the fused product is Hopper's (compute capability 9.0)";
  for (bool keep_logits : {false, true}) {
    const StepInput input = random_step({700, 300}, keep_logits, 11);
    CudaStepRunner separate(*model_, 0, std::nullopt);
    ::setenv("MOSAIC_FUSED_SWIGLU", "1", 1);
    CudaStepRunner fused(*model_, 0, std::nullopt);
    ::unsetenv("MOSAIC_FUSED_SWIGLU");
    const StepOutput expected = separate.run(input);
    ASSERT_FALSE(expected.values.empty());
    for (int run = 0; run < 3; ++run) {
      const StepOutput got = fused.run(input);
      EXPECT_EQ(got.values, expected.values)
          << (run == 0 ? "direct" : run == 1 ? "captured" : "replayed") << ", keep_logits " << keep_logits;
    }
  }
}

// The same step again replays its captured CUDA graph (seen once: launched directly; twice:
// captured; then replayed), with the bits of the direct launch; a step of the same shape with
// other ids replays the same graph and reads its own inputs, as a fresh runner launching
// directly computes them.
TEST_P(CudaStep, RepeatedStepsReplayAGraphWithTheSameBits) {
  if (!CudaStepGraphs().enabled()) GTEST_SKIP() << "CUDA graphs are off (MOSAIC_CUDA_GRAPHS=0)";
  for (bool keep_logits : {false, true}) {
    CudaStepRunner gpu(*model_, 0, std::nullopt);
    const StepInput first = random_step({700, 300}, keep_logits, 5);
    const StepOutput direct = gpu.run(first);
    ASSERT_EQ(gpu.graph_replays(), 0u);
    for (int repeat = 0; repeat < 3; ++repeat) {
      const StepOutput again = gpu.run(first);
      EXPECT_EQ(again.values, direct.values) << "repeat " << repeat << " keep_logits " << keep_logits;
    }
    EXPECT_EQ(gpu.graph_replays(), 2u) << "captured on the second run, replayed on the third and fourth";

    const StepInput other = random_step({700, 300}, keep_logits, 6);  // same shape, other ids
    const StepOutput replayed = gpu.run(other);
    EXPECT_EQ(gpu.graph_replays(), 3u);
    CudaStepRunner fresh(*model_, 0, std::nullopt);
    const StepOutput expected = fresh.run(other);
    EXPECT_EQ(replayed.values, expected.values) << "keep_logits " << keep_logits;
    EXPECT_NE(replayed.values, direct.values);
  }
}

// Layers whose product weights stay in pinned host memory, copied into each step's staged
// tensors on the copy stream one layer ahead (graph/weight_staging.h), give the resident step's
// bits: launched directly, captured and replayed, with either head. A layer with experts is
// refused by name (the CUDA backend streams dense layers only).
TEST_P(CudaStep, StreamedLayerWeightsGiveTheResidentBits) {
  std::vector<int32_t> dense;
  for (int32_t l = 0; l < static_cast<int32_t>(model_->config().layers); ++l)
    if (model_->weights().layers[static_cast<size_t>(l)].experts.empty()) dense.push_back(l);
  if (dense.size() < model_->weights().layers.size()) {
    const int32_t routed_layer = static_cast<int32_t>(model_->weights().layers.size()) - 1;
    try {
      CudaStepRunner refused(*model_, 0, std::nullopt, {routed_layer});
      ADD_FAILURE() << "a layer with experts was streamed";
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr(
                                    fmt::format("layer {} has experts: the CUDA backend streams the weights of dense "
                                                "layers only", routed_layer)));
    }
  }
  if (dense.empty()) GTEST_SKIP() << "no dense layer to stream";
  for (const bool keep_logits : {false, true}) {
    const StepInput input = random_step({300, 77}, keep_logits, 9);
    CudaStepRunner resident(*model_, 0, std::nullopt);
    CudaStepRunner streamed(*model_, 0, std::nullopt, dense);
    EXPECT_LT(streamed.weight_bytes(), resident.weight_bytes());
    const StepOutput expected = resident.run(input);
    for (int repeat = 0; repeat < 4; ++repeat)
      EXPECT_EQ(streamed.run(input).values, expected.values) << "repeat " << repeat << " keep_logits " << keep_logits;
    if (CudaStepGraphs().enabled()) {
      EXPECT_GT(streamed.graph_replays(), 0u) << "captured on the second run, replayed after";
    }
  }
}

// The residual stream in pinned host memory, its rows staged into each chunk's visit on a copy
// stream and written back on the step's (graph/residual_staging.h, exec/cuda_host_rows.h), gives
// the resident step's bits: unchunked and chunked, launched directly and replayed, with either
// head. MOSAIC_RESIDUAL_IN_HOST=1 makes the runner keep x in host memory for every step; under a
// budget too tight for x on the device the runner chooses it by itself.
TEST_P(CudaStep, ResidualInHostGivesTheResidentBits) {
  for (const bool keep_logits : {false, true}) {
    const StepInput input = random_step({1800, 333}, keep_logits, 21);
    CudaStepRunner resident(*model_, 0, std::nullopt);
    const StepOutput expected = resident.run(input);
    ASSERT_FALSE(expected.chunks.residual_in_host);
    ::setenv("MOSAIC_RESIDUAL_IN_HOST", "1", 1);
    CudaStepRunner unchunked(*model_, 0, std::nullopt);
    for (int repeat = 0; repeat < 3; ++repeat) {
      const StepOutput out = unchunked.run(input);
      EXPECT_TRUE(out.chunks.residual_in_host) << out.chunks.to_string();
      EXPECT_EQ(out.values, expected.values) << out.chunks.to_string() << " repeat " << repeat;
    }
    if (CudaStepGraphs().enabled()) {
      EXPECT_GT(unchunked.graph_replays(), 0u) << "captured on the second run, replayed after";
    }
    // Chunked: the first budget from half the unchunked peak up, in 2 MiB pages, that the step fits.
    constexpr uint64_t kPage = uint64_t{2} << 20;
    bool ran = false;
    for (uint64_t activations = expected.planned_peak / 2; activations < 2 * expected.planned_peak && !ran;
         activations += kPage) {
      CudaStepRunner chunked(*model_, 0, model_->weights().bytes + (uint64_t{64} << 20) + activations);
      StepOutput out;
      try {
        out = chunked.run(input);
      } catch (const std::exception& error) {
        const std::string_view what = error.what();  // exec/step_chunker.cc's two refusals
        if (what.find("does not fit") == what.npos && what.find("needs at least") == what.npos) throw;
        continue;
      }
      ran = true;
      EXPECT_TRUE(out.chunks.residual_in_host) << out.chunks.to_string();
      EXPECT_EQ(out.values, expected.values) << out.chunks.to_string();
      EXPECT_EQ(chunked.run(input).values, expected.values) << out.chunks.to_string() << " again";
    }
    ::unsetenv("MOSAIC_RESIDUAL_IN_HOST");
    EXPECT_TRUE(ran) << "no budget ran the chunked step";
  }
}

// Runs every step on both backends and drives the generation with the CPU's answer, so both see
// the same canvases; checks that the GPU would have decided the same at every step. Bit-equal
// tokens cannot be promised against an fp32 reference (the GPU stores activations in bf16), so
// a token may differ only where the CPU's top two logits are closer than kTieMargin, and every
// value the position selection reads (chosen logit, log-sum-exp) must agree within the bounds' logit_tolerance (step_bounds).
//
// A mixture-of-experts model (routed) adds a difference no tolerance bounds: where a row's k-th
// and (k+1)-th router probabilities are closer than the bf16 activations' error, the GPU picks
// another expert than the CPU, and that row's values move by a few percent (docs/design/moe.md).
// For it, up to bounds.mismatches of the decisive rows may decide otherwise, and the
// bounds.percentile-th percentile of the errors (not the maximum) must be within the logit tolerance.
class LockstepRunner : public StepRunner {
 public:
  LockstepRunner(StepRunner& cpu, StepRunner& gpu, StepBounds bounds = {})
      : routed_(bounds.percentile < 1), bounds_(bounds), cpu_(cpu), gpu_(gpu) {}
  static constexpr double kTieMargin = 0.05;

  // Each runner holds its own KV cache: a sequence's id names the CPU's, the GPU's is looked up.
  uint64_t reserve_cache(int64_t positions) override {
    const uint64_t id = cpu_.reserve_cache(positions);
    gpu_cache_[id] = gpu_.reserve_cache(positions);
    return id;
  }
  void release_cache(uint64_t id) override {
    cpu_.release_cache(id);
    if (const auto found = gpu_cache_.find(id); found != gpu_cache_.end()) {
      gpu_.release_cache(found->second);
      gpu_cache_.erase(found);
    }
  }
  KvCacheStats cache_stats() const override { return gpu_.cache_stats(); }

  StepOutput run(const StepInput& input) override {
    StepOutput expected = cpu_.run(input);
    StepInput on_gpu = input;
    for (SequenceRows& sequence : on_gpu.sequences)
      if (sequence.cached()) sequence.cache_id = gpu_cache_.at(sequence.cache_id);
    const StepOutput got = gpu_.run(on_gpu);
    EXPECT_EQ(got.cols, int64_t{kHeadStatCount});
    EXPECT_EQ(got.values.size(), expected.values.size());
    if (got.values.size() != expected.values.size()) return expected;
    for (size_t r = 0; r < got.values.size() / kHeadStatCount; ++r) {
      const float* e = expected.values.data() + r * kHeadStatCount;
      const float* g = got.values.data() + r * kHeadStatCount;
      ++rows_;
      for (int c = 0; c < kHeadStatCount; ++c) EXPECT_FALSE(std::isnan(g[c])) << "row " << r;
      if (e[kHeadMax] - e[kHeadSecond] < kTieMargin) {
        ++near_ties_;
      } else if (g[kHeadChosen] != e[kHeadChosen]) {
        ++mismatched_;
        if (!routed_)
          ADD_FAILURE() << "step " << steps_ << " row " << r << ": chose " << g[kHeadChosen] << ", the CPU "
                        << e[kHeadChosen];
      }
      if (g[kHeadChosen] == e[kHeadChosen]) {
        const double error = std::max(std::abs(double(g[kHeadChosenLogit]) - e[kHeadChosenLogit]),
                                      std::abs(double(g[kHeadLogSumExp]) - e[kHeadLogSumExp]));
        max_error_ = std::max(max_error_, error);
        errors_.push_back(error);
        ++same_;
      }
    }
    ++steps_;
    return expected;
  }
  // The error the test bounds: the largest, or for a routed model the 95th percentile.
  double bounded_error() const {
    if (!routed_ || errors_.empty()) return max_error_;
    std::vector<double> sorted = errors_;
    std::sort(sorted.begin(), sorted.end());
    return sorted[static_cast<size_t>(bounds_.percentile * double(sorted.size() - 1))];
  }
  void expect_agreement(const std::string& what) const {
    EXPECT_GT(steps_, 0) << what;
    EXPECT_LE(bounded_error(), bounds_.logit_tolerance) << what;
    EXPECT_LE(near_ties_ * 2, rows_) << what << ": too few decisive rows to test anything";
    EXPECT_LE(double(mismatched_), bounds_.mismatches * double(rows_ - near_ties_)) << what;
  }
  int64_t steps_ = 0, rows_ = 0, same_ = 0, near_ties_ = 0, mismatched_ = 0;
  double max_error_ = 0;
  std::vector<double> errors_;
  const bool routed_;
  const StepBounds bounds_;

 private:
  StepRunner& cpu_;
  StepRunner& gpu_;
  std::map<uint64_t, uint64_t> gpu_cache_;  // CPU cache id -> GPU cache id
};

TEST_P(CudaStep, GreedyDecisionsMatchTheCpuAtEveryStep) {
  GenerationOptions options;
  options.gen_length = 24, options.steps = 12;
  if (family() != Family::dream) options.block_length = 8;
  else options.alg = DreamAlg::maskgit_plus;
  const std::vector<GenerationRequest> requests = {
      {{5, 9, 13, 2}, options}, {{77}, options}, {{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}, options}};
  CpuStepRunner cpu(*model_);
  CudaStepRunner gpu(*model_, 0, std::nullopt);
  LockstepRunner lockstep(cpu, gpu, step_bounds(GetParam()));
  const auto expected = generate(model_->config(), cpu, requests);
  const auto driven = generate(model_->config(), lockstep, requests);
  for (size_t r = 0; r < requests.size(); ++r) EXPECT_EQ(driven[r].canvas, expected[r].canvas);
  lockstep.expect_agreement("greedy");

  // Free-running on the GPU alone: reported, not asserted (a near-tie may fork the trajectory).
  const auto alone = generate(model_->config(), gpu, requests);
  int64_t same_tokens = 0, tokens = 0;
  for (size_t r = 0; r < requests.size(); ++r)
    for (size_t i = 0; i < alone[r].canvas.size(); ++i, ++tokens)
      same_tokens += alone[r].canvas[i] == expected[r].canvas[i];
  std::printf("  %s: %lld steps, %lld rows, %lld near-ties, %lld decisive rows decided otherwise, same choice %lld,"
              " max |logit error| %.4f (95th percentile %.4f); free-running GPU generation equals the CPU's on"
              " %lld/%lld tokens\n",
              tiny_model_name(GetParam()).c_str(), (long long)lockstep.steps_, (long long)lockstep.rows_,
              (long long)lockstep.near_ties_, (long long)lockstep.mismatched_, (long long)lockstep.same_,
              lockstep.max_error_, lockstep.bounded_error(),
              (long long)same_tokens, (long long)tokens);
}

// Whether a cached step's few-row sequences read their keys in parts here (split-keys attention:
// head_dim 128 on a Hopper device), which rounds them otherwise than the full step does.
bool keys_split_here(const ModelConfig& config) {
  return config.head_dim == 128 && cuda::split_keys_attention_available();
}

// Logits of a cached step against the full step's: the same bits, or where keys are split within
// twice the lock-step tolerance (each of the two is within it of the fp32 CPU).
void expect_cached_logits(const std::vector<float>& got, const std::vector<float>& want, bool split,
                          double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  if (!split) {
    EXPECT_EQ(got, want);
    return;
  }
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double{got[i]} - want[i]));
  EXPECT_LE(worst, 2 * tolerance);
  EXPECT_NE(got, want) << "split keys round otherwise: the same bits suggest they did not run";
}

// The cached step on the GPU (docs/design/kv-cache.md): computing every row against the KV cache
// gives the full step's bits; computing some rows against the cache the same canvases filled gives
// the full step's bits for them (keys read through the page table, tiles as before). Sequences of
// few rows whose keys are split (docs/design/split-keys-attention.md) are within bf16 tolerance
// instead, and their bits do not depend on the batch.
TEST_P(CudaStep, CachedStepsGiveTheFullStepsBits) {
  const bool split = keys_split_here(model_->config());
  const double tolerance = step_bounds(GetParam()).logit_tolerance;
  CudaStepRunner gpu(*model_, 0, std::nullopt);
  StepInput full = random_step({8300, 37, 8500}, /*keep_logits=*/true, 7);
  const StepOutput expected = gpu.run(full);
  StepInput cached = full;
  const uint64_t spacer = gpu.reserve_cache(200);  // the sequences' pages do not start at 0
  for (SequenceRows& s : cached.sequences) {
    s.cache_id = gpu.reserve_cache(static_cast<int64_t>(s.ids.size()));
    s.begin = 0, s.end = static_cast<int64_t>(s.ids.size());
  }
  gpu.release_cache(spacer);
  EXPECT_EQ(gpu.run(cached).values, expected.values);  // every sequence computes too many rows to split
  // Rows [begin, end) of each: the candidates there, against the cache of the same canvases.
  // (The first and the last against >= 8,192 keys: split where the kernel runs.)
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{130, 290}, {10, 20}, {8300, 8500}};
  std::vector<std::vector<int32_t>> rows(3);
  std::vector<float> want;
  const int64_t vocab = expected.cols;
  int64_t base = 0;
  for (size_t s = 0; s < 3; ++s) {
    const std::vector<int32_t>& all = rows_[s];
    for (size_t i = 0; i < all.size(); ++i) {
      const int64_t source = model_->config().shifted_logits() ? std::max(all[i] - 1, 0) : all[i];
      if (source < ranges[s].first || source >= ranges[s].second) continue;
      rows[s].push_back(all[i]);
      want.insert(want.end(), expected.values.begin() + (base + i) * vocab, expected.values.begin() + (base + i + 1) * vocab);
    }
    base += static_cast<int64_t>(all.size());
    cached.sequences[s].rows = rows[s];
    cached.sequences[s].begin = ranges[s].first, cached.sequences[s].end = ranges[s].second;
  }
  const StepOutput batched = gpu.run(cached);
  expect_cached_logits(batched.values, want, split, tolerance);
  // Each sequence's rows alone: the bits they had in the batch.
  int64_t offset = 0;
  for (size_t s = 0; s < 3; ++s) {
    StepInput alone;
    alone.keep_logits = true;
    alone.sequences = {cached.sequences[s]};
    const std::vector<float> values = gpu.run(alone).values;
    EXPECT_TRUE(std::equal(values.begin(), values.end(), batched.values.begin() + offset)) << "sequence " << s;
    offset += static_cast<int64_t>(values.size());
  }
  EXPECT_GT(gpu.cache_stats().pages_used, 0);
  for (const SequenceRows& s : cached.sequences) gpu.release_cache(s.cache_id);
  EXPECT_EQ(gpu.cache_stats().pages_used, 0);
  EXPECT_EQ(gpu.cache_stats().bytes, 0u);
}

// Generations with each cache, lock-step against the CPU: every decisive choice the same.
TEST_P(CudaStep, CachedGenerationsMatchTheCpuAtEveryStep) {
  auto run = [&](const Model& model, GenerationOptions options, const char* what) {
    const std::vector<GenerationRequest> requests = {
        {{5, 9, 13, 2}, options}, {{77}, options}, {{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}, options}};
    CpuStepRunner cpu(model);
    CudaStepRunner gpu(model, 0, std::nullopt);
    LockstepRunner lockstep(cpu, gpu, step_bounds(GetParam()));
    const auto expected = generate(model.config(), cpu, requests);
    const auto driven = generate(model.config(), lockstep, requests);
    for (size_t r = 0; r < requests.size(); ++r) EXPECT_EQ(driven[r].canvas, expected[r].canvas) << what;
    lockstep.expect_agreement(what);
    EXPECT_EQ(gpu.cache_stats().pages_used, 0) << what;
    // Each block's steps keep one shape once padded (exec/replay_padding.h), so they replay.
    if (CudaStepGraphs().enabled() && replay_padding_from_environment() && options.cache == CacheMode::prefix) {
      EXPECT_GT(gpu.graph_replays(), 0u) << what;
    }
    std::printf("  %s %s: %lld steps, %lld rows, %lld near-ties, %lld decided otherwise, max |logit error| %.4f"
                " (95th percentile %.4f), %zu graph replays\n",
                tiny_model_name(GetParam()).c_str(), what, (long long)lockstep.steps_, (long long)lockstep.rows_,
                (long long)lockstep.near_ties_, (long long)lockstep.mismatched_, lockstep.max_error_,
                lockstep.bounded_error(), gpu.graph_replays());
  };
  GenerationOptions options;
  options.gen_length = 24, options.steps = 24, options.block_length = 8;
  if (family() == Family::dream) options.alg = DreamAlg::maskgit_plus;
  if (family() == Family::llada2) {  // block-causal by architecture: its block cache, and none
    options.steps = 8;
    run(*model_, options, "block");
    options.cache = CacheMode::none;
    run(*model_, options, "none");
    return;
  }
  for (const CacheMode mode : {CacheMode::prefix, CacheMode::dual}) {
    options.cache = mode;
    run(*model_, options, mode == CacheMode::prefix ? "prefix" : "dual");
  }
  // A block-causal copy of the model: its exact block cache.
  ModelConfig config = model_->config();
  config.block_attention = BlockAttention::prompt;
  const fs::path dir = dir_.string() + "_block";
  write_test_model(config, {.dtype = DType::bf16, .seed = 21}, dir);
  const auto block_causal = Model::load(dir);
  options.cache = CacheMode::automatic;
  run(*block_causal, options, "block");
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaStep,
                         ::testing::Values(TinyModel{Family::llada}, TinyModel{Family::dream},
                                           TinyModel{Family::llada, 128}, TinyModel{Family::dream, 128},
                                           TinyModel{Family::llada, 80}, TinyModel{Family::llada, 96},
                                           TinyModel{Family::llada, 256}, TinyModel{Family::dream, 80},
                                           TinyModel{Family::llada, 32}, TinyModel{Family::llada, 72},
                                           TinyModel{Family::llada_moe}, TinyModel{Family::llada2},
                                           TinyModel{Family::llada2, 0, true}),
                         [](const auto& info) { return tiny_model_name(info.param); });

}  // namespace
}  // namespace mosaic
