// JSON documents of plans and L_max searches (include/mosaic/plan_json.h).
#include "mosaic/plan_json.h"

#include <nlohmann/json.hpp>

#include "core/json_dump.h"

namespace mosaic {
namespace {

nlohmann::ordered_json report_document(const PlanReport& r, bool with_timeline) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["family"] = r.family;
  j["weight_bytes"] = r.weight_bytes;
  j["weight_dtype"] = r.weight_dtype;
  if (r.streamed_layers > 0) {
    j["streamed_weights"] = {{"placement", r.weights_placement},
                             {"layers", r.streamed_layers},
                             {"device_weight_bytes", r.device_weight_bytes},
                             {"host_weight_bytes", r.host_weight_bytes},
                             {"staged_layer_bytes", r.staged_layer_bytes},
                             {"flops_per_streamed_byte", r.flops_per_streamed_byte},
                             {"predicted_copy_ms_per_layer", r.weight_copy_ms},
                             {"predicted_compute_ms_under_it", r.weight_compute_ms}};
  }
  if (r.streamed_layers > 0 || r.residual_placement == "host")
    j["rates"] = {{"link_bytes_per_second", r.link_bytes_per_second},
                  {"compute_flops_per_second", r.compute_flops_per_second}};
  if (r.residual_placement == "host") {
    j["residual"] = {{"placement", r.residual_placement},
                     {"host_bytes", r.host_residual_bytes},
                     {"moved_bytes", r.residual_moved_bytes},
                     {"layer_moved_bytes", r.residual_layer_moved_bytes},
                     {"flops_per_moved_byte", r.flops_per_residual_byte},
                     {"predicted_copy_ms_per_layer", r.residual_copy_ms},
                     {"predicted_compute_ms_of_the_layer", r.residual_compute_ms},
                     {"written_back_bytes", r.residual_written_bytes},
                     {"predicted_writeback_ms_per_step", r.residual_writeback_ms}};
  }
  if (r.tensor_parallel > 1) {
    j["tensor_parallel"] = {{"ranks", r.tensor_parallel},
                            {"all_reduces", r.all_reduces},
                            {"all_reduce_bytes", r.all_reduce_bytes},
                            {"largest_all_reduce_bytes", r.largest_all_reduce_bytes},
                            {"head_gather_bytes", r.head_gather_bytes},
                            {"collective_bytes_per_second", r.collective_bytes_per_second},
                            {"compute_flops_per_second", r.compute_flops_per_second},
                            {"predicted_collective_ms", r.collective_ms},
                            {"predicted_rank_compute_ms", r.rank_compute_ms}};
  }
  if (r.context_parallel > 1) {
    j["context_parallel"] = {{"ranks", r.context_parallel},
                             {"rank", r.context_rank},
                             {"rank_tokens", r.tokens},
                             {"step_tokens", r.context_tokens},
                             {"all_gathers", r.all_gathers},
                             {"all_gather_bytes", r.all_gather_bytes},
                             {"collective_bytes_per_second", r.collective_bytes_per_second},
                             {"compute_flops_per_second", r.compute_flops_per_second},
                             {"predicted_collective_ms", r.collective_ms},
                             {"predicted_rank_compute_ms", r.rank_compute_ms}};
  }
  if (!r.adapter.empty()) {
    j["adapter"] = {{"path", r.adapter},
                    {"projections", r.adapter_projections},
                    {"rank", r.adapter_rank},
                    {"merged_extra_bytes", r.adapter_merged_extra_bytes}};
  }
  j["sequences"] = r.sequences;
  j["tokens"] = r.tokens;
  j["candidates"] = r.candidates;
  j["activation_peak_bytes"] = r.activation_peak;
  if (r.cache_page_rows > 0) {
    j["kv_cache_bytes"] = r.cache_bytes;
    j["kv_cache_mapped_bytes"] = r.cache_mapped_bytes;
    j["kv_cache_page_rows"] = r.cache_page_rows;
  }
  j["lower_bound_bytes"] = r.lower_bound;
  j["average_live_bytes"] = r.average_live;
  j["par"] = r.par;
  j["inflation"] = r.inflation;
  j["tensors"] = r.tensor_count;
  j["ops"] = r.op_count;
  j["planning_ms"] = r.planning_ms;
  j["chunks"] = {{"qkv", r.qkv_chunks}, {"attention", r.attention_chunks}, {"ffn", r.ffn_chunks},
                 {"head", r.head_chunks}, {"last_layer_all_rows", r.last_layer_all_rows}};
  j["workspace_bytes"] = r.workspace_bytes;
  j["mapped_bytes"] = r.mapped_bytes;
  j["total_bytes"] = r.total_bytes();
  if (r.budget) {
    j["budget_bytes"] = *r.budget;
    j["chunk_search_ms"] = r.chunk_search_ms;
    j["chunk_probes"] = r.chunk_probes;
    j["chunk_steps"] = r.chunk_steps;
  }
  j["peak_op"] = r.peak_op_name;
  for (const auto& c : r.live_at_peak) j["live_at_peak"][c.category] = c.bytes;
  for (const auto& t : r.largest_at_peak)
    j["largest_at_peak"].push_back({{"tensor", t.name}, {"category", t.category}, {"bytes", t.bytes}});
  if (with_timeline) {
    j["categories"] = r.categories;
    j["op_names"] = r.op_names;
    j["timeline"] = r.timeline;
    if (!r.copied_in.empty()) j["copied_in"] = r.copied_in, j["copied_out"] = r.copied_out;
  }
  return j;
}

}  // namespace

std::string plan_report_json(const PlanReport& report, bool with_timeline, int indent) {
  return dump_json(report_document(report, with_timeline), indent);
}

std::string lmax_report_json(const LmaxReport& report, const PlanRequest& request,
                             bool with_timeline, int indent) {
  nlohmann::ordered_json j;
  j["model"] = request.model;
  j["budget_bytes"] = request.budget.value_or(0);
  j["temperature"] = request.temperature;
  j["l_max"] = report.l_max;
  j["steps_tried"] = report.steps_tried;
  j["search_ms"] = report.search_ms;
  if (report.l_max > 0) j["at_l_max"] = report_document(report.at_l_max, with_timeline);
  return dump_json(j, indent);
}

}  // namespace mosaic
