#include "mosaic/plan.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <utility>

#include "chunk/chunk_search.h"
#include "core/error.h"
#include "core/format_bytes.h"
#include "exec/step_runner.h"
#include "graph/context_parallel.h"
#include "graph/step_graph.h"
#include "graph/weight_staging.h"
#include "model/tensor_parallel.h"
#include "model/lora_adapter.h"
#include "model/lora_merge.h"
#include "model/test_model.h"
#include "model/weight_names.h"
#include "plan/step_planner.h"

namespace mosaic {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string gib(uint64_t bytes) { return format_bytes(bytes); }

ModelConfig config_for(const std::string& model) {
  if (model == "llada-8b") return test_model_preset(Family::llada, "llada-8b");
  if (model == "dream-7b") return test_model_preset(Family::dream, "dream-7b");
  if (model == "llada-moe-7b") return test_model_preset(Family::llada_moe, "llada-moe-7b");
  if (model == "llada2-mini" || model == "llada2-flash") return test_model_preset(Family::llada2, model);
  if (model.empty())
    fail("no model given (a preset: llada-8b, dream-7b, llada-moe-7b, llada2-mini, llada2-flash; or a model folder)");
  if (!std::filesystem::is_directory(model))
    fail("'{}' is neither a preset (llada-8b, dream-7b, llada-moe-7b, llada2-mini, llada2-flash) nor a model folder",
         model);
  return load_model_config(model);
}

// Everything a request implies before any shape is planned.
struct Setup {
  ModelConfig config;
  ModelConfig rank_config;  // what one tensor-parallel rank computes (config itself for one rank)
  GraphOptions options;
  PlannerKind planner = PlannerKind::best;
  uint64_t workspace = 0, granule = 1;
  int64_t cache_page_rows = 16;  // the runners' KV cache pages (exec/step_runner.h)
  uint64_t cache_granule = 1;    // the unit each of the cache's 2 x layers regions maps
  DType weight_dtype = DType::bf16;
  uint64_t weight_bytes = 0;
  int64_t adapter_projections = 0, adapter_rank = 0;
  uint64_t adapter_extra_bytes = 0;
  // Per decoder layer, the bytes of its product weights (what streaming moves to host memory),
  // and of those the layers options.streamed_layers streams.
  std::vector<uint64_t> layer_product_bytes;
  uint64_t streamed_bytes = 0;
  ResidualPlacement residual = ResidualPlacement::device;

