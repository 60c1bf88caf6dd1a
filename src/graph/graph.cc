#include "graph/graph.h"

#include <fmt/format.h>

#include <algorithm>

namespace mosaic {

RowChunk row_chunk(int64_t total, int64_t chunks, int64_t index) {
  const int64_t size = (total + chunks - 1) / chunks;
  const int64_t begin = std::min(total, index * size);
  return {begin, std::min(size, total - begin)};
}

std::string_view category_name(TensorCategory category) {
  switch (category) {
    case TensorCategory::input: return "input";
    case TensorCategory::residual: return "residual";
    case TensorCategory::norm: return "norm";
    case TensorCategory::query: return "query";
    case TensorCategory::kv: return "kv";
    case TensorCategory::attention: return "attention";
    case TensorCategory::ffn: return "ffn";
    case TensorCategory::head: return "head";
    case TensorCategory::kv_cache: return "kv_cache";
    case TensorCategory::experts: return "experts";
    case TensorCategory::weights: return "weights";
    case TensorCategory::count: break;
  }
  return "?";
}

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::embed: return "embed";
    case OpKind::rms_norm: return "rms_norm";
    case OpKind::linear: return "linear";
    case OpKind::rope: return "rope";
    case OpKind::attention: return "attention";
    case OpKind::swiglu: return "swiglu";
    case OpKind::lm_head: return "lm_head";
    case OpKind::lm_head_stats: return "lm_head_stats";
    case OpKind::gather_rows: return "gather_rows";
    case OpKind::scatter_rows: return "scatter_rows";
    case OpKind::head_norm: return "head_norm";
    case OpKind::moe_route: return "moe_route";
    case OpKind::moe_route_grouped: return "moe_route_grouped";
    case OpKind::moe_permute: return "moe_permute";
    case OpKind::expert_linear: return "expert_linear";
    case OpKind::moe_combine: return "moe_combine";
    case OpKind::stage_weights: return "stage_weights";
    case OpKind::stage_rows: return "stage_rows";
    case OpKind::unstage_rows: return "unstage_rows";
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::combine_head_stats: return "combine_head_stats";
    case OpKind::all_gather_rows: return "all_gather_rows";
  }
  return "?";
}

namespace {

std::string_view role_name(TensorRole role) {
  switch (role) {
    case TensorRole::ids: return "ids";
    case TensorRole::positions: return "positions";
    case TensorRole::logit_rows: return "logit_rows";
    case TensorRole::residual: return "x";
    case TensorRole::attn_norm: return "attn_norm";
    case TensorRole::q: return "q";
    case TensorRole::k: return "k";
    case TensorRole::v: return "v";
    case TensorRole::attn_out: return "attn_out";
    case TensorRole::ffn_norm: return "ffn_norm";
    case TensorRole::gate: return "gate";
    case TensorRole::up: return "up";
    case TensorRole::head_norm: return "head_norm";
    case TensorRole::logits: return "logits";
    case TensorRole::head_stats: return "head_stats";
    case TensorRole::head_scratch: return "head_scratch";
    case TensorRole::candidate_residual: return "candidate_x";
    case TensorRole::candidate_positions: return "candidate_positions";
    case TensorRole::kv_rows: return "kv_rows";
    case TensorRole::cache_k: return "cache_k";
    case TensorRole::cache_v: return "cache_v";
    case TensorRole::router_logits: return "router_logits";
    case TensorRole::route_experts: return "route_experts";
    case TensorRole::route_weights: return "route_weights";
    case TensorRole::route_slots: return "route_slots";
    case TensorRole::expert_rows: return "expert_rows";
    case TensorRole::expert_input: return "expert_input";
    case TensorRole::expert_gate: return "expert_gate";
    case TensorRole::expert_up: return "expert_up";
    case TensorRole::expert_output: return "expert_output";
    case TensorRole::staged_weights: return "staged_weights";
    case TensorRole::residual_rows: return "x_rows";
    case TensorRole::reduce_partial: return "partial";
    case TensorRole::head_partials: return "head_partials";
    case TensorRole::k_rows: return "k_rows";
    case TensorRole::v_rows: return "v_rows";
  }
  return "?";
}

}  // namespace

uint64_t Graph::resident_bytes() const {
  uint64_t bytes = 0;
  for (const GraphTensor& t : tensors)
    if (t.resident) bytes += t.bytes();
  return bytes;
}

uint64_t Graph::host_bytes() const {
  uint64_t bytes = 0;
  for (const GraphTensor& t : tensors)
    if (t.host) bytes += t.bytes();
  return bytes;
}

std::string Graph::tensor_name(int32_t tensor) const {
  const GraphTensor& t = tensors.at(static_cast<size_t>(tensor));
  std::string name = t.layer >= 0 ? fmt::format("layer{}.{}", t.layer, role_name(t.role))
                                  : std::string(role_name(t.role));
  if (t.chunk >= 0) name += fmt::format("[{}]", t.chunk);
  return name;
}

}  // namespace mosaic
