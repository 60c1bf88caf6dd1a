#include "mosaic/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "model/config_json.h"
#include "model/test_model.h"
#include "plan/step_planner.h"

namespace mosaic {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string error_of(PlanRequest request) {
  try {
    plan_step(request);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// Hand count for LLaDA-8B, bf16, one sequence of L tokens, unchunked: the FFN of a layer holds
// x [L, 4096], the FFN norm output [L, 4096], gate and up [L, 12288] each at the `up` projection,
// plus the int32 positions (read by every RoPE) and logit rows; the ids died after the embedding.
TEST(PlanStep, Llada8BPeakIsTheFfn) {
  const int64_t L = 4096;
  const PlanReport report = plan_step({.model = "llada-8b", .lengths = {L}, .candidates = {L / 2}});
  const uint64_t expected = 2ull * L * (4096 + 4096 + 12288 + 12288) + 4ull * L + 4ull * (L / 2);
  EXPECT_EQ(report.lower_bound, expected);
  EXPECT_EQ(report.activation_peak, report.lower_bound);
  EXPECT_EQ(report.weight_bytes, 2ull * (2 * 126464ull * 4096 + 4096 +
                                         32 * (4 * 4096ull * 4096 + 3 * 4096ull * 12288 + 2 * 4096)));
  EXPECT_THAT(report.peak_op_name, HasSubstr("linear(up)"));
  ASSERT_FALSE(report.live_at_peak.empty());
  EXPECT_EQ(report.live_at_peak[0].category, "ffn");
  EXPECT_EQ(report.timeline.size(), static_cast<size_t>(report.op_count));
  EXPECT_GT(report.par, 1.0);
}

TEST(PlanStep, ChunkingLowersThePeak) {
  PlanRequest request{.model = "dream-7b", .lengths = {8192}, .candidates = {4096}};
  const uint64_t unchunked = plan_step(request).activation_peak;
  request.ffn_chunks = 8;
  request.attention_chunks = 4;
  const uint64_t chunked = plan_step(request).activation_peak;
  EXPECT_LT(chunked * 2, unchunked);
}

TEST(PlanStep, SvgHasOneBandPerLiveCategory) {
  const PlanReport report = plan_step({.model = "llada-8b", .lengths = {512}, .candidates = {256}});
  const std::string svg = plan_timeline_svg(report);
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("planned peak"));
  size_t polygons = 0;
  for (size_t at = svg.find("<polygon"); at != std::string::npos; at = svg.find("<polygon", at + 1)) ++polygons;
  EXPECT_EQ(polygons, 8u);  // input residual norm query kv attention ffn head
}

// A cached step of one 32-token block against 4,096 positions (LLaDA-8B, bf16): its KV cache is
// every position's K and V in every layer, 32 layers x 2 x 4,096 x 4,096 x 2 bytes, resident at
// every op; the lower bound, PAR and the picture count it; a budget leaves the arena what the cache
// does not take.
TEST(PlanStep, CachedStepCountsItsKvCache) {
  PlanRequest request{.model = "llada-8b", .lengths = {4096}, .candidates = {32}, .cached_rows = {32}};
  const PlanReport report = plan_step(request);
  const uint64_t cache = 32ull * 2 * 4096 * 4096 * 2;
  EXPECT_EQ(report.cache_bytes, cache);
  EXPECT_EQ(report.cache_mapped_bytes, cache);  // 8 MiB a page and region: whole granules
  EXPECT_EQ(report.cache_page_rows, 128);
  EXPECT_EQ(report.tokens, 32);
  EXPECT_GT(report.lower_bound, cache);
  EXPECT_LT(report.lower_bound, cache + (uint64_t{8} << 20));  // 32 rows of transients
  EXPECT_NEAR(report.par, 1.0, 0.01);
  EXPECT_EQ(report.total_bytes(), report.weight_bytes + report.workspace_bytes + cache + report.mapped_bytes);
  ASSERT_FALSE(report.live_at_peak.empty());
  EXPECT_EQ(report.live_at_peak[0].category, "kv_cache");
  const std::string svg = plan_timeline_svg(report);
  EXPECT_THAT(svg, HasSubstr("of it KV cache"));
  EXPECT_THAT(svg, HasSubstr(">kv_cache<"));
  // Under a budget the cache takes its share first: 1 MiB short of weights + workspace + cache fails.
  request.budget = report.weight_bytes + report.workspace_bytes + cache - (uint64_t{1} << 20);
  EXPECT_THAT(error_of(request), HasSubstr("KV cache (2.000 GiB) alone exceed"));
  request.budget = report.total_bytes();
  EXPECT_LE(plan_step(request).total_bytes(), *request.budget);
  request.budget.reset();
  request.cached_rows = {5000};
  EXPECT_THAT(error_of(request), HasSubstr("5000 cached rows for 4096 tokens"));
}

TEST(PlanStep, BadRequests) {
  EXPECT_THAT(error_of({.model = "llama-70b", .lengths = {8}, .candidates = {4}}),
              HasSubstr("'llama-70b' is neither a preset"));
  EXPECT_THAT(error_of({.model = "llada-8b", .lengths = {0}, .candidates = {0}}),
              HasSubstr("sequence 0 has length 0"));
  EXPECT_THAT(error_of({.model = "llada-8b", .lengths = {8}, .candidates = {9}}),
              HasSubstr("9 candidate rows for 8 tokens"));
  EXPECT_THAT(error_of({.model = "llada-8b", .lengths = {8}, .candidates = {4}, .activations = "int8"}),
              HasSubstr("activation dtype 'int8'"));
  EXPECT_THAT(error_of({.model = "/nonexistent", .lengths = {8}, .candidates = {4}}),
              HasSubstr("neither a preset"));
}

TEST(PlanStep, BudgetChoosesChunksThatFit) {
  const uint64_t gib = uint64_t{1} << 30;
  PlanRequest request{.model = "llada-8b", .lengths = {262144}, .candidates = {131072}};
  request.budget = 24 * gib;
  const PlanReport report = plan_step(request);
  EXPECT_LE(report.total_bytes(), 24 * gib);
  EXPECT_EQ(report.mapped_bytes % (2u << 20), 0u);
  EXPECT_GT(report.ffn_chunks, 1);  // unchunked, the FFN alone needs 16 GiB
  EXPECT_FALSE(report.chunk_steps.empty());
  // One chunk fewer in any group that was raised no longer fits (lazy: only what is forced).
  for (int64_t PlanRequest::*field : {&PlanRequest::qkv_chunks, &PlanRequest::attention_chunks,
                                      &PlanRequest::ffn_chunks, &PlanRequest::head_chunks}) {
    PlanRequest fewer{.model = "llada-8b", .lengths = {262144}, .candidates = {131072}};
    fewer.qkv_chunks = report.qkv_chunks, fewer.attention_chunks = report.attention_chunks;
    fewer.ffn_chunks = report.ffn_chunks, fewer.head_chunks = report.head_chunks;
    if (fewer.*field == 1) continue;
    fewer.*field -= 1;
    EXPECT_GT(plan_step(fewer).total_bytes(), 24 * gib);
  }
}

// The residual stream in host memory: its bytes leave the device's total and are reported, with
// what its rows move; under 24 GiB with every weight resident, auto places it there at L = 500,000
// (x on the device cannot fit: ImpossibleBudgetSaysWhatIsNeeded).
TEST(PlanStep, ResidualInHostReportsItsBytesAndWhatItMoves) {
  PlanRequest request{.model = "llada-8b", .lengths = {4096}, .candidates = {2048}};
  request.attention_chunks = 2, request.ffn_chunks = 2;
  const PlanReport device = plan_step(request);
  EXPECT_EQ(device.residual_placement, "device");
  request.residual = "host";
  const PlanReport host = plan_step(request);
  EXPECT_EQ(host.residual_placement, "host");
  const uint64_t x = uint64_t{4096} * 4096 * 2;
  EXPECT_EQ(host.host_residual_bytes, x);
  EXPECT_LE(host.activation_peak, device.activation_peak);  // here the peak is elsewhere (the FFN)
  // Per layer but the last: the K/V pass reads every row, the query pass and the FFN read and
  // write them back; the last layer's K/V pass reads them (its other rows are the candidates').
  EXPECT_EQ(host.residual_moved_bytes, x * 5 * 31 + x);
  EXPECT_EQ(host.residual_layer_moved_bytes, x * 5);
  // Written back: the query pass's and the FFN's rows, in every layer but the last.
  EXPECT_EQ(host.residual_written_bytes, x * 2 * 31);
  EXPECT_EQ(host.residual_layer_written_bytes, x * 2);
  EXPECT_NEAR(host.residual_writeback_ms, double(x * 2 * 31) / 54e9 * 1e3, 1e-9);
  EXPECT_GT(host.flops_per_residual_byte, 0);
  PlanRequest at_500k{.model = "llada-8b", .lengths = {500000}, .candidates = {250000}};
  at_500k.budget = uint64_t{24} << 30;
  const PlanReport auto_placed = plan_step(at_500k);
  EXPECT_EQ(auto_placed.residual_placement, "host");
  EXPECT_LE(auto_placed.total_bytes(), *at_500k.budget);
  at_500k.device = "cpu";
  EXPECT_THAT(error_of(at_500k), HasSubstr("needs at least"));  // the CPU keeps x where it is
}

// With the weights and x in host memory the device timeline leaves x out, and the report says
// per op what crosses PCIe: per layer but the last x is read 3 times and written back twice (as
// above), the last layer reads it once, and each layer's weights come in once.
TEST(PlanStep, HostMemoryHasItsOwnPanelAndCopies) {
  PlanRequest request{.model = "llada-8b", .lengths = {4096}, .candidates = {2048}};
  request.attention_chunks = 2, request.ffn_chunks = 2;
  const PlanReport device = plan_step(request);
  EXPECT_TRUE(device.copied_in.empty());
  EXPECT_THAT(plan_timeline_svg(device), Not(HasSubstr("pinned host memory")));
  request.residual = "host", request.weights = "host";
  const PlanReport host = plan_step(request);
  const uint64_t x = uint64_t{4096} * 4096 * 2;
  ASSERT_EQ(host.copied_in.size(), static_cast<size_t>(host.op_count));
  uint64_t in = 0, out = 0;
  for (size_t op = 0; op < host.copied_in.size(); ++op) in += host.copied_in[op], out += host.copied_out[op];
  EXPECT_EQ(out, 2 * x * 31);
  EXPECT_EQ(in, 3 * x * 31 + x + host.host_weight_bytes);
  EXPECT_EQ(host.host_weight_bytes, host.weight_bytes - 2ull * 2 * 126464 * 4096 - 4096 * 2 - 32 * 2 * 4096 * 2);
  // The timeline is the device's: its highest total is the lower bound the planner found, which
  // x in host memory is not part of (counted, it would add 32 MiB at every op).
  const auto highest = [](const PlanReport& r) {
    uint64_t most = 0;
    for (const std::vector<uint64_t>& live : r.timeline) {
      uint64_t total = 0;
      for (const uint64_t bytes : live) total += bytes;
      most = std::max(most, total);
    }
    return most;
  };
  EXPECT_EQ(highest(device), device.lower_bound);
  EXPECT_EQ(highest(host), host.lower_bound);
  const std::string svg = plan_timeline_svg(host);
  EXPECT_THAT(svg, HasSubstr("pinned host memory: 32 layers' weights"));
  EXPECT_THAT(svg, HasSubstr("residual stream 32 MiB"));
  EXPECT_THAT(svg, HasSubstr(">back: 1.94 GiB<"));  // 2 x 31 x 32 MiB = 1,984 MiB
}

TEST(PlanStep, ImpossibleBudgetSaysWhatIsNeeded) {
  // K and V alone (16 KiB a token) exceed what 24 GiB leaves beside the weights, wherever x is.
  PlanRequest request{.model = "llada-8b", .lengths = {700000}, .candidates = {350000}};
  request.budget = uint64_t{24} << 30;
  EXPECT_THAT(error_of(request), HasSubstr("at L = 700000 tokens the step needs at least"));
  EXPECT_THAT(error_of(request), HasSubstr("with every op chunked as far as it goes, the residual stream in host memory"));
  EXPECT_THAT(error_of(request), HasSubstr("the budget is 24.000 GiB"));
  // With x kept on the device, 500,000 tokens cannot fit either.
  request.residual = "device";
  request.lengths = {500000}, request.candidates = {250000};
  EXPECT_THAT(error_of(request), HasSubstr("at L = 500000 tokens the step needs at least"));
  request.residual = "auto";
  request.budget = uint64_t{10} << 30;
  EXPECT_THAT(error_of(request), HasSubstr("the weights (14.930 GiB) and workspace (64.00 MiB) alone exceed"));
}

// L_max is the largest multiple of 1024 that fits as the runners plan it, by its shape bucket
// (plan/step_planner.h): it is its own bucket and fits, and the bucket of 1024 more does not. A
// small Dream-architecture config keeps the search quick.
TEST(FindLmax, IsTheLargestLengthThatFits) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mosaic_lmax_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ModelConfig config = test_model_preset(Family::dream, "tiny");
  config.torch_dtype = "bfloat16";
  std::ofstream(dir / "config.json") << model_config_to_json(config).dump(2);
  PlanRequest request{.model = dir.string()};
  request.budget = uint64_t{120} << 20;  // weights are 5.7 MiB
  const LmaxReport lmax = find_lmax(request);
  ASSERT_GT(lmax.l_max, 0);
  EXPECT_EQ(lmax.l_max % 1024, 0);
  EXPECT_EQ(bucket_rows(lmax.l_max), lmax.l_max);
  EXPECT_LE(lmax.at_l_max.total_bytes(), *request.budget);
  PlanRequest beyond = request;
  const int64_t next = bucket_rows(lmax.l_max + 1024);
  beyond.lengths = {next};
  beyond.candidates = {std::min(bucket_rows(next - next / 2), next)};
  // Either the floor exceeds the budget, or (this config, just past L_max) the floor fits but no
  // chunking packs the tensors into the pages left: the error says which.
  EXPECT_THAT(error_of(beyond),
              AllOf(HasSubstr(fmt::format("at L = {} tokens the step", next)),
                    AnyOf(HasSubstr("needs at least"), HasSubstr("no chunking found packs its tensors"))));
  // Temperature changes no tensor: the same L_max.
  request.temperature = 1.0;
  EXPECT_EQ(find_lmax(request).l_max, lmax.l_max);
  std::filesystem::remove_all(dir);
}

// Streamed weights (graph/weight_staging.h): every layer's product weights in host memory leave
// the embedding, the head and the norms on the device, and two staged layers in the arena.
TEST(StreamedWeights, HostLeavesTheRestOnTheDeviceAndStagesTwoLayers) {
  PlanRequest request{.model = "llada-8b", .lengths = {4096}, .candidates = {2048}};
  const PlanReport resident = plan_step(request);
  request.weights = "host";
  const PlanReport streamed = plan_step(request);
  // Per layer: q, k, v, o (4096 x 4096) and gate, up, down (12288 x 4096), bf16.
  const uint64_t layer = 2ull * (4ull * 4096 * 4096 + 3ull * 12288 * 4096);
  EXPECT_EQ(streamed.streamed_layers, 32);
  EXPECT_EQ(streamed.host_weight_bytes, 32 * layer);
  EXPECT_EQ(streamed.device_weight_bytes, resident.weight_bytes - 32 * layer);
  EXPECT_EQ(streamed.staged_layer_bytes, layer);  // every weight is a multiple of 256 bytes
  EXPECT_EQ(streamed.total_bytes(), streamed.device_weight_bytes + streamed.workspace_bytes + streamed.mapped_bytes);
  EXPECT_GE(streamed.activation_peak, resident.activation_peak + layer);
  EXPECT_LE(streamed.activation_peak, resident.activation_peak + 2 * layer);
  // 2 flops a weight element per row over 2 bytes an element: a flop per byte per row, and the
  // last layer's products run over its 2,048 candidate rows (its K and V over all 4,096).
  EXPECT_GE(streamed.flops_per_streamed_byte, 2048.0);
  EXPECT_LT(streamed.flops_per_streamed_byte, 4096.0);
  EXPECT_EQ(resident.streamed_layers, 0);
  EXPECT_EQ(resident.device_weight_bytes, resident.weight_bytes);
}

// LLaDA-8B at 32k under 8 GiB: its weights alone exceed the budget; "auto" streams the last
// layers that make it fit, fewer under a larger budget, none where everything fits resident.
TEST(StreamedWeights, AutoStreamsTheFewestLayersThatFit) {
  PlanRequest request{.model = "llada-8b", .lengths = {32768}, .candidates = {16384}};
  request.budget = uint64_t{8} << 30;
  EXPECT_THAT(error_of(request), HasSubstr("alone exceed the budget"));
  request.weights = "auto";
  const PlanReport tight = plan_step(request);
  EXPECT_GT(tight.streamed_layers, 0);
  EXPECT_LT(tight.streamed_layers, 32);
  EXPECT_LE(tight.total_bytes(), *request.budget);
  request.budget = uint64_t{12} << 30;
  const PlanReport wider = plan_step(request);
  EXPECT_GT(wider.streamed_layers, 0);
  EXPECT_LT(wider.streamed_layers, tight.streamed_layers);
  EXPECT_LE(wider.total_bytes(), *request.budget);
  request.budget = uint64_t{40} << 30;
  EXPECT_EQ(plan_step(request).streamed_layers, 0);
  request.weights = "sideways";
  EXPECT_THAT(error_of(request), HasSubstr("weights 'sideways' is not a placement (expected device, host or auto)"));
  request.weights = "auto";
  request.budget.reset();
  EXPECT_THAT(error_of(request), HasSubstr("--weights auto chooses what to stream under a budget"));
}

// Just above the floor at 32k every weight fits resident, but only with chunks far too small to
// fill the GPU (over 100 query chunks); "auto" streams the layers that buy chunks of at least
// 8,192 rows instead: their copies hide under compute at that length.
TEST(StreamedWeights, AutoStreamsRatherThanCuttingTheStepSmall) {
  PlanRequest request{.model = "llada-8b", .lengths = {32768}, .candidates = {16384}};
  request.budget = uint64_t{31} << 29;  // 15.5 GiB
  const PlanReport resident = plan_step(request);
  EXPECT_EQ(resident.streamed_layers, 0);
  EXPECT_GT(std::max({resident.qkv_chunks, resident.attention_chunks, resident.ffn_chunks}), 100);
  request.weights = "auto";
  const PlanReport streamed = plan_step(request);
  EXPECT_GE(streamed.streamed_layers, 3);  // 1 or 2 free nothing: each stages as much as it frees
  EXPECT_LE(std::max({streamed.qkv_chunks, streamed.attention_chunks, streamed.ffn_chunks}), 4);
  EXPECT_LE(streamed.total_bytes(), *request.budget);
  EXPECT_EQ(streamed.residual_placement, "device");
}

// The predicted copy and compute times per layer at the request's rates: a layer's 436 MB at
// 54 GB/s take 8.07 ms; at 32k its compute (>= 39,000 flops a staged byte at 650 TFLOP/s) takes
// longer, at 2k tokens far less, so the copies hide at one length and not at the other.
TEST(StreamedWeights, PredictsWhetherACopyHidesUnderCompute) {
  PlanRequest request{.model = "llada-8b", .lengths = {32768}, .candidates = {16384}};
  request.weights = "host";
  const PlanReport long_step = plan_step(request);
  EXPECT_NEAR(long_step.weight_copy_ms, double(long_step.staged_layer_bytes) / 54e9 * 1e3, 1e-9);
  EXPECT_NEAR(long_step.weight_copy_ms, 8.07, 0.05);
  EXPECT_GT(long_step.weight_compute_ms, long_step.weight_copy_ms);
  request.lengths = {2048}, request.candidates = {1024};
  const PlanReport short_step = plan_step(request);
  EXPECT_LT(short_step.weight_compute_ms, short_step.weight_copy_ms);
  request.link_bytes_per_second = 540e9;  // ten times the link: the copy takes a tenth
  EXPECT_NEAR(plan_step(request).weight_copy_ms, short_step.weight_copy_ms / 10, 1e-9);
  request.compute_flops_per_second = 0;
  EXPECT_THAT(error_of(request), HasSubstr("the link bandwidth and the compute rate must be > 0"));
}

TEST(StreamedWeights, LmaxGrowsWithTheWeightsInHostMemory) {
  PlanRequest request{.model = "llada-8b"};
  request.budget = uint64_t{24} << 30;
  const LmaxReport resident = find_lmax(request);
  request.weights = "host";
  const LmaxReport streamed = find_lmax(request);
  EXPECT_GT(streamed.l_max, resident.l_max * 2);
  EXPECT_LE(streamed.at_l_max.total_bytes(), *request.budget);
  EXPECT_EQ(streamed.at_l_max.streamed_layers, 32);
}

}  // namespace
}  // namespace mosaic