  uint64_t device_weight_bytes() const { return weight_bytes - streamed_bytes; }
  // Streams the last `count` layers' product weights (0: every weight resident).
  void stream_last_layers(int64_t count) {
    options.streamed_layers = last_layers(config, count);
    streamed_bytes = 0;
    for (const int32_t l : options.streamed_layers) streamed_bytes += layer_product_bytes[static_cast<size_t>(l)];
  }
};

Setup setup_for(const PlanRequest& request) {
  Setup s;
  s.config = config_for(request.model);
  std::string activations = request.activations;
  if (request.device == "cuda") {
    s.workspace = kCudaWorkspaceReserveBytes;
    s.granule = uint64_t{2} << 20;
    s.cache_page_rows = 128, s.cache_granule = s.granule;
    if (activations.empty()) activations = "bf16";
  } else if (request.device == "cpu") {
    s.granule = uint64_t{64} << 10;
    if (activations.empty()) activations = "fp32";
  } else {
    fail("device '{}' is not supported (expected cuda or cpu)", request.device);
  }
  const auto dtype = dtype_from_user(activations);
  if (!dtype || (*dtype != DType::bf16 && *dtype != DType::f32))
    fail("activation dtype '{}' is not supported (expected bf16 or fp32)", activations);
  s.options.activations = *dtype;
  if (request.head == "stats") s.options.head = HeadMode::stats;
  else if (request.head == "logits") s.options.head = HeadMode::logits;
  else fail("head '{}' is not supported (expected stats or logits)", request.head);
  if (request.planner == "best") s.planner = PlannerKind::best;
  else if (request.planner == "greedy-by-area") s.planner = PlannerKind::greedy_by_area;
  else if (request.planner == "greedy-by-size") s.planner = PlannerKind::greedy_by_size;
  else if (request.planner == "first-fit") s.planner = PlannerKind::first_fit;
  else fail("planner '{}' is not supported (expected best, greedy-by-area, greedy-by-size or first-fit)",
            request.planner);
  if (!(request.temperature >= 0)) fail("temperature must be >= 0, got {}", request.temperature);
  if (!(request.link_bytes_per_second > 0) || !(request.compute_flops_per_second > 0))
    fail("the link bandwidth and the compute rate must be > 0 (got {} GB/s and {} TFLOP/s)",
         request.link_bytes_per_second / 1e9, request.compute_flops_per_second / 1e12);
  if (s.config.torch_dtype == "float32") s.weight_dtype = DType::f32;
  else if (s.config.torch_dtype == "float16") s.weight_dtype = DType::f16;
  if (request.tensor_parallel < 1) fail("--tensor-parallel {}: the rank count must be at least 1", request.tensor_parallel);
  if (!(request.collective_bytes_per_second > 0))
    fail("the collective bandwidth must be > 0 (got {} GB/s)", request.collective_bytes_per_second / 1e9);
  s.options.tensor_parallel = request.tensor_parallel;
  if (request.context_parallel < 1)
    fail("--context-parallel {}: the rank count must be at least 1", request.context_parallel);
  s.options.context_parallel = request.context_parallel;
  // One rank's weights: its shard's tensors (model/tensor_parallel.h; the norms whole on each).
  s.rank_config = request.tensor_parallel == 1 ? s.config : tensor_parallel_config(s.config, request.tensor_parallel);
  const std::vector<WeightSpec> specs = family_weight_specs(s.rank_config);
  s.layer_product_bytes.assign(static_cast<size_t>(s.config.layers), 0);
  for (const WeightSpec& spec : specs) {
    uint64_t bytes = dtype_size(s.weight_dtype);
    for (int64_t extent : spec.shape) bytes *= static_cast<uint64_t>(extent);
    s.weight_bytes += bytes;
    if (spec.layer >= 0 && is_product_weight(spec.role)) s.layer_product_bytes[static_cast<size_t>(spec.layer)] += bytes;
  }
  // Staged as the device holds them: bf16 on CUDA, as stored on the CPU.
  s.options.staged_weight_bytes = request.device == "cuda" ? 2 : dtype_size(s.weight_dtype);
  if (request.weights == "host") s.stream_last_layers(s.config.layers);
  else if (request.weights == "auto" && !request.budget) fail("--weights auto chooses what to stream under a budget: give --budget");
  else if (request.weights != "device" && request.weights != "auto")
    fail("weights '{}' is not a placement (expected device, host or auto)", request.weights);
  if (request.residual == "host") s.residual = ResidualPlacement::host;
  else if (request.residual == "auto") s.residual = request.device == "cuda" ? ResidualPlacement::fit : ResidualPlacement::device;
  else if (request.residual != "device")
    fail("residual '{}' is not a placement (expected device, host or auto)", request.residual);
  for (const auto& [flag, ranks] : {std::pair{"tensor", request.tensor_parallel},
                                     std::pair{"context", request.context_parallel}}) {
    if (ranks == 1) continue;  // a rank's x stays on its device (graph/tensor_parallel.h, context_parallel.h)
    if (s.residual == ResidualPlacement::host)
      fail("--residual host with --{}-parallel {}: a rank's residual stream stays on its device (expected "
           "--residual auto or device)", flag, ranks);
    s.residual = ResidualPlacement::device;
  }
  if (s.residual == ResidualPlacement::host && request.device != "cuda")
    fail("--residual host keeps the residual stream in host memory beside the device's: the CPU has one memory "
         "(expected --device cuda)");
  if (!request.adapter.empty()) {
    const LoraAdapter adapter = LoraAdapter::open(request.adapter);
    const std::vector<LoraTarget> targets =
        bind_lora(adapter, specs, family_name(s.config.family), s.config.tied_embeddings);
    s.adapter_projections = static_cast<int64_t>(targets.size());
    s.adapter_rank = adapter.config().rank;
    if (request.device == "cpu") {  // each merged projection: an fp32 copy instead of the base tensor
      for (const LoraTarget& target : targets) {
        uint64_t elements = 1;
        for (int64_t extent : target.base->shape) elements *= static_cast<uint64_t>(extent);
        s.adapter_extra_bytes += elements * (sizeof(float) - dtype_size(s.weight_dtype));
      }
      // A rank merges its share of each projection (they split evenly: tensor_parallel_config).
      s.adapter_extra_bytes /= static_cast<uint64_t>(request.tensor_parallel);
      s.weight_bytes += s.adapter_extra_bytes;
    }
  }
  return s;
}

std::string op_name(const Graph& graph, const GraphOp& op) {
  std::string name = op.layer >= 0 ? fmt::format("layer{}.", op.layer) : std::string();
  name += op_kind_name(op.kind);
  if (op.kind == OpKind::linear || op.kind == OpKind::rms_norm || op.kind == OpKind::expert_linear ||
      op.kind == OpKind::head_norm)
    name += fmt::format("({})", weight_role_name(op.weight));
  else if (op.kind == OpKind::rope)
    name += fmt::format("({})", graph.tensor_name(op.out.tensor));
  const GraphTensor& out = graph.tensors[static_cast<size_t>(op.out.tensor)];
  if (out.chunk >= 0) name += fmt::format("[{}]", out.chunk);
  return name;
}

// What the KV cache maps for `pages` pages, as the runners map it (each of its 2 x layers regions
// in whole granules: kv_cache_bytes).
uint64_t cache_mapped(const Setup& s, int64_t pages) {
  StepMemorySetup cache;
  cache.cache_page_rows = s.cache_page_rows;
  cache.cache_page_bytes = static_cast<uint64_t>(2 * s.config.layers * s.cache_page_rows * s.config.kv_dim()) *
                           dtype_size(s.options.activations);
  cache.cache_region_granule = s.cache_granule;
  return kv_cache_bytes(cache, s.config.layers, pages);
}

// Activation bytes left once weights, workspace and a KV cache of `cache` bytes are set aside;
// fails when there are none.
uint64_t activation_budget(const Setup& s, uint64_t budget, uint64_t cache = 0) {
  const uint64_t weights = s.device_weight_bytes();
  const std::string what = s.streamed_bytes > 0 ? "weights left on the device" : "weights";
  if (weights + s.workspace + cache >= budget) {
    if (cache == 0)
      fail("the {} ({}) and workspace ({}) alone exceed the budget of {}", what, gib(weights), gib(s.workspace),
           gib(budget));
    fail("the {} ({}), workspace ({}) and KV cache ({}) alone exceed the budget of {}", what, gib(weights),
         gib(s.workspace), gib(cache), gib(budget));
  }
  return budget - weights - s.workspace - cache;
}

ChunkSearchResult search(const Setup& s, const StepShape& shape, uint64_t budget, uint64_t cache = 0) {
  ChunkSearchRequest request;
  request.shape = shape;
  request.options = s.options;
  request.activation_budget = activation_budget(s, budget, cache);
  request.granule = s.granule;
  request.residual = s.residual;
  return search_chunks(s.config, request);
}

// The step's flops in one layer: its products (2 m n k) and attention (4 q k d per head, over
// the segments' full key ranges).
double layer_flops(const Graph& graph, int32_t layer) {
  double flops = 0;
  for (const GraphOp& op : graph.ops) {
    if (op.layer != layer) continue;
    const double n = static_cast<double>(graph.tensors[static_cast<size_t>(op.out.tensor)].cols);
    if (op.kind == OpKind::linear || op.kind == OpKind::expert_linear) {
      const double k = static_cast<double>(graph.tensors[static_cast<size_t>(op.a.tensor)].cols);
      flops += 2.0 * static_cast<double>(op.rows) * n * k;
    } else if (op.kind == OpKind::attention) {
      // Every head the graph's queries hold (one rank's under tensor parallelism).
      const double q_width = static_cast<double>(graph.tensors[static_cast<size_t>(op.a.tensor)].cols);
      for (int32_t i = op.segment_begin; i < op.segment_begin + op.segment_count; ++i) {
        const AttentionSegment& segment = graph.segments[static_cast<size_t>(i)];
        flops += 4.0 * static_cast<double>(segment.q_count) * static_cast<double>(segment.kv_count) * q_width;
      }
    }
  }
  return flops;
}

// The bytes an op copies between the memories: a streamed layer's weights or x's rows in, the
// rows a visit wrote back out; zero for every other op.
struct OpCopy {
  uint64_t in = 0, out = 0;
};

OpCopy op_copy(const Graph& graph, const GraphOp& op) {
  const auto rows_of = [&](TensorRef ref) {
    return static_cast<uint64_t>(op.rows) * graph.tensors[static_cast<size_t>(ref.tensor)].row_bytes();
  };
  if (op.kind == OpKind::stage_weights) return {graph.tensors[static_cast<size_t>(op.out.tensor)].bytes(), 0};
  if (op.kind == OpKind::stage_rows) return {rows_of(op.out), 0};
  if (op.kind == OpKind::unstage_rows) return {0, rows_of(op.a)};
  return {};
}

// Tensor parallelism's collectives in one rank's step, and their predicted time against the
// rank's compute.
void report_collectives(const Graph& graph, const ModelConfig& config, const PlanRequest& request,
                        PlanReport& report) {
  report.tensor_parallel = graph.tensor_parallel;
  report.context_parallel = graph.context_parallel;
  if (graph.tensor_parallel == 1 && graph.context_parallel == 1) return;
  const double ranks = static_cast<double>(graph.tensor_parallel * graph.context_parallel);
  for (const GraphOp& op : graph.ops) {
    if (op.kind == OpKind::all_gather_rows) {
      ++report.all_gathers;
      report.all_gather_bytes += graph.tensors[static_cast<size_t>(op.out.tensor)].bytes();
      continue;
    }
    const uint64_t bytes = static_cast<uint64_t>(op.rows) * graph.tensors[static_cast<size_t>(op.out.tensor)].row_bytes();
    if (op.kind == OpKind::all_reduce) {
      ++report.all_reduces;
      report.all_reduce_bytes += bytes;
      report.largest_all_reduce_bytes = std::max(report.largest_all_reduce_bytes, bytes);
    } else if (op.kind == OpKind::combine_head_stats) {
      report.head_gather_bytes += static_cast<uint64_t>(op.rows) * graph.tensors[static_cast<size_t>(op.a.tensor)].row_bytes();
    }
  }
  double flops = 0;
  for (int32_t l = 0; l < static_cast<int32_t>(config.layers); ++l) flops += layer_flops(graph, l);
  report.collective_bytes_per_second = request.collective_bytes_per_second;
  // A ring all-reduce moves 2 (R - 1) / R of its bytes through each rank's link; an all-gather
  // (R - 1) / R of the gathered bytes.
  report.collective_ms = (2 * (ranks - 1) / ranks * double(report.all_reduce_bytes) +
                          (ranks - 1) * double(report.head_gather_bytes) +
                          (ranks - 1) / ranks * double(report.all_gather_bytes)) /
                         request.collective_bytes_per_second * 1e3;
  report.rank_compute_ms = flops / request.compute_flops_per_second * 1e3;
}

PlanReport report_for(const PlanRequest& request, const Setup& s, const PlannedStep& step,
                      double planning_ms) {
  const Graph& graph = step.graph;
  PlanReport report;
  report.model = request.model;
  report.family = std::string(family_name(s.config.family));
  report.layers = s.config.layers, report.hidden = s.config.hidden, report.vocab = s.config.vocab;
  report.weight_dtype = std::string(dtype_name(s.weight_dtype));
  report.weight_bytes = s.weight_bytes;
  report.adapter = request.adapter;
  report.adapter_projections = s.adapter_projections, report.adapter_rank = s.adapter_rank;
  report.adapter_merged_extra_bytes = s.adapter_extra_bytes;
  report.workspace_bytes = s.workspace;
  report.granule = s.granule;
  report.weights_placement = request.weights;
  report.streamed_layers = static_cast<int64_t>(s.options.streamed_layers.size());
  report.device_weight_bytes = s.device_weight_bytes(), report.host_weight_bytes = s.streamed_bytes;
  const std::vector<StagedLayer> layouts = s.options.streamed_layers.empty()
                                               ? std::vector<StagedLayer>()
                                               : staged_layers(s.rank_config, s.options.staged_weight_bytes);
  for (const int32_t layer : s.options.streamed_layers) {
    const uint64_t staged = layouts[static_cast<size_t>(layer)].bytes;
    report.staged_layer_bytes = std::max(report.staged_layer_bytes, staged);
    const double per_byte = layer_flops(graph, layer) / static_cast<double>(staged);
    if (report.flops_per_streamed_byte == 0 || per_byte < report.flops_per_streamed_byte)
      report.flops_per_streamed_byte = per_byte;
  }
  if (graph.chunks.residual_in_host) {
    report.residual_placement = "host";
    report.host_residual_bytes = graph.host_bytes();
    std::map<int32_t, uint64_t> moved, written;  // per layer: both ways, and written back
    for (const GraphOp& op : graph.ops) {
      if (op.kind != OpKind::stage_rows && op.kind != OpKind::unstage_rows) continue;
      const int32_t layer =
          graph.tensors[static_cast<size_t>(op.kind == OpKind::stage_rows ? op.out.tensor : op.a.tensor)].layer;
      const OpCopy copy = op_copy(graph, op);
      report.residual_moved_bytes += copy.in + copy.out;
      moved[layer] += copy.in + copy.out;
      report.residual_written_bytes += copy.out, written[layer] += copy.out;
    }
    for (const auto& [layer, bytes] : written)
      report.residual_layer_written_bytes = std::max(report.residual_layer_written_bytes, bytes);
    for (const auto& [layer, bytes] : moved) {
      report.residual_layer_moved_bytes = std::max(report.residual_layer_moved_bytes, bytes);
      if (layer < 0 || bytes == 0) continue;
      const double per_byte = layer_flops(graph, layer) / static_cast<double>(bytes);
      if (report.flops_per_residual_byte == 0 || per_byte < report.flops_per_residual_byte)
        report.flops_per_residual_byte = per_byte;
    }
  }
  report.link_bytes_per_second = request.link_bytes_per_second;
  report.compute_flops_per_second = request.compute_flops_per_second;
  const auto ms = [](double amount, double rate) { return amount / rate * 1e3; };
  if (report.staged_layer_bytes > 0) {
    report.weight_copy_ms = ms(double(report.staged_layer_bytes), request.link_bytes_per_second);
    report.weight_compute_ms =
        ms(report.flops_per_streamed_byte * double(report.staged_layer_bytes), request.compute_flops_per_second);
  }
  if (report.residual_layer_moved_bytes > 0) {
    report.residual_copy_ms = ms(double(report.residual_layer_moved_bytes), request.link_bytes_per_second);
    report.residual_compute_ms = ms(report.flops_per_residual_byte * double(report.residual_layer_moved_bytes),
                                    request.compute_flops_per_second);
    report.residual_writeback_ms = ms(double(report.residual_written_bytes), request.link_bytes_per_second);
  }
  report_collectives(graph, s.config, request, report);
  report.tokens = graph.tokens, report.candidates = graph.candidates;
  report.activation_peak = step.memory.planned_peak;
  report.mapped_bytes = (step.memory.planned_peak + s.granule - 1) / s.granule * s.granule;
  // The figures of everything the step touches: the cache's pages are live at every op.
  const StepMemory memory = with_resident(step.memory, graph.resident_bytes());
  report.cache_bytes = memory.resident;
  report.cache_mapped_bytes = cache_mapped(s, static_cast<int64_t>(graph.kv_pages.size()));
  report.cache_page_rows = graph.cached() ? graph.kv_page_rows : 0;
  report.lower_bound = memory.lower_bound;
  report.average_live = memory.average_live;
  report.par = memory.par(), report.inflation = memory.inflation();
  report.tensor_count = static_cast<int64_t>(graph.tensors.size());
  report.op_count = graph.op_count();
  report.planning_ms = planning_ms;
  report.peak_op = step.memory.peak_op;
  report.peak_op_name = op_name(graph, graph.ops[static_cast<size_t>(step.memory.peak_op)]);
  report.qkv_chunks = graph.chunks.qkv, report.attention_chunks = graph.chunks.attention;
  report.ffn_chunks = graph.chunks.ffn, report.head_chunks = graph.chunks.head;
  report.last_layer_all_rows = graph.chunks.last_layer_all_rows;
  report.budget = request.budget;

  // Live bytes per op and category (difference arrays per category), and the peak's content.
  const size_t categories = static_cast<size_t>(TensorCategory::count);
  for (size_t k = 0; k < categories; ++k)
    report.categories.emplace_back(category_name(static_cast<TensorCategory>(k)));
  std::vector<std::vector<int64_t>> delta(graph.ops.size() + 1, std::vector<int64_t>(categories, 0));
  std::vector<uint64_t> at_peak(categories, 0);
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    const GraphTensor& tensor = graph.tensors[t];
    if (tensor.host) continue;  // in pinned host memory: not the device's (host_residual_bytes)
    const size_t k = static_cast<size_t>(tensor.category);
    // A resident tensor (the KV cache) is live from before the step to after it.
    const int32_t first = tensor.resident ? 0 : tensor.first_op;
    const int32_t last = tensor.resident ? graph.op_count() - 1 : tensor.last_op;
    delta[first][k] += static_cast<int64_t>(tensor.bytes());
    delta[last + 1][k] -= static_cast<int64_t>(tensor.bytes());
    if (first <= report.peak_op && report.peak_op <= last) {
      at_peak[k] += tensor.bytes();
      report.largest_at_peak.push_back({graph.tensor_name(static_cast<int32_t>(t)),
                                        report.categories[k], tensor.bytes()});
    }
  }
  std::vector<int64_t> running(categories, 0);
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    std::vector<uint64_t> live(categories);
    for (size_t k = 0; k < categories; ++k) live[k] = static_cast<uint64_t>(running[k] += delta[op][k]);
    report.timeline.push_back(std::move(live));
    report.op_names.push_back(op_name(graph, graph.ops[op]));
  }
  // What each op copies between the memories: a streamed layer's weights and x's rows in, the
  // rows a visit wrote back out (both on the copy engines, beside the compute).
  if (s.streamed_bytes > 0 || graph.chunks.residual_in_host) {
    report.copied_in.assign(graph.ops.size(), 0), report.copied_out.assign(graph.ops.size(), 0);
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      const OpCopy copy = op_copy(graph, graph.ops[op]);
      report.copied_in[op] = copy.in, report.copied_out[op] = copy.out;
    }
  }
  for (size_t k = 0; k < categories; ++k)
    if (at_peak[k] > 0) report.live_at_peak.push_back({report.categories[k], at_peak[k]});
  std::sort(report.live_at_peak.begin(), report.live_at_peak.end(),
            [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  std::stable_sort(report.largest_at_peak.begin(), report.largest_at_peak.end(),
                   [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  if (report.largest_at_peak.size() > 8) report.largest_at_peak.resize(8);
  return report;
}


// The step's shape: the full step, or with cached rows the cached step of the last rows of each
// sequence against a KV cache holding it all (the pages numbered in order, sequence after sequence).
// Under context parallelism (graph/context_parallel.h), the shape of the rank that holds the most
// candidates, each sequence's taken as its last rows; its rank goes into s.options.
StepShape context_rank_shape(StepShape shape, Setup& s) {
  const int64_t ranks = s.options.context_parallel;
  if (ranks == 1) return shape;
  if (shape.is_cached()) fail("--context-parallel {}: a cached step is not supported yet", ranks);
  const int64_t rows = context_parallel_rows(shape.tokens(), ranks);
  std::vector<std::vector<int64_t>> counts(static_cast<size_t>(ranks), std::vector<int64_t>(shape.lengths.size()));
  int64_t offset = 0;
  for (size_t i = 0; i < shape.lengths.size(); ++i) {
    for (int64_t row = offset + shape.lengths[i] - shape.candidates[i]; row < offset + shape.lengths[i]; ++row)
      ++counts[static_cast<size_t>(row / rows)][i];
    offset += shape.lengths[i];
  }
  size_t widest = 0;
  auto total = [&](size_t r) { return std::accumulate(counts[r].begin(), counts[r].end(), int64_t{0}); };
  for (size_t r = 1; r < counts.size(); ++r)
    if (total(r) > total(widest)) widest = r;
  shape.candidates = counts[widest];
  s.options.context_rank = static_cast<int64_t>(widest);
  return shape;
}

StepShape shape_for(const PlanRequest& request, Setup& s) {
  StepShape shape{request.lengths, request.candidates};
  if (request.context_parallel > 1) {
    if (!request.cached_rows.empty()) fail("--context-parallel {}: a cached step is not supported yet",
                                           request.context_parallel);
    check_step_lengths(shape);  // before the candidates are assigned to ranks
    return context_rank_shape(std::move(shape), s);
  }
  if (request.cached_rows.empty()) return shape;
  if (request.cached_rows.size() != request.lengths.size())
    fail("{} cached row counts for {} sequences", request.cached_rows.size(), request.lengths.size());
  shape.page_rows = s.cache_page_rows;
  int32_t page = 0;
  for (size_t i = 0; i < request.lengths.size(); ++i) {
    const int64_t length = request.lengths[i], rows = request.cached_rows[i];
    if (rows < 1 || rows > length)
      fail("sequence {}: {} cached rows for {} tokens (need 1 <= rows <= L)", i, rows, length);
    if (i < request.candidates.size() && request.candidates[i] > rows)
      fail("sequence {}: {} candidate rows among {} computed ones", i, request.candidates[i], rows);
    CachedSequence view{length - rows, length, {}};
    for (int64_t p = 0; p < length; p += s.cache_page_rows) view.pages.push_back(page++);
    shape.cached.push_back(std::move(view));
    shape.lengths[i] = rows;
  }
  return shape;
}

// The pages of a cached step's sequences.
int64_t cache_pages_of(const StepShape& shape) {
  int64_t pages = 0;
  for (const CachedSequence& view : shape.cached) pages += static_cast<int64_t>(view.pages.size());
  return pages;
}

// The chunking of the step under the budget; with weights "auto", also the last layers streamed
// (left in `s`): the fewest with which the step fits in chunks that fill the GPU
// (chunks_fill_the_gpu); where no count does, the fewest with which it fits at all; where none
// fits, all of them (the most room there is). A layer's transfer hides under the layer before it
// wherever such chunks fit, while smaller chunks leave the GPU idle (measured: LLaDA-8B at 32k
// under 15.5 GiB, resident, 161 and 215 chunks: 4.1 s against 1.5 s; docs/PERFORMANCE.md).
// Streaming weights moves far fewer bytes than streaming the residual stream (a layer's weights
// once a step against x's rows several times a layer), so the layers are tried with x on the
// device first; only with every layer streamed may x go to host memory too.
ChunkSearchResult search_placement(const PlanRequest& request, Setup& s, const StepShape& shape, uint64_t cache) {
  if (request.weights != "auto") return search(s, shape, *request.budget, cache);
  const ResidualPlacement residual = s.residual;
  if (residual == ResidualPlacement::fit) s.residual = ResidualPlacement::device;
  // The fewest layers with which the step fits in any chunks, and that search.
  std::optional<std::pair<int64_t, ChunkSearchResult>> fitting;
  for (int64_t count = 0; count < s.config.layers; ++count) {
    s.stream_last_layers(count);
    if (s.device_weight_bytes() + s.workspace + cache >= *request.budget) continue;
    ChunkSearchResult result = search(s, shape, *request.budget, cache);
    if (!result.fits) continue;
    if (chunks_fill_the_gpu(shape, result.chunks)) {
      s.residual = residual;
      return result;
    }
    if (!fitting) fitting.emplace(count, std::move(result));
  }
  s.residual = residual;
  s.stream_last_layers(s.config.layers);
  ChunkSearchResult all = search(s, shape, *request.budget, cache);
  if (!fitting || (all.fits && chunks_fill_the_gpu(shape, all.chunks))) return all;
  s.stream_last_layers(fitting->first);
  return std::move(fitting->second);
}

}  // namespace

PlanReport plan_step(const PlanRequest& request) {
  Setup s = setup_for(request);
  const StepShape shape = shape_for(request, s);
  const auto start = Clock::now();
  if (!request.budget) {
    const ChunkConfig chunks{request.qkv_chunks, request.attention_chunks, request.ffn_chunks,
                             request.head_chunks, false, s.residual == ResidualPlacement::host};
    const PlannedStep step = plan_graph(instantiate_step_graph(s.config, shape, chunks, s.options), s.planner);
    PlanReport report = report_for(request, s, step, ms_since(start));
    report.sequences = static_cast<int64_t>(shape.lengths.size());
    report.context_rank = s.options.context_rank, report.context_tokens = shape.tokens();
    return report;
  }
  instantiate_step_graph(s.config, shape, {}, s.options);  // shape errors before budget errors
  const uint64_t cache = cache_mapped(s, cache_pages_of(shape));
  ChunkSearchResult result = search_placement(request, s, shape, cache);
  const double search_ms = ms_since(start);
  const uint64_t weights = s.device_weight_bytes();
  const uint64_t total_floor = weights + s.workspace + cache + result.floor;
  if (!result.fits && total_floor > *request.budget)
    fail("at L = {} tokens the step needs at least {} ({} weights + {} workspace + {} KV cache + {} activations "
         "with every op chunked as far as it goes{}); the budget is {}",
         shape.tokens(), gib(total_floor), gib(weights), gib(s.workspace), gib(cache), gib(result.floor),
         fmt::format("{}{}",
                     s.streamed_bytes > 0 ? fmt::format(", {} layers' weights in host memory", s.options.streamed_layers.size())
                                          : std::string(),
                     result.chunks.residual_in_host ? ", the residual stream in host memory" : ""),
         gib(*request.budget));
  if (!result.fits)  // the floor fits, the placement does not
    fail("at L = {} tokens the step does not fit the budget of {}: chunked as far as it goes its "
         "live bytes peak at {} ({} weights + {} workspace + {} activations), but no chunking found "
         "packs its tensors into the pages the budget leaves",
         shape.tokens(), gib(*request.budget), gib(total_floor), gib(weights), gib(s.workspace),
         gib(result.floor));
  PlanReport report = report_for(request, s, *result.planned, search_ms);
  report.sequences = static_cast<int64_t>(shape.lengths.size());
  report.context_rank = s.options.context_rank, report.context_tokens = shape.tokens();
  report.chunk_probes = result.probes;
  report.chunk_search_ms = search_ms;
  for (const ChunkSearchStep& step : result.steps)
    report.chunk_steps.push_back(fmt::format("{} -> {} (peak was {})", chunk_group_name(step.bottleneck),
                                             step.chunks, gib(step.peak_before)));
  return report;
}

LmaxReport find_lmax(const PlanRequest& request) {
  if (!request.budget) fail("finding L_max needs a budget");
  Setup s = setup_for(request);
  // With weights "auto" an L fits when it fits with every layer streamed (the most room); the
  // plan at L_max then streams the fewest layers it needs.
  if (request.weights == "auto") s.stream_last_layers(s.config.layers);
  activation_budget(s, *request.budget);
  const auto start = Clock::now();
  LmaxReport out;
  // The shape the runners plan for L: its bucket (plan/step_planner.h), up to 1/16 longer. An L
  // whose bucket does not fit would be refused by the runner, so it is not an L_max.
  auto fits = [&](int64_t L) {
    ++out.steps_tried;
    if (s.options.context_parallel > 1) {  // a rank's rows, bucketed as its runner does
      const int64_t ranks = s.options.context_parallel;
      const int64_t tokens = bucket_rows(context_parallel_rows(L, ranks)) * ranks;
      const StepShape rank = context_rank_shape(StepShape{{tokens}, {tokens - tokens / 2}}, s);
      return search(s, rank, *request.budget).fits;
    }
    const int64_t tokens = bucket_rows(L), candidates = std::min(bucket_rows(L - L / 2), tokens);
    return search(s, StepShape{{tokens}, {candidates}}, *request.budget).fits;
  };
  // Doubling to bracket L_max, then bisection over multiples of 1024.
  constexpr int64_t kStep = 1024;
  int64_t good = 0, bad = kStep;
  while (fits(bad)) {
    good = bad;
    bad *= 2;
    if (bad > (int64_t{1} << 31)) fail("L_max exceeds 2^31 tokens; Mosaic's limit");
  }
  while (bad - good > kStep) {
    const int64_t middle = good + (bad - good) / kStep / 2 * kStep;
    (fits(middle) ? good : bad) = middle;
  }
  out.l_max = good;
  if (good > 0) {
    PlanRequest at = request;
    at.lengths = {good};
    at.candidates = {good - good / 2};
    out.at_l_max = plan_step(at);
  }
  out.search_ms = ms_since(start);
  return out;
}

}  // namespace mosaic
