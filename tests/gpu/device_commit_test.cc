// On a GPU: the commit on the device (docs/design/device-commit.md) chooses what the host commit
// chooses.
//  - The commit kernel against gen's own choice_from_head and position_select, on the head
//    statistics of random logits rows (the host sampler's), exact ties and banned tokens included.
//  - Whole generations on the CUDA runner with the device commit against the same runner with the
//    host commit: the same GPU forward, so the same statistics, hence the same tokens, step by
//    step. LLaDA top-k and threshold, Dream's top-k algorithms and threshold, batches of requests
//    with different prompts, seeds and rules; the device canvas equals the host's mirror before
//    every step and is uploaded once per request.
// Skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>

#include "backend/cuda/commit.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/test_device_buffer.h"
#include "exec/step_runner.h"
#include "gen/confidence.h"
#include "gen/generator.h"
#include "gen/host_sampler.h"
#include "gen/position_select.h"
#include "mem/cuda_arena.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

// ---- the kernel against gen's ranking -------------------------------------------------------

using cuda::testing_support::DeviceBuffer;
using cuda::testing_support::download;

class DeviceCommitKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_devices_visible()) GTEST_SKIP() << "no CUDA device";
  }
};

constexpr int32_t kBannedToken = 5;  // left out of every row's statistics: its confidence is 0
constexpr int32_t kUnwritten = -1;   // canvas poison

// One sequence's candidate rows as a decoder hands them over: increasing canvas positions, the
// statistics the fused head's contract gives for random logits rows (greedy and Gumbel rows).
struct SequenceCase {
  int64_t length = 0;
  std::vector<HeadRowSampling> sampling;
  std::vector<float> stats;  // [rows, kHeadStatCount]
  CommitRule rule;
};

SequenceCase random_sequence(int64_t rows, CommitRule rule, std::mt19937& rng) {
  constexpr int64_t kVocab = 64;
  std::normal_distribution<float> normal(0.0f, 2.0f);
  SequenceCase c;
  c.rule = rule;
  c.length = rows * 3 + 4;
  std::vector<int32_t> positions(static_cast<size_t>(c.length));
  std::iota(positions.begin(), positions.end(), 0);
  std::shuffle(positions.begin(), positions.end(), rng);
  positions.resize(static_cast<size_t>(rows));
  std::sort(positions.begin(), positions.end());
  c.stats.resize(static_cast<size_t>(rows) * kHeadStatCount);
  std::vector<float> logits(kVocab);
  for (int64_t i = 0; i < rows; ++i) {
    float* out = c.stats.data() + i * kHeadStatCount;
    HeadRowSampling how;
    how.seed = 99, how.step = 3, how.position = static_cast<uint32_t>(positions[static_cast<size_t>(i)]);
    how.choice_inv_temperature = i % 3 == 0 ? 0.0 : 1.0 / 0.8;
    how.stats_bans[0] = kBannedToken;
    if (i % 4 == 3) {
      // An exact tie: the previous row's statistics at a later position.
      std::copy(out - kHeadStatCount, out, out);
    } else {
      for (float& l : logits) l = normal(rng);
      if (i % 7 == 1) logits[kBannedToken] += 12.0f;  // a greedy row chooses the banned token
      sample_logits_row(logits, how, {}, out);
    }
    c.sampling.push_back(how);
  }
  return c;
}

// Checks one sequence's device outcome; returns the rows whose confidence ties another's.
int64_t expect_sequence(const SequenceCase& c, const CommittedRow* got, const std::vector<int32_t>& canvas,
                        size_t index) {
  const size_t rows = c.sampling.size();
  std::vector<RankedPosition> on_device, on_host;
  for (size_t i = 0; i < rows; ++i) {
    const TokenChoice host = choice_from_head(c.stats.data() + i * kHeadStatCount, c.sampling[i], c.rule.confidence);
    EXPECT_EQ(got[i].token, host.token) << "sequence " << index << " row " << i;
    // The device's double exp and the host's may differ in the last bits; nothing else does.
    EXPECT_NEAR(got[i].confidence, host.confidence, 1e-15 * std::max(1.0, std::abs(host.confidence)))
        << "sequence " << index << " row " << i;
    const int32_t position = static_cast<int32_t>(c.sampling[i].position);
    on_device.push_back({position, got[i].confidence});
    on_host.push_back({position, host.confidence});
  }
  auto select = [&](const std::vector<RankedPosition>& ranked) {
    std::vector<size_t> chosen = c.rule.selection == CommitSelection::top_k
                                     ? top_k_positions(ranked, c.rule.k)
                                     : threshold_positions(ranked, c.rule.threshold);
    std::sort(chosen.begin(), chosen.end());
    return chosen;
  };
  const std::vector<size_t> chosen = select(on_device);
  EXPECT_EQ(select(on_host), chosen) << "sequence " << index << ": the host's own confidences choose differently";
  std::vector<int32_t> expected_canvas(static_cast<size_t>(c.length), kUnwritten);
  for (size_t i = 0, next = 0; i < rows; ++i) {
    const bool committed = next < chosen.size() && chosen[next] == i;
    if (committed) {
      ++next;
      expected_canvas[c.sampling[i].position] = got[i].token;
    }
    EXPECT_EQ(got[i].committed, committed ? 1 : 0) << "sequence " << index << " row " << i;
  }
  EXPECT_EQ(canvas, expected_canvas) << "sequence " << index;
  int64_t tied = 0;
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < rows; ++j)
      if (i != j && on_device[i].score == on_device[j].score) {
        ++tied;
        break;
      }
  return tied;
}

