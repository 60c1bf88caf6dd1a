// BatchSession through the public API: requests that join at any step get what
// Engine::generate gives them alone; admission by plan under a budget; removal and bad input.
#include "mosaic/batch_session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "testing/tiny_model_folder.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

class BatchSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir() = testing_support::write_tiny_llada("mosaic_batch_session_test", 7);
  }
  static void TearDownTestSuite() { fs::remove_all(dir()); }
  static fs::path& dir() {
    static fs::path path;
    return path;
  }

  static GenerationOptions options(uint64_t seed, double temperature = 0) {
    GenerationOptions o;
    o.gen_length = 16, o.steps = 8, o.block_length = 8, o.seed = seed, o.temperature = temperature;
    return o;
  }
  static std::vector<int32_t> prompt(int length, int32_t first) {
    std::vector<int32_t> ids;
    for (int i = 0; i < length; ++i) ids.push_back((first + 13 * i) % 250);
    return ids;
  }
};

TEST_F(BatchSessionTest, RequestsJoiningAtAnyStepGetWhatTheyGetAlone) {
  const auto engine = Engine::open(dir(), {.device = "cpu"});
  struct Case { std::vector<int32_t> prompt; GenerationOptions options; };
  std::vector<Case> cases;
  for (int i = 0; i < 5; ++i) cases.push_back({prompt(3 + 4 * i, 11 * i + 1), options(i, i % 2 ? 0.8 : 0.0)});
  cases[3].options.cfg_scale = 1.0;  // keeps the logits of every request in its steps

  auto session = engine->start_batch();
  std::map<int64_t, size_t> case_of;
  std::vector<GenerateResult> batched(cases.size());
  size_t next = 0;
  for (int step = 0; next < cases.size() || session->size() > 0; ++step) {
    if (next < cases.size() && step % 3 == 0) {
      case_of[session->add(cases[next].prompt, cases[next].options)] = next;
      ++next;
    }
    const BatchStep result = session->step();
    EXPECT_EQ(static_cast<int64_t>(result.events.size()), session->unfinished() +
              static_cast<int64_t>(std::count_if(result.events.begin(), result.events.end(),
                                                 [](const GenerateEvent& e) { return e.finished; })));
    for (const GenerateEvent& event : result.events) {
      if (!event.finished) continue;
      batched[case_of.at(event.request)] = session->remove(event.request);
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const GenerateRequest request{"", false, cases[i].prompt};
    const GenerateResult solo = engine->generate(std::span(&request, 1), cases[i].options).front();
    EXPECT_EQ(batched[i].output_ids, solo.output_ids) << "request " << i;
    EXPECT_EQ(batched[i].tokens_per_step, solo.tokens_per_step) << "request " << i;
    EXPECT_EQ(batched[i].forwards, solo.forwards) << "request " << i;
    EXPECT_EQ(batched[i].prompt_ids, cases[i].prompt);
    EXPECT_FALSE(batched[i].cancelled);
  }
}

TEST_F(BatchSessionTest, AdmissionByPlanUnderABudget) {
  const auto probe = Engine::open(dir(), {.device = "cpu"});
  const uint64_t budget = probe->info().weight_bytes + (uint64_t{1} << 20);
  const auto engine = Engine::open(dir(), {.device = "cpu", .budget = budget});
  const GenerationOptions o = options(1);

  const MemoryFit small = engine->fit(40, o);
  EXPECT_TRUE(small.fits);
  EXPECT_EQ(small.budget, budget);
  EXPECT_GT(small.bytes_needed, engine->info().weight_bytes);
  EXPECT_LE(small.bytes_needed, budget);
  const MemoryFit huge = engine->fit(200000, o);
  EXPECT_FALSE(huge.fits);
  EXPECT_GT(huge.bytes_needed, budget);

  // The session fills up by the plan, not by a count; a request that fits alone waits.
  auto session = engine->start_batch();
  int admitted = 0;
  while (session->fit(40, o).fits) {
    session->add(prompt(40, admitted), o);
    ++admitted;
    ASSERT_LT(admitted, 1000);
  }
  EXPECT_GE(admitted, 2);
  EXPECT_TRUE(engine->fit(40, o).fits);
  while (session->unfinished() > 0) session->step();  // every admitted step fits: no error
  for (int64_t id = 0; id < admitted; ++id) session->remove(id);
  EXPECT_TRUE(session->fit(40, o).fits);  // finished requests leave room
}

TEST_F(BatchSessionTest, RemovingAnUnfinishedRequestCancelsIt) {
  const auto engine = Engine::open(dir(), {.device = "cpu"});
  auto session = engine->start_batch();
  const int64_t a = session->add(prompt(5, 1), options(1));
  const int64_t b = session->add(prompt(6, 2), options(2));
  session->step();
  const GenerateResult cancelled = session->remove(a);
  EXPECT_TRUE(cancelled.cancelled);
  EXPECT_EQ(cancelled.steps, 1);
  EXPECT_EQ(session->size(), 1);
  while (!session->finished(b)) session->step();
  EXPECT_FALSE(session->remove(b).cancelled);
  EXPECT_THROW(session->remove(b), Error);
  EXPECT_THROW(session->finished(a), Error);
}

TEST_F(BatchSessionTest, BadRequestsLeaveTheSessionUnchanged) {
  const auto engine = Engine::open(dir(), {.device = "cpu"});
  auto session = engine->start_batch();
  GenerationOptions bad = options(1);
  bad.block_length = 5;  // does not divide gen_length 16
  EXPECT_THROW(session->add(prompt(4, 1), bad), Error);
  EXPECT_THROW(session->fit(4, bad), Error);
  EXPECT_THROW(engine->resolve_options(bad), Error);
  EXPECT_THROW(session->add({}, options(1)), Error);
  EXPECT_THROW(session->add({1, 2, 999}, options(1)), Error);
  EXPECT_EQ(session->size(), 0);
  EXPECT_EQ(session->step().events.size(), 0u);
}

// A block-causal model (config.json block_attention): its cache is the exact block cache; prefix
// and dual are refused by name; a full-attention forward of it is refused rather than wrong.
TEST_F(BatchSessionTest, BlockCausalModelsUseTheirBlockCache) {
  const fs::path block = dir().string() + "_block";
  fs::create_directories(block);
  for (const auto& entry : fs::directory_iterator(dir())) fs::copy(entry.path(), block / entry.path().filename());
  std::string config;
  {
    std::ifstream in(block / "config.json");
    config.assign(std::istreambuf_iterator<char>(in), {});
  }
  config.insert(config.find('{') + 1, "\"block_attention\": \"prompt\", ");
  std::ofstream(block / "config.json") << config;
  const auto engine = Engine::open(block, {.device = "cpu"});
  EXPECT_EQ(engine->info().attention, "prompt");
  GenerationOptions o = options(3);
  EXPECT_EQ(engine->resolve_options(o).cache, CacheMode::block);
  const GenerateRequest request{.prompt_ids = prompt(5, 1)};
  EXPECT_EQ(engine->generate(std::span(&request, 1), o).front().cache, "block");
  o.cache = CacheMode::dual;
  try {
    engine->resolve_options(o);
    ADD_FAILURE() << "dual on a block-causal model";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("decodes with its exact block cache"), std::string::npos) << error.what();
  }
  const SequenceInput sequence{prompt(6, 2), {1}};
  EXPECT_THROW(engine->forward(std::span(&sequence, 1)), Error);
  fs::remove_all(block);
}

TEST_F(BatchSessionTest, ResolvedOptionsAndTheAnswer) {
  const auto engine = Engine::open(dir(), {.device = "cpu"});
  GenerationOptions o;
  o.gen_length = 8, o.steps = 8;
  const GenerationOptions resolved = engine->resolve_options(o);
  EXPECT_EQ(resolved.block_length, 8);
  EXPECT_EQ(resolved.eos_id, engine->info().eos_token_id);
  const int32_t mask = static_cast<int32_t>(engine->info().mask_token_id);
  const int32_t eos = static_cast<int32_t>(engine->info().eos_token_id);
  const std::vector<int32_t> output = {5, mask, 6, eos, 7};
  EXPECT_EQ(engine->answer_ids(output, resolved), (std::vector<int32_t>{5, 6}));
}

}  // namespace
}  // namespace mosaic
