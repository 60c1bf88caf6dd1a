#include "mosaic/plan.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "graph/step_graph.h"
#include "model/test_model.h"
#include "model/weight_names.h"
#include "plan/step_planner.h"

namespace mosaic {
namespace {

ModelConfig config_for(const std::string& model) {
  if (model == "llada-8b") return test_model_preset(Family::llada, "llada-8b");
  if (model == "dream-7b") return test_model_preset(Family::dream, "dream-7b");
  if (model.empty()) fail("no model given (a preset: llada-8b, dream-7b; or a model folder)");
  if (!std::filesystem::is_directory(model))
    fail("'{}' is neither a preset (llada-8b, dream-7b) nor a model folder", model);
  return load_model_config(model);
}

DType weight_dtype_of(const ModelConfig& config) {
  if (config.torch_dtype == "float32") return DType::f32;
  if (config.torch_dtype == "float16") return DType::f16;
  return DType::bf16;
}

std::string op_name(const Graph& graph, const GraphOp& op) {
  std::string name = op.layer >= 0 ? fmt::format("layer{}.", op.layer) : std::string();
  name += op_kind_name(op.kind);
  if (op.kind == OpKind::linear || op.kind == OpKind::rms_norm)
    name += fmt::format("({})", weight_role_name(op.weight));
  else if (op.kind == OpKind::rope)
    name += fmt::format("({})", graph.tensor_name(op.out.tensor));
  const GraphTensor& out = graph.tensors[static_cast<size_t>(op.out.tensor)];
  if (out.chunk >= 0) name += fmt::format("[{}]", out.chunk);
  return name;
}

}  // namespace

PlanReport plan_step(const PlanRequest& request) {
  const ModelConfig config = config_for(request.model);
  if (config.family == Family::llada_moe) fail("LLaDA-MoE planning is not supported yet");

  GraphOptions options;
  const auto activations = dtype_from_user(request.activations);
  if (!activations || (*activations != DType::bf16 && *activations != DType::f32))
    fail("activation dtype '{}' is not supported (expected bf16 or fp32)", request.activations);
  options.activations = *activations;
  if (request.head == "stats") options.head = HeadMode::stats;
  else if (request.head == "logits") options.head = HeadMode::logits;
  else fail("head '{}' is not supported (expected stats or logits)", request.head);
  PlannerKind kind;
  if (request.planner == "greedy-by-size") kind = PlannerKind::greedy_by_size;
  else if (request.planner == "first-fit") kind = PlannerKind::first_fit;
  else fail("planner '{}' is not supported (expected greedy-by-size or first-fit)", request.planner);

  const StepShape shape{request.lengths, request.candidates};
  const ChunkConfig chunks{request.qkv_chunks, request.attention_chunks, request.ffn_chunks,
                           request.head_chunks};
  const auto start = std::chrono::steady_clock::now();
  const PlannedStep step = plan_graph(instantiate_step_graph(config, shape, chunks, options), kind);
  const double planning_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const Graph& graph = step.graph;

  PlanReport report;
  report.model = request.model;
  report.family = std::string(family_name(config.family));
  report.layers = config.layers, report.hidden = config.hidden, report.vocab = config.vocab;
  const DType weight_dtype = weight_dtype_of(config);
  report.weight_dtype = std::string(dtype_name(weight_dtype));
  for (const WeightSpec& spec : family_weight_specs(config)) {
    uint64_t bytes = dtype_size(weight_dtype);
    for (int64_t extent : spec.shape) bytes *= static_cast<uint64_t>(extent);
    report.weight_bytes += bytes;
  }
  report.tokens = graph.tokens, report.candidates = graph.candidates;
  report.sequences = static_cast<int64_t>(shape.lengths.size());
  report.activation_peak = step.memory.planned_peak;
  report.lower_bound = step.memory.lower_bound;
  report.average_live = step.memory.average_live;
  report.par = step.memory.par(), report.inflation = step.memory.inflation();
  report.tensor_count = static_cast<int64_t>(graph.tensors.size());
  report.op_count = graph.op_count();
  report.planning_ms = planning_ms;
  report.peak_op = step.memory.peak_op;
  report.peak_op_name = op_name(graph, graph.ops[static_cast<size_t>(step.memory.peak_op)]);

  // Live bytes per op and category (difference arrays per category), and the peak's content.
  const size_t categories = static_cast<size_t>(TensorCategory::count);
  for (size_t k = 0; k < categories; ++k)
    report.categories.emplace_back(category_name(static_cast<TensorCategory>(k)));
  std::vector<std::vector<int64_t>> delta(graph.ops.size() + 1, std::vector<int64_t>(categories, 0));
  std::vector<uint64_t> at_peak(categories, 0);
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    const GraphTensor& tensor = graph.tensors[t];
    const size_t k = static_cast<size_t>(tensor.category);
    delta[tensor.first_op][k] += static_cast<int64_t>(tensor.bytes());
    delta[tensor.last_op + 1][k] -= static_cast<int64_t>(tensor.bytes());
    if (tensor.first_op <= report.peak_op && report.peak_op <= tensor.last_op) {
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
  for (size_t k = 0; k < categories; ++k)
    if (at_peak[k] > 0) report.live_at_peak.push_back({report.categories[k], at_peak[k]});
  std::sort(report.live_at_peak.begin(), report.live_at_peak.end(),
            [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  std::stable_sort(report.largest_at_peak.begin(), report.largest_at_peak.end(),
                   [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  if (report.largest_at_peak.size() > 8) report.largest_at_peak.resize(8);
  return report;
}

}  // namespace mosaic