TEST_F(DeviceCommitKernel, ChoosesWhatPositionSelectChoosesOnTheSameStatistics) {
  std::mt19937 rng(5);
  const std::pair<ConfidenceKind, double> kinds[] = {{ConfidenceKind::chosen_probability, 0.3},
                                                     {ConfidenceKind::top2_margin, 0.3},
                                                     {ConfidenceKind::negative_entropy, -2.0}};
  for (const auto& [kind, threshold] : kinds) {
    // Row counts around the kernel's 512-row tile; k of 0, 1, some, all and more than all.
    std::vector<SequenceCase> cases;
    for (const auto& [rows, k] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {10, 3}, {37, 0}, {600, 200}, {1100, 2000}, {513, 512}})
      cases.push_back(random_sequence(rows, {kind, CommitSelection::top_k, k, 0.0}, rng));
    for (const int64_t rows : {50, 700, 9})
      cases.push_back(random_sequence(rows, {kind, CommitSelection::threshold, 0, threshold}, rng));
    cases.push_back(random_sequence(9, {kind, CommitSelection::threshold, 0, 1e9}, rng));  // the best alone

    std::vector<float> stats;
    std::vector<HeadRowSampling> sampling;
    std::vector<std::unique_ptr<DeviceBuffer>> canvases;
    std::vector<cuda::CommitSequence> sequences;
    for (const SequenceCase& c : cases) {
      canvases.push_back(
          std::make_unique<DeviceBuffer>(std::vector<int32_t>(static_cast<size_t>(c.length), kUnwritten)));
      sequences.push_back({static_cast<int64_t>(sampling.size()), static_cast<int64_t>(c.sampling.size()),
                           canvases.back()->as<int32_t>(), c.rule});
      stats.insert(stats.end(), c.stats.begin(), c.stats.end());
      sampling.insert(sampling.end(), c.sampling.begin(), c.sampling.end());
    }
    const DeviceBuffer device_stats(stats), device_sampling(sampling), device_sequences(sequences);
    const DeviceBuffer out(std::vector<CommittedRow>(sampling.size()));
    cuda::CommitArgs args;
    args.stats = device_stats.as<float>(), args.stats_stride = kHeadStatCount;
    args.sampling = device_sampling.as<HeadRowSampling>();
    args.sequences = device_sequences.as<cuda::CommitSequence>();
    args.sequence_count = static_cast<int64_t>(sequences.size());
    args.out = out.as<CommittedRow>();
    cuda::commit_rows(args, nullptr);
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<CommittedRow> got = download<CommittedRow>(out, sampling.size());
    int64_t tied = 0;
    for (size_t s = 0; s < cases.size(); ++s)
      tied += expect_sequence(cases[s], got.data() + sequences[s].row_begin,
                              download<int32_t>(*canvases[s], static_cast<size_t>(cases[s].length)), s);
    EXPECT_GT(tied, 100) << "the cases must hold exact ties";
  }
}

// ---- whole generations: device commit against host commit ----------------------------------

// The CUDA runner with the generation loop ranking on the host.
class HostCommitRunner final : public StepRunner {
 public:
  explicit HostCommitRunner(CudaStepRunner& gpu) : gpu_(gpu) {}
  StepOutput run(const StepInput& input) override { return gpu_.run(input); }
  void release_canvas(uint64_t canvas_id) override { gpu_.release_canvas(canvas_id); }
  uint64_t reserve_cache(int64_t positions) override { return gpu_.reserve_cache(positions); }
  void release_cache(uint64_t id) override { gpu_.release_cache(id); }
  KvCacheStats cache_stats() const override { return gpu_.cache_stats(); }

 private:
  CudaStepRunner& gpu_;
};