namespace mosaic {
namespace {

// One rank of tensor parallelism, counted by hand for LLaDA-8B over 8 ranks at L = 4096: the
// shard's weights (an eighth of q, k, v, o, gate, up and down, an eighth of the vocabulary's
// embedding and head rows, the norms whole), the FFN peak with an eighth of gate and
// up beside x, its norm and the down projection's partial, and the collectives' bytes.
TEST(PlanStepTensorParallel, OneRanksWeightsActivationsAndCollectives) {
  const int64_t L = 4096, M = L / 2, H = 4096, F = 12288, V = 126464, layers = 32;
  PlanRequest request{.model = "llada-8b", .lengths = {L}, .candidates = {M}};
  request.tensor_parallel = 8;
  const PlanReport r = plan_step(request);
  EXPECT_EQ(r.tensor_parallel, 8);
  const uint64_t layer = 2ull * (4 * H * H / 8 + 3 * F * H / 8 + 2 * H);
  EXPECT_EQ(r.weight_bytes, layers * layer + 2ull * (2 * V / 8 * H + H));
  // The FFN's up projection: x, the norm output and an eighth of gate and up; the partial of the
  // down projection follows the up's death (the planner reuses it).
  EXPECT_EQ(r.lower_bound, 2ull * L * (H + H + F / 8 + F / 8) + 4ull * L + 4ull * M);
  // The embedding's rows, then every layer's output and down projections over L rows, the last
  // layer's over the candidates only.
  EXPECT_EQ(r.all_reduces, 1 + 2 * layers);
  EXPECT_EQ(r.all_reduce_bytes, 2ull * H * (L + 2 * (layers - 1) * L + 2 * M));
  EXPECT_EQ(r.largest_all_reduce_bytes, 2ull * H * L);
  EXPECT_EQ(r.head_gather_bytes, 4ull * M * 9);
  // 2 (R - 1) / R of the reduced bytes at the bus bandwidth, plus the other ranks' summaries.
  const double expected_ms = (2.0 * 7 / 8 * double(r.all_reduce_bytes) + 7.0 * double(r.head_gather_bytes)) / 360e9 * 1e3;
  EXPECT_NEAR(r.collective_ms, expected_ms, 1e-9);
  // The rank's decoder-layer flops by hand: an eighth of every product and head; the last layer's
  // queries, output and FFN over the candidates only.
  const double l = double(L), m = double(M), h = double(H), f = double(F);
  const double full_layer = 2 * l * (4 * h * h + 3 * f * h) / 8 + 4 * l * l * h / 8;
  const double last_layer = 2 * l * 2 * h * h / 8 + 2 * m * (2 * h * h + 3 * f * h) / 8 + 4 * m * l * h / 8;
  EXPECT_NEAR(r.rank_compute_ms, ((layers - 1) * full_layer + last_layer) / 650e12 * 1e3, 1e-6);
  const PlanReport one = plan_step({.model = "llada-8b", .lengths = {L}, .candidates = {M}});
  EXPECT_LT(r.activation_peak, one.activation_peak);
}

TEST(PlanStepTensorParallel, RefusesWhatDoesNotSplitAndFitsARanksBudget) {
  PlanRequest request{.model = "dream-7b", .lengths = {4096}, .candidates = {2048}};
  request.tensor_parallel = 8;
  EXPECT_THAT(error_of(request), HasSubstr("28 attention heads do not divide into 8"));
  // A budget below one device's weights, above one rank's: the rank's plan fits it.
  PlanRequest llada{.model = "llada-8b", .lengths = {32768}, .candidates = {16384}};
  llada.budget = uint64_t{8} << 30;
  EXPECT_THAT(error_of(llada), HasSubstr("exceed the budget"));
  llada.tensor_parallel = 4;
  const PlanReport r = plan_step(llada);
  EXPECT_LE(r.total_bytes(), *llada.budget);
  EXPECT_EQ(r.tensor_parallel, 4);
}

}  // namespace
}  // namespace mosaic

