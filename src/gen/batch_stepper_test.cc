// Step-at-a-time batching: requests that join late, leave early or share their steps with any
// other requests get exactly the tokens they get alone; no step exceeds the summed step bounds;
// a failed step leaves every request where it was; a runner that commits on the device gives the
// host commit's tokens, with canvases that only its own commits change.
#include "gen/batch_stepper.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "core/error.h"
#include "exec/replay_padding.h"
#include "gen/confidence.h"
#include "gen/generator.h"
#include "gen/position_select.h"
#include "gen/step_bound.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Model> tiny_model(Family family) {
  ModelConfig config = test_model_preset(family, "tiny");
  config.hidden = 64, config.layers = 1, config.heads = 2, config.kv_heads = 1;
  config.head_dim = config.hidden / config.heads, config.ffn = 96, config.vocab = 300;
  config.mask_token_id = 299, config.eos_token_id = config.pad_token_id = 298;
  const fs::path dir = fs::temp_directory_path() /
                       ("mosaic_stepper_test_" + std::to_string(::getpid()) + std::string(family_name(family)));
  write_test_model(config, {.dtype = DType::bf16, .seed = 5, .progress = {}}, dir);
  auto model = Model::load(dir);
  fs::remove_all(dir);  // the mapping keeps the data alive
  return model;
}

// Records each step's shape; can fail one chosen call.
class RecordingRunner final : public StepRunner {
 public:
  explicit RecordingRunner(StepRunner& inner) : inner_(inner) {}
  StepOutput run(const StepInput& input) override {
    if (calls_++ == fail_at) fail("planned failure at call {}", fail_at);
    StepBound shape;
    for (const SequenceRows& s : input.sequences) {
      shape.tokens += static_cast<int64_t>(s.ids.size());
      shape.candidates += static_cast<int64_t>(s.rows.size());
    }
    shape.logits = input.keep_logits;
    shapes.push_back(shape);
    return inner_.run(input);
  }
  uint64_t reserve_cache(int64_t positions) override { return inner_.reserve_cache(positions); }
  void release_cache(uint64_t id) override { inner_.release_cache(id); }
  KvCacheStats cache_stats() const override { return inner_.cache_stats(); }
  std::vector<StepBound> shapes;
  int64_t fail_at = -1;

 private:
  StepRunner& inner_;
  int64_t calls_ = 0;
};

// Each call takes at least `delay` and reports `host_seconds` of launch time.
class SlowRunner final : public StepRunner {
 public:
  explicit SlowRunner(StepRunner& inner) : inner_(inner) {}
  StepOutput run(const StepInput& input) override {
    ++calls;
    const auto start = std::chrono::steady_clock::now();
    StepOutput out = inner_.run(input);
    std::this_thread::sleep_until(start + delay);
    out.host_seconds = host_seconds;
    return out;
  }
  uint64_t reserve_cache(int64_t positions) override { return inner_.reserve_cache(positions); }
  void release_cache(uint64_t id) override { inner_.release_cache(id); }
  KvCacheStats cache_stats() const override { return inner_.cache_stats(); }
  std::chrono::milliseconds delay{5};
  double host_seconds = 0.001;
  int64_t calls = 0;

 private:
  StepRunner& inner_;
};

// Commits on the "device" the way CudaStepRunner does, emulated on the host with gen's own
// ranking: it holds every canvas it is given by id and applies its commits to it, poisons the
// statistics of the rows it committed (the stepper must not read them) and returns none when it
// committed every row. It counts the steps whose canvas differs from the one it holds: changes
// the host made (host commits, EOS fills), which a device runner has to upload again.
class EmulatedDeviceCommitRunner final : public StepRunner {
 public:
  explicit EmulatedDeviceCommitRunner(StepRunner& inner) : inner_(inner) {}
  bool commits_on_device() const override { return true; }
  uint64_t reserve_cache(int64_t positions) override { return inner_.reserve_cache(positions); }
  void release_cache(uint64_t id) override { inner_.release_cache(id); }
  KvCacheStats cache_stats() const override { return inner_.cache_stats(); }
  void release_canvas(uint64_t canvas_id) override {
    held.erase(canvas_id);
    released.insert(canvas_id);
  }