// The CUDA runner committing on the device. Before every step, each canvas the device holds must
// equal the host's mirror the step is given (nothing but the device's own commits changes a
// canvas when every request's rule is covered and none stops at EOS midway).
class MirrorCheckingRunner final : public StepRunner {
 public:
  explicit MirrorCheckingRunner(CudaStepRunner& gpu) : gpu_(gpu) {}
  bool commits_on_device() const override { return true; }
  void release_canvas(uint64_t canvas_id) override { gpu_.release_canvas(canvas_id); }
  uint64_t reserve_cache(int64_t positions) override { return gpu_.reserve_cache(positions); }
  void release_cache(uint64_t id) override { gpu_.release_cache(id); }
  KvCacheStats cache_stats() const override { return gpu_.cache_stats(); }
  StepOutput run(const StepInput& input) override {
    for (const SequenceRows& sequence : input.sequences) {
      if (sequence.canvas_id == 0) continue;
      const std::vector<int32_t> resident = gpu_.resident_canvas(sequence.canvas_id);
      if (resident.empty()) continue;  // its first step
      ++canvases_checked;
      EXPECT_TRUE(std::ranges::equal(resident, sequence.ids))
          << "step " << steps << ": the device canvas differs from the host's mirror";
    }
    for (const std::optional<CommitRule>& rule : input.device_commit) sequences_committed += rule.has_value();
    ++steps;
    return gpu_.run(input);
  }
  int64_t steps = 0, canvases_checked = 0, sequences_committed = 0;

 private:
  CudaStepRunner& gpu_;
};

struct Trace {
  std::vector<GenerationResult> results;
  // Per event: (request, step) -> committed positions and their confidences.
  std::map<std::pair<int64_t, int64_t>, std::pair<std::vector<int32_t>, std::vector<float>>> steps;
};

Trace run_generation(const ModelConfig& config, StepRunner& runner, const std::vector<GenerationRequest>& requests) {
  Trace trace;
  trace.results = generate(config, runner, requests, [&](const StepEvent& event) {
    trace.steps[{event.request, event.step}] = {{event.committed.begin(), event.committed.end()},
                                                {event.confidence.begin(), event.confidence.end()}};
    return true;
  });
  return trace;
}

class DeviceCommitGeneration : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    if (!cuda_devices_visible()) GTEST_SKIP() << "no CUDA device";
    const ModelConfig config = test_model_preset(GetParam(), "tiny");
    dir_ = fs::temp_directory_path() / ("mosaic_device_commit_" + std::to_string(::getpid()));
    write_test_model(config, {.dtype = DType::bf16, .seed = 31}, dir_);
    model_ = Model::load(dir_);
    gpu_ = std::make_unique<CudaStepRunner>(*model_, 0, std::nullopt);
  }
  void TearDown() override {
    gpu_.reset();
    model_.reset();
    fs::remove_all(dir_);
  }
  const ModelConfig& config() const { return model_->config(); }

  // Several prompts, each with every option set under two seeds: one batch.
  static std::vector<GenerationRequest> batch(const std::vector<GenerationOptions>& option_sets, uint64_t seed) {
    const std::vector<std::vector<int32_t>> prompts = {
        {5, 9, 13, 2}, {77}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}, {100, 200, 300, 400, 500, 600}};
    std::vector<GenerationRequest> requests;
    for (size_t o = 0; o < option_sets.size(); ++o) {
      for (size_t p = 0; p < prompts.size(); ++p) {
        GenerationOptions options = option_sets[o];
        options.seed = seed + 17 * o + p;
        requests.push_back({prompts[(p + o) % prompts.size()], options});
      }
    }
    return requests;
  }

  // Generates `requests` with both commits and expects the same steps, tokens and confidences.
  // Returns the host commit's trace.
  Trace expect_same_generation(const std::vector<GenerationRequest>& requests, const char* what) {
    HostCommitRunner host(*gpu_);
    MirrorCheckingRunner device(*gpu_);
    const Trace expected = run_generation(config(), host, requests);
    const int64_t uploads_before = gpu_->canvas_uploads();
    const Trace got = run_generation(config(), device, requests);
    EXPECT_EQ(gpu_->canvas_uploads() - uploads_before, static_cast<int64_t>(requests.size()))
        << what << ": each canvas crosses to the device once";
    EXPECT_GT(device.sequences_committed, 0) << what;
    EXPECT_GT(device.canvases_checked, 0) << what;
    for (size_t r = 0; r < requests.size(); ++r) {
      EXPECT_EQ(got.results[r].canvas, expected.results[r].canvas) << what << ", request " << r;
      EXPECT_EQ(got.results[r].steps, expected.results[r].steps) << what << ", request " << r;
      EXPECT_EQ(got.results[r].forwards, expected.results[r].forwards) << what << ", request " << r;
      EXPECT_EQ(got.results[r].tokens_per_step, expected.results[r].tokens_per_step) << what << ", request " << r;
      EXPECT_EQ(got.results[r].stopped_at_eos, expected.results[r].stopped_at_eos) << what << ", request " << r;
    }
    EXPECT_EQ(got.steps.size(), expected.steps.size()) << what;
    for (const auto& [key, step] : expected.steps) {
      const auto found = got.steps.find(key);
      if (found == got.steps.end()) continue;
      EXPECT_EQ(found->second.first, step.first) << what << ", request " << key.first << " step " << key.second;
      EXPECT_EQ(found->second.second.size(), step.second.size());
      if (found->second.second.size() != step.second.size()) continue;
      for (size_t i = 0; i < step.second.size(); ++i)
        EXPECT_NEAR(found->second.second[i], step.second[i], 1e-6 * std::abs(step.second[i]))
            << what << ", request " << key.first << " step " << key.second;
    }
    int64_t most = 0;
    for (const GenerationResult& result : got.results)
      for (const int64_t n : result.tokens_per_step) most = std::max(most, n);
    std::printf("  %s %s: %zu requests, %lld steps, %lld sequence commits on the device, %lld canvases checked,"
                " at most %lld tokens in a step\n",
                family_name(GetParam()).data(), what, requests.size(), (long long)device.steps,
                (long long)device.sequences_committed, (long long)device.canvases_checked, (long long)most);
    return expected;
  }

  fs::path dir_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<CudaStepRunner> gpu_;
};