namespace mosaic {
namespace {

// The busiest context-parallel rank of LLaDA-8B at L = 32,768 over 8 ranks, by hand: it holds
// 4,096 rows, all of them candidates (the generation's half lies on ranks 4 to 7), and gathers a
// layer's K and V over all 32,768 rows.
TEST(PlanStepContextParallel, TheBusiestRanksRowsAndGathers) {
  const int64_t L = 32768, S = L / 8, H = 4096, layers = 32;
  PlanRequest request{.model = "llada-8b", .lengths = {L}, .candidates = {L / 2}};
  request.context_parallel = 8;
  const PlanReport r = plan_step(request);
  EXPECT_EQ(r.context_parallel, 8);
  EXPECT_EQ(r.context_rank, 4);
  EXPECT_EQ(r.tokens, S);
  EXPECT_EQ(r.candidates, S);
  EXPECT_EQ(r.context_tokens, L);
  EXPECT_EQ(r.all_gathers, 2 * layers);
  EXPECT_EQ(r.all_gather_bytes, 2ull * layers * L * H * 2);
  EXPECT_NEAR(r.collective_ms, 7.0 / 8 * double(r.all_gather_bytes) / 360e9 * 1e3, 1e-9);
  // Every rank holds the whole model.
  const PlanReport one = plan_step({.model = "llada-8b", .lengths = {L}, .candidates = {L / 2}});
  EXPECT_EQ(r.weight_bytes, one.weight_bytes);
  EXPECT_LT(r.activation_peak, one.activation_peak);
}

TEST(PlanStepContextParallel, RefusesTheCachedStep) {
  PlanRequest request{.model = "llada-8b", .lengths = {4096}, .candidates = {32}, .cached_rows = {32}};
  request.context_parallel = 2;
  EXPECT_THAT(error_of(request), HasSubstr("a cached step is not supported yet"));
}

}  // namespace
}  // namespace mosaic