  StepOutput run(const StepInput& input) override {
    StepInput forward = input;
    forward.device_commit.clear();
    StepOutput out = inner_.run(forward);
    int64_t rows = 0;
    for (const SequenceRows& s : input.sequences) rows += static_cast<int64_t>(s.rows.size());
    out.committed.assign(static_cast<size_t>(rows), CommittedRow{});
    int64_t row = 0, host_rows = 0;
    for (size_t s = 0; s < input.sequences.size(); ++s) {
      const SequenceRows& sequence = input.sequences[s];
      const int64_t n = static_cast<int64_t>(sequence.rows.size());
      if (sequence.canvas_id != 0) {
        EXPECT_FALSE(released.contains(sequence.canvas_id)) << "a released canvas stepped again";
        const auto [canvas, fresh] = held.try_emplace(sequence.canvas_id);
        if (!fresh && !std::ranges::equal(canvas->second, sequence.ids)) ++host_changes;
        canvas->second.assign(sequence.ids.begin(), sequence.ids.end());
      }
      const std::optional<CommitRule> rule = input.device_commit.empty() ? std::nullopt : input.device_commit[s];
      if (!rule) {
        host_rows += n;
        row += n;
        continue;
      }
      EXPECT_FALSE(input.keep_logits);
      EXPECT_NE(sequence.canvas_id, 0u);
      ++device_commits;
      std::vector<RankedPosition> ranked;
      for (int64_t i = 0; i < n; ++i) {
        float* stats = out.values.data() + (row + i) * kHeadStatCount;
        const TokenChoice choice = choice_from_head(stats, input.sampling[static_cast<size_t>(row + i)], rule->confidence);
        out.committed[static_cast<size_t>(row + i)] = {choice.token, 0, choice.confidence};
        ranked.push_back({sequence.rows[i], choice.confidence});
        std::fill(stats, stats + kHeadStatCount, std::nanf(""));
      }
      const std::vector<size_t> chosen = rule->selection == CommitSelection::top_k
                                             ? top_k_positions(ranked, rule->k)
                                             : threshold_positions(ranked, rule->threshold);
      for (const size_t i : chosen) {
        CommittedRow& committed = out.committed[static_cast<size_t>(row) + i];
        committed.committed = 1;
        held[sequence.canvas_id][static_cast<size_t>(sequence.rows[i])] = committed.token;
      }
      row += n;
    }
    if (host_rows == 0) out.values.clear();
    return out;
  }

  std::map<uint64_t, std::vector<int32_t>> held;  // canvas id -> what the "device" holds
  std::set<uint64_t> released;
  int64_t device_commits = 0, host_changes = 0;

 private:
  StepRunner& inner_;
};

struct Case {
  std::vector<int32_t> prompt;
  GenerationOptions options;
};

// Options whose every step the device can commit (SequenceDecoder::device_commit_rule; D2F's
// blocks differ in their rule within a step, so the host commits them).
bool device_covered(const GenerationOptions& o) {
  return !o.d2f && o.cfg_scale == 0 && !o.factor && !(o.alg_temp && *o.alg_temp > 0) && !o.top_p && !o.top_k;
}

std::vector<Case> llada_cases() {
  std::vector<Case> cases;
  auto add = [&](std::vector<int32_t> prompt, const std::function<void(GenerationOptions&)>& set) {
    GenerationOptions o;
    o.gen_length = 16, o.steps = 8, o.seed = 3;
    set(o);
    cases.push_back({std::move(prompt), o});
  };
  add({1, 2, 3}, [](GenerationOptions&) {});
  add({7, 8, 9, 10, 11}, [](GenerationOptions& o) { o.block_length = 4, o.temperature = 0.7; });
  add({4}, [](GenerationOptions& o) { o.remasking = Remasking::random, o.block_length = 8; });
  add({5, 6, 7, 8}, [](GenerationOptions& o) { o.cfg_scale = 1.5, o.temperature = 1.0; });
  add({9, 10}, [](GenerationOptions& o) { o.threshold = 0.2, o.steps = 16, o.block_length = 8; });
  add({12, 13, 14}, [](GenerationOptions& o) { o.factor = 1.0, o.steps = 16, o.seed = 9; });
  // With a KV cache: these share steps with the others in a cached step of their own.
  add({15, 16, 17}, [](GenerationOptions& o) { o.cache = CacheMode::prefix, o.block_length = 4; });
  add({18, 19}, [](GenerationOptions& o) { o.cache = CacheMode::dual, o.block_length = 8, o.temperature = 0.9; });
  add({20}, [](GenerationOptions& o) { o.cache = CacheMode::dual, o.threshold = 0.2, o.steps = 16, o.block_length = 4; });
  // D2F's pipelined blocks (docs/design/d2f-decoding.md), with its block cache and without.
  add({21, 22, 23}, [](GenerationOptions& o) {
    o.block_length = 4, o.temperature = 0.8;
    o.d2f = D2fOptions{.block_add_threshold = 0.25, .decoded_token_threshold = 0.5, .skip_threshold = 0.05};
  });
  add({24}, [](GenerationOptions& o) { o.block_length = 8, o.cache = CacheMode::none, o.d2f = D2fOptions{}; });
  return cases;
}