// A threshold that some steps' second-best rows pass: the median confidence a top-k generation
// committed.
double median_committed_confidence(const Trace& trace) {
  std::vector<float> all;
  for (const auto& [key, step] : trace.steps) all.insert(all.end(), step.second.begin(), step.second.end());
  if (all.empty()) return 0.5;
  std::nth_element(all.begin(), all.begin() + all.size() / 2, all.end());
  return all[all.size() / 2];
}

std::vector<GenerationOptions> top_k_options(Family family) {
  std::vector<GenerationOptions> sets;
  GenerationOptions o;
  if (family == Family::llada) {
    o.gen_length = 24, o.steps = 12, o.block_length = 8;
    sets.push_back(o);                                  // low_confidence, greedy
    o.temperature = 0.7;
    sets.push_back(o);                                  // Gumbel token choice
    o.temperature = 0, o.confidence_eos_eot_inf = true;
    sets.push_back(o);                                  // EOS left out of the statistics
    o.confidence_eos_eot_inf = false, o.remasking = Remasking::random, o.temperature = 0.5;
    sets.push_back(o);                                  // every candidate unmasked
  } else {
    o.gen_length = 20, o.steps = 10;
    o.alg = DreamAlg::maskgit_plus;
    sets.push_back(o);
    o.alg = DreamAlg::topk_margin, o.temperature = 0.6;
    sets.push_back(o);
    o.alg = DreamAlg::entropy, o.temperature = 0.4;
    sets.push_back(o);
    o.alg = DreamAlg::origin, o.temperature = 0;
    sets.push_back(o);
  }
  return sets;
}

TEST_P(DeviceCommitGeneration, TopKGivesTheHostCommitsTokens) {
  for (const uint64_t seed : {1u, 1000u}) expect_same_generation(batch(top_k_options(GetParam()), seed), "top-k");
}

TEST_P(DeviceCommitGeneration, ThresholdGivesTheHostCommitsTokens) {
  // The first top-k option set ranks by p(x0) in both families, as a threshold does.
  HostCommitRunner host(*gpu_);
  const double threshold =
      median_committed_confidence(run_generation(config(), host, batch({top_k_options(GetParam()).front()}, 3)));
  GenerationOptions o;
  o.threshold = threshold;
  if (GetParam() == Family::llada) o.gen_length = 24, o.steps = 24, o.block_length = 8;
  else o.gen_length = 20, o.steps = 20, o.alg = DreamAlg::entropy;  // a rule ranks p(x0) whatever alg says
  GenerationOptions sampled = o;
  sampled.temperature = 0.5;
  for (const uint64_t seed : {5u, 500u}) expect_same_generation(batch({o, sampled}, seed), "threshold");
}

TEST_P(DeviceCommitGeneration, StoppingAtEosGivesTheHostCommitsTokens) {
  // EOS := the token the first generated position gets, so that requests stop early and fill.
  GenerationOptions o = top_k_options(GetParam()).front();
  HostCommitRunner host(*gpu_);
  const Trace plain = run_generation(config(), host, batch({o}, 7));
  o.stop_at_eos = true;
  o.eos_id = plain.results.front().canvas[static_cast<size_t>(plain.results.front().prompt_length)];
  const Trace stopped = expect_same_generation(batch({o}, 7), "stop at EOS");
  EXPECT_TRUE(stopped.results.front().stopped_at_eos);
}

INSTANTIATE_TEST_SUITE_P(Families, DeviceCommitGeneration, ::testing::Values(Family::llada, Family::dream),
                         [](const auto& info) { return std::string(family_name(info.param)); });

}  // namespace
}  // namespace mosaic