std::vector<Case> dream_cases() {
  std::vector<Case> cases;
  auto add = [&](std::vector<int32_t> prompt, const std::function<void(GenerationOptions&)>& set) {
    GenerationOptions o;
    o.gen_length = 12, o.steps = 6, o.seed = 4;
    set(o);
    cases.push_back({std::move(prompt), o});
  };
  add({1, 2, 3}, [](GenerationOptions&) {});
  add({3, 4}, [](GenerationOptions& o) { o.alg = DreamAlg::entropy, o.temperature = 0.5, o.alg_temp = 0.3; });
  add({9, 8, 7, 6}, [](GenerationOptions& o) { o.alg = DreamAlg::topk_margin, o.top_k = 20, o.temperature = 1.0; });
  add({2}, [](GenerationOptions& o) { o.alg = DreamAlg::maskgit_plus, o.top_p = 0.9, o.temperature = 0.8; });
  add({5, 5, 5}, [](GenerationOptions& o) { o.threshold = 0.1, o.steps = 12; });
  add({6, 7}, [](GenerationOptions& o) { o.block_length = 4, o.alg = DreamAlg::entropy; });  // blocks, no cache
  add({8, 9, 10}, [](GenerationOptions& o) { o.cache = CacheMode::dual, o.block_length = 6, o.alg = DreamAlg::maskgit_plus; });
  add({11}, [](GenerationOptions& o) { o.cache = CacheMode::prefix, o.threshold = 0.1, o.steps = 12, o.block_length = 4; });
  add({12, 13}, [](GenerationOptions& o) {
    o.block_length = 4, o.d2f = D2fOptions{.block_add_threshold = 0.5, .decoded_token_threshold = 0.75, .skip_threshold = 0.05};
  });
  return cases;
}

GenerationResult alone(const ModelConfig& config, StepRunner& runner, const Case& c) {
  return generate(config, runner, {{c.prompt, c.options}}).front();
}

void expect_same(const GenerationResult& a, const GenerationResult& b, size_t index) {
  EXPECT_EQ(a.canvas, b.canvas) << "request " << index;
  EXPECT_EQ(a.steps, b.steps) << "request " << index;
  EXPECT_EQ(a.forwards, b.forwards) << "request " << index;
  EXPECT_EQ(a.tokens_per_step, b.tokens_per_step) << "request " << index;
  EXPECT_EQ(a.stopped_at_eos, b.stopped_at_eos) << "request " << index;
}

class BatchStepperTest : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    model_ = tiny_model(GetParam());
    runner_ = std::make_unique<CpuStepRunner>(*model_);
    cases_ = GetParam() == Family::dream ? dream_cases() : llada_cases();
  }
  const ModelConfig& config() const { return model_->config(); }
  // Every case as a request. A logits step (top-p / top-k, CFG) makes every request of that step
  // commit on the host; those requests are shortened so that the others go on on the device after them.
  std::vector<GenerationRequest> requests_with_short_logit_steps() const {
    std::vector<GenerationRequest> requests;
    for (const Case& c : cases_) {
      requests.push_back({c.prompt, c.options});
      GenerationOptions& o = requests.back().options;
      if (o.cfg_scale > 0 || o.top_p || o.top_k) o.gen_length = 4, o.steps = 2;
    }
    return requests;
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<CpuStepRunner> runner_;
  std::vector<Case> cases_;
};

TEST_P(BatchStepperTest, LateJoinersAndSharedStepsChangeNoToken) {
  std::vector<GenerationResult> solo;
  for (const Case& c : cases_) solo.push_back(alone(config(), *runner_, c));

  // Request k joins after k steps of the others; each leaves as soon as it finishes.
  BatchStepper stepper(config(), *runner_);
  std::map<int64_t, size_t> case_of;
  std::vector<std::optional<GenerationResult>> batched(cases_.size());
  size_t next = 0;
  int steps = 0;
  while (next < cases_.size() || stepper.size() > 0) {
    if (next < cases_.size() && steps >= static_cast<int>(next)) {
      case_of[stepper.add({cases_[next].prompt, cases_[next].options})] = next;
      ++next;
    }
    stepper.step();
    ++steps;
    for (auto [id, index] : std::map<int64_t, size_t>(case_of)) {
      if (!stepper.finished(id)) continue;
      batched[index] = stepper.result(id);
      stepper.remove(id);
      case_of.erase(id);
    }
  }
  for (size_t i = 0; i < cases_.size(); ++i) {
    ASSERT_TRUE(batched[i].has_value());
    expect_same(*batched[i], solo[i], i);
  }
}

// A cached request holds its pages from add() to its end, and gives them back when it finishes
// or leaves; one the budget cannot hold is refused and leaves the batch as it was.
TEST_P(BatchStepperTest, CachePagesAreHeldToTheEndAndGivenBack) {
  GenerationOptions cached;
  cached.gen_length = 12, cached.steps = 6, cached.block_length = 6, cached.cache = CacheMode::dual;
  BatchStepper stepper(config(), *runner_);
  const int64_t a = stepper.add({{1, 2, 3, 4, 5}, cached});  // 17 positions: 2 pages of 16
  const int64_t b = stepper.add({{1, 2, 3}, cached});        // 15: 1 page
  EXPECT_EQ(runner_->cache_stats().pages_used, 3);
  EXPECT_EQ(runner_->cache_stats().sequences, 2);
  stepper.remove(b);
  EXPECT_EQ(runner_->cache_stats().pages_used, 2);
  while (!stepper.finished(a)) stepper.step();
  EXPECT_EQ(runner_->cache_stats().pages_used, 0);  // finished: nothing held, even before remove
  EXPECT_EQ(runner_->cache_stats().bytes, 0u);

  // A runner whose budget holds one such cache and no more (beside a small arena).
  const uint64_t page_bytes = runner_->cache_stats().page_bytes;
  CpuStepRunner tight(*model_, 2 * page_bytes + page_bytes / 2);
  BatchStepper small(config(), tight);
  const int64_t first = small.add({{1, 2, 3, 4, 5}, cached});
  try {
    small.add({{6, 7, 8, 9, 10}, cached});
    ADD_FAILURE() << "a cache past the budget was reserved";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("KV cache of a sequence of 17 positions needs 2 pages"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(small.size(), 1);
  EXPECT_EQ(tight.cache_stats().pages_used, 2);
  EXPECT_TRUE(small.contains(first));
}

TEST_P(BatchStepperTest, GenerateOfTheWholeBatchEqualsEachAlone) {
  std::vector<GenerationRequest> requests;
  for (const Case& c : cases_) requests.push_back({c.prompt, c.options});
  const std::vector<GenerationResult> together = generate(config(), *runner_, requests);
  for (size_t i = 0; i < cases_.size(); ++i) expect_same(together[i], alone(config(), *runner_, cases_[i]), i);
}

// A request's forward time is the wall time of the runner calls it took part in, and its host
// part the runner's own figure, summed: what bench generate bounds the host's share with.
TEST_P(BatchStepperTest, ForwardTimesSumTheRunnerCallsARequestTookPartIn) {
  SlowRunner slow(*runner_);
  std::vector<GenerationRequest> requests;
  for (const Case& c : cases_) requests.push_back({c.prompt, c.options});
  const auto start = std::chrono::steady_clock::now();
  const std::vector<GenerationResult> results = generate(config(), slow, requests);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_GT(slow.calls, 0);
  for (size_t i = 0; i < results.size(); ++i) {
    const GenerationResult& r = results[i];
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_GT(r.forwards, 0);
    // One runner call per forward of a request: at least the delay each, the reported host time
    // exactly (a step that had no candidates for it took no forward).
    EXPECT_GE(r.forward_seconds, 0.005 * static_cast<double>(r.forwards) * 0.999);
    EXPECT_NEAR(r.forward_host_seconds, 0.001 * static_cast<double>(r.forwards), 1e-9);
    EXPECT_LE(r.forward_seconds, wall);
    EXPECT_LE(r.forwards, slow.calls);
  }
}

TEST_P(BatchStepperTest, StepsNeverExceedTheSummedBounds) {
  RecordingRunner recorder(*runner_);
  BatchStepper stepper(config(), recorder);
  StepBound bound;
  for (const Case& c : cases_) {
    GenerationOptions validated = c.options;
    validate_generation_options(config(), validated);
    bound += step_bound(config(), static_cast<int64_t>(c.prompt.size()), validated, CpuStepRunner::kCpuCachePageRows);
    stepper.add({c.prompt, c.options});
  }
  // A step runs the requests with a cache and those without in two forwards: sum them.
  std::vector<StepBound> steps;
  while (stepper.unfinished() > 0) {
    const size_t before = recorder.shapes.size();
    stepper.step();
    StepBound step;
    for (size_t i = before; i < recorder.shapes.size(); ++i) step += recorder.shapes[i];
    steps.push_back(step);
  }
  ASSERT_FALSE(recorder.shapes.empty());
  bool first_step_reached_bound = false;
  for (const StepBound& shape : steps) {
    EXPECT_LE(shape.tokens, bound.tokens);
    EXPECT_LE(shape.candidates, bound.candidates);
    EXPECT_TRUE(!shape.logits || bound.logits);
    first_step_reached_bound = first_step_reached_bound || shape.tokens == bound.tokens;
  }
  EXPECT_TRUE(first_step_reached_bound) << "the bound on tokens is tight while every request steps";
}

TEST_P(BatchStepperTest, AFailedStepLeavesEveryRequestWhereItWas) {
  RecordingRunner recorder(*runner_);
  recorder.fail_at = 2;
  BatchStepper stepper(config(), recorder);
  for (const Case& c : cases_) stepper.add({c.prompt, c.options});
  int failures = 0;
  while (stepper.unfinished() > 0) {
    try {
      stepper.step();
    } catch (const Error& error) {
      EXPECT_STREQ(error.what(), "planned failure at call 2");
      ++failures;
    }
  }
  EXPECT_EQ(failures, 1);
  for (size_t i = 0; i < cases_.size(); ++i)
    expect_same(stepper.result(static_cast<int64_t>(i)), alone(config(), *runner_, cases_[i]), i);
}

TEST_P(BatchStepperTest, RemovingARequestMidwayLeavesTheOthersAlone) {
  BatchStepper stepper(config(), *runner_);
  for (const Case& c : cases_) stepper.add({c.prompt, c.options});
  stepper.step();
  stepper.step();
  stepper.remove(0);
  EXPECT_FALSE(stepper.contains(0));
  while (stepper.unfinished() > 0) stepper.step();
  for (size_t i = 1; i < cases_.size(); ++i)
    expect_same(stepper.result(static_cast<int64_t>(i)), alone(config(), *runner_, cases_[i]), i);
}

TEST_P(BatchStepperTest, DeviceCommitGivesTheHostCommitsTokens) {
  // Covered and uncovered requests share the steps.
  const std::vector<GenerationRequest> requests = requests_with_short_logit_steps();
  EmulatedDeviceCommitRunner device(*runner_);
  const std::vector<GenerationResult> got = generate(config(), device, requests);
  const std::vector<GenerationResult> expected = generate(config(), *runner_, requests);
  for (size_t i = 0; i < cases_.size(); ++i) expect_same(got[i], expected[i], i);
  EXPECT_GT(device.device_commits, 0);
  EXPECT_GT(device.host_changes, 0) << "host commits change resident canvases";
  EXPECT_TRUE(device.held.empty()) << "every canvas is released";
  EXPECT_EQ(device.released.size(), cases_.size());
}

TEST_P(BatchStepperTest, ResidentCanvasesChangeOnlyByTheirOwnCommits) {
  std::vector<GenerationRequest> requests;
  for (const Case& c : cases_)
    if (device_covered(c.options)) requests.push_back({c.prompt, c.options});
  ASSERT_GE(requests.size(), 2u);
  EmulatedDeviceCommitRunner device(*runner_);
  const std::vector<GenerationResult> got = generate(config(), device, requests);
  const std::vector<GenerationResult> expected = generate(config(), *runner_, requests);
  for (size_t i = 0; i < requests.size(); ++i) expect_same(got[i], expected[i], i);
  EXPECT_GT(device.device_commits, 0);
  EXPECT_EQ(device.host_changes, 0);
  EXPECT_TRUE(device.held.empty());
}

// Pads every step it can for CUDA graph replays (exec/replay_padding.h) and unpads the output,
// as the CUDA runner does, around a CPU runner.
class PaddingRunner final : public StepRunner {
 public:
  PaddingRunner(const ModelConfig& config, StepRunner& inner) : config_(config), inner_(inner) {}
  StepOutput run(const StepInput& input) override {
    const std::optional<PaddedStep> padded = pad_candidates_for_replay(config_, input);
    if (!padded) return inner_.run(input);
    ++padded_steps;
    StepOutput out = inner_.run(padded->input);
    unpad_output(*padded, out);
    return out;
  }
  bool commits_on_device() const override { return inner_.commits_on_device(); }
  void release_canvas(uint64_t canvas_id) override { inner_.release_canvas(canvas_id); }
  uint64_t reserve_cache(int64_t positions) override { return inner_.reserve_cache(positions); }
  void release_cache(uint64_t id) override { inner_.release_cache(id); }
  KvCacheStats cache_stats() const override { return inner_.cache_stats(); }
  int64_t padded_steps = 0;

 private:
  const ModelConfig& config_;
  StepRunner& inner_;
};

TEST_P(BatchStepperTest, StepsPaddedForReplaysChangeNoToken) {
  std::vector<GenerationRequest> requests;
  for (const Case& c : cases_) requests.push_back({c.prompt, c.options});
  PaddingRunner padding(config(), *runner_);
  for (size_t i = 0; i < cases_.size(); ++i)  // alone: every cached and full step of its own
    expect_same(alone(config(), padding, cases_[i]), alone(config(), *runner_, cases_[i]), i);
  const std::vector<GenerationResult> got = generate(config(), padding, requests);
  const std::vector<GenerationResult> expected = generate(config(), *runner_, requests);
  for (size_t i = 0; i < cases_.size(); ++i) expect_same(got[i], expected[i], i);
  EXPECT_GT(padding.padded_steps, 0);
}

// As in the CUDA runner, padding comes before the device commit: sequences that commit on the
// device keep their rows, the others are padded beside them, and each gets its own rows back.
TEST_P(BatchStepperTest, PaddedStepsBesideDeviceCommitsChangeNoToken) {
  const std::vector<GenerationRequest> requests = requests_with_short_logit_steps();
  EmulatedDeviceCommitRunner device(*runner_);
  PaddingRunner padding(config(), device);
  const std::vector<GenerationResult> got = generate(config(), padding, requests);
  const std::vector<GenerationResult> expected = generate(config(), *runner_, requests);
  for (size_t i = 0; i < cases_.size(); ++i) expect_same(got[i], expected[i], i);
  EXPECT_GT(padding.padded_steps, 0);
  EXPECT_GT(device.device_commits, 0);
  EXPECT_TRUE(device.held.empty()) << "every canvas is released";
}

TEST_P(BatchStepperTest, BadRequestsAreRefusedWithoutJoining) {
  BatchStepper stepper(config(), *runner_);
  GenerationOptions bad;
  bad.steps = 0;
  EXPECT_THROW(stepper.add({{1, 2}, bad}), Error);
  EXPECT_THROW(stepper.add({{1, 300}, {}}), Error);  // outside the vocabulary
  EXPECT_EQ(stepper.size(), 0);
  EXPECT_EQ(stepper.step().requests, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, BatchStepperTest, ::testing::Values(Family::llada, Family::dream),
                         [](const auto& info) { return std::string(family_name(info.param)); });

}  // namespace
}  // namespace mosaic
