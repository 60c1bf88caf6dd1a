#include "exec/cpu_executor.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/lm_head.h"
#include "backend/cpu/moe.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "core/error.h"
#include "core/head_stats_combine.h"
#include "exec/moe_routing.h"
#include "graph/weight_staging.h"

namespace mosaic {
namespace {

static_assert(cpu::kLmHeadStats == kHeadStatsCols, "graph and kernel disagree on head stats");

constexpr size_t kRoleCount = static_cast<size_t>(WeightRole::router_bias) + 1;

}  // namespace

CpuExecutor::CpuExecutor(const ModelConfig& config, const ModelWeights& weights, ParallelRank rank)
    : config_(config), weights_(weights), rank_(rank) {
  const ModelWeights& w = weights;
  const size_t layers = w.layers.size();
  small_.assign(layers + 1, std::vector<std::vector<float>>(kRoleCount));
  auto convert = [](const WeightView& view) {
    std::vector<float> out;
    if (!view) return out;
    int64_t count = 1;
    for (int64_t extent : view.shape) count *= extent;
    out.resize(static_cast<size_t>(count));
    cpu::convert_to_f32(count, view.data, view.dtype, out.data());
    return out;
  };
  for (size_t l = 0; l < layers; ++l)
    for (WeightRole role : {WeightRole::attn_norm, WeightRole::ffn_norm, WeightRole::q_bias,
                            WeightRole::k_bias, WeightRole::v_bias, WeightRole::q_norm, WeightRole::k_norm,
                            WeightRole::router_bias})
      small_[l][static_cast<size_t>(role)] = convert(weight_of(w, static_cast<int32_t>(l), role));
  small_[layers][static_cast<size_t>(WeightRole::final_norm)] = convert(w.final_norm);
}

const std::vector<float>& CpuExecutor::small_weight(int32_t layer, WeightRole role) const {
  const size_t slot = layer < 0 ? small_.size() - 1 : static_cast<size_t>(layer);
  return small_[slot][static_cast<size_t>(role)];
}

std::vector<float> CpuExecutor::run(const Graph& graph, const PlannedStep& planned, CpuArena& arena,
                                    const PackedBatch& batch, std::span<const HeadRowSampling> sampling,
                                    CpuKvCache* cache) const {
  const MemoryPlan& plan = planned.plan;
  const ModelConfig& c = config_;
  const ModelWeights& w = weights_;
  Communicator* const comm = rank_.communicator;
  MOSAIC_ASSERT(graph.tensor_parallel * graph.context_parallel == (comm != nullptr ? comm->ranks() : 1),
                "a graph of {} x {} ranks on an executor of {}", graph.tensor_parallel, graph.context_parallel,
                comm != nullptr ? comm->ranks() : 1);
  MOSAIC_ASSERT(plan.offsets.size() == graph.tensors.size() &&
                    planned.graph.op_count() == graph.op_count(),
                "plan and graph disagree in structure");
  MOSAIC_ASSERT(graph.tokens == batch.tokens() &&
                    graph.candidates == static_cast<int64_t>(batch.logit_rows.size()),
                "graph and batch disagree on the shape");
  MOSAIC_ASSERT(sampling.empty() || static_cast<int64_t>(sampling.size()) == graph.candidates,
                "{} sampling entries for {} candidate rows", sampling.size(), graph.candidates);
  MOSAIC_ASSERT(!graph.cached() || (cache != nullptr && batch.kv_rows.size() == static_cast<size_t>(graph.tokens)),
                "a cached step needs the KV cache and every computed row's cache row");
  arena.reserve(plan.peak_bytes);
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    const GraphTensor& tensor = graph.tensors[t];
    MOSAIC_ASSERT(tensor.dtype == DType::f32 || tensor.dtype == DType::i32 || tensor.category == TensorCategory::weights,
                  "the CPU backend runs fp32 activations ({} is {})",
                  graph.tensor_name(static_cast<int32_t>(t)), dtype_name(tensor.dtype));
    if (tensor.resident || tensor.host) continue;
    const TensorUsage& slot = planned.usages[t];
    MOSAIC_ASSERT(tensor.bytes() <= slot.bytes && tensor.first_op == slot.first_op &&
                      tensor.last_op == slot.last_op,
                  "{} does not fit its planned slot", graph.tensor_name(static_cast<int32_t>(t)));
  }
  std::byte* base = arena.base();
  // Host tensors (a residual stream staged by rows, graph/residual_staging.h): here every byte is
  // host memory, so they are buffers of their own beside the arena, as on a GPU they are pinned.
  std::vector<std::vector<std::byte>> host_tensors(graph.tensors.size());
  for (size_t t = 0; t < graph.tensors.size(); ++t)
    if (graph.tensors[t].host) host_tensors[t].resize(graph.tensors[t].bytes());
  auto address = [&](const TensorRef& ref) -> std::byte* {
    const GraphTensor& t = graph.tensors[static_cast<size_t>(ref.tensor)];
    if (t.host) return host_tensors[static_cast<size_t>(ref.tensor)].data() + ref.row * t.row_bytes();
    if (t.resident) {  // the layer's K or V region of the cache
      float* region = t.role == TensorRole::cache_k ? cache->k(t.layer) : cache->v(t.layer);
      return reinterpret_cast<std::byte*>(region) + ref.row * t.row_bytes();
    }
    return base + plan.offsets[static_cast<size_t>(ref.tensor)] + ref.row * t.row_bytes();
  };
  auto f32 = [&](const TensorRef& ref) { return reinterpret_cast<float*>(address(ref)); };
  auto i32 = [&](const TensorRef& ref) { return reinterpret_cast<int32_t*>(address(ref)); };
  auto cols = [&](const TensorRef& ref) { return graph.tensors[static_cast<size_t>(ref.tensor)].cols; };

  // The inputs (a step may have no candidate row: an empty vector's data() may be null).
  auto input = [&](int32_t tensor, const std::vector<int32_t>& values) {
    if (!values.empty()) std::memcpy(i32({tensor, 0}), values.data(), values.size() * sizeof(int32_t));
  };
  input(graph.ids, batch.ids);
  input(graph.positions, batch.positions);
  input(graph.logit_rows, batch.logit_rows);
  if (graph.cached()) input(graph.kv_rows, batch.kv_rows);

  // Streamed layers: where each product weight sits in a layer's staged tensor.
  const std::vector<StagedLayer> staged_layouts =
      graph.staged_weight_bytes > 0 ? staged_layers(c, graph.staged_weight_bytes) : std::vector<StagedLayer>();
  // Where a product reads its weight (of the resident view's shape and dtype): the resident view's
  // data, or its staged copy.
  auto product_weight = [&](const GraphOp& op, const WeightView& resident, int32_t expert) -> const void* {
    if (!op.staged.valid()) return resident.data;
    return address(op.staged) + staged_layouts.at(static_cast<size_t>(op.layer)).find(op.weight, expert).offset;
  };

  const std::vector<float> inv_freq = cpu::rope_inv_freq(c.rotary(), c.rope_theta);
  const float eps = static_cast<float>(c.rms_eps);
  for (const GraphOp& op : graph.ops) {
    if (op.rows == 0) continue;
    switch (op.kind) {
      case OpKind::embed:  // the rows of ids in this rank's vocabulary (every id with one rank)
        cpu::embedding_gather_share(op.rows, c.hidden, i32(op.a), w.embedding.data, w.embedding.dtype,
                                    rank_.vocab_begin, c.vocab, f32(op.out), cols(op.out));
        break;
      case OpKind::all_reduce: {  // whole rows: in place, or a partial summed then added to out
        MOSAIC_ASSERT(comm != nullptr, "an all-reduce without ranks");
        const TensorRef summed = op.accumulate ? op.a : op.out;
        MOSAIC_ASSERT(cols(summed) == c.hidden, "an all-reduce over {} of a row's {} columns", cols(summed), c.hidden);
        comm->all_reduce_sum(f32(summed), op.rows * c.hidden);
        if (op.accumulate) cpu::add_inplace(op.rows, c.hidden, f32(op.out), cols(op.out), f32(op.a), cols(op.a));
        break;
      }
      case OpKind::all_gather_rows: {  // every rank's rows of K or V, rank by rank
        MOSAIC_ASSERT(comm != nullptr, "a gather without ranks");
        const GraphTensor& part = graph.tensors[static_cast<size_t>(op.a.tensor)];
        MOSAIC_ASSERT(op.rows == part.rows && graph.tensors[static_cast<size_t>(op.out.tensor)].rows ==
                                                  comm->ranks() * part.rows,
                      "a gather of {} rows into {}", op.rows, graph.tensor_name(op.out.tensor));
        comm->all_gather(address(op.a), address(op.out), part.bytes());
        break;
      }
      case OpKind::combine_head_stats: {
        MOSAIC_ASSERT(comm != nullptr && cols(op.a) == kHeadPartialCount, "a head combine without ranks");
        const size_t bytes = static_cast<size_t>(op.rows * kHeadPartialCount) * sizeof(float);
        std::vector<float> every(static_cast<size_t>(comm->ranks() * op.rows * kHeadPartialCount));
        comm->all_gather(f32(op.a), every.data(), bytes);
        combine_head_partials(op.rows, comm->ranks(), every.data(), op.rows * kHeadPartialCount, kHeadPartialCount,
                              f32(op.out), cols(op.out));
        break;
      }
      case OpKind::rms_norm: {
        const float* weight = small_weight(op.layer, op.weight).data();
        if (op.index.valid()) {  // gathered rows: the head's candidates
          const int32_t* rows = i32(op.index);
          for (int64_t r = 0; r < op.rows; ++r)
            cpu::rms_norm(1, c.hidden, f32({op.a.tensor, rows[r]}), cols(op.a), weight, eps,
                          f32(op.out) + r * cols(op.out), cols(op.out));
        } else {
          cpu::rms_norm(op.rows, c.hidden, f32(op.a), cols(op.a), weight, eps, f32(op.out), cols(op.out));
        }
        break;
      }
      case OpKind::linear: {
        const WeightView& weight = weight_of(w, op.layer, op.weight);
        cpu::GemmArgs args;
        args.m = op.rows, args.n = weight.shape[0], args.k = weight.shape[1];
        args.a = f32(op.a), args.lda = cols(op.a);
        args.b = product_weight(op, weight, -1), args.b_dtype = weight.dtype, args.ldb = weight.shape[1];
        args.c = f32(op.out), args.ldc = cols(op.out);
        if (op.has_bias) args.bias = small_weight(op.layer, bias_role_of(op.weight)).data();
        args.accumulate = op.accumulate;
        cpu::gemm_nt(args);
        break;
      }
      case OpKind::rope:
        cpu::rope_apply(op.rows, cols(op.out) / c.head_dim, c.rotary(), f32(op.out), cols(op.out),
                        i32(op.b), inv_freq.data(), c.head_dim);
        break;
      case OpKind::attention: {
        cpu::AttentionArgs args;
        args.q = f32(op.a), args.q_stride = cols(op.a);
        args.k = f32(op.b), args.k_stride = cols(op.b);
        args.v = f32(op.c), args.v_stride = cols(op.c);
        args.out = f32(op.out), args.out_stride = cols(op.out);
        args.q_heads = c.heads, args.kv_heads = c.kv_heads, args.head_dim = c.head_dim;
        args.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        args.segments = std::span(graph.segments).subspan(op.segment_begin, op.segment_count);
        args.kv_pages = graph.kv_pages.data(), args.page_rows = graph.kv_page_rows;
        cpu::attention(args);
        break;
      }
      case OpKind::gather_rows: {
        const GraphTensor& from = graph.tensors[static_cast<size_t>(op.a.tensor)];
        const uint64_t row_bytes = graph.tensors[static_cast<size_t>(op.out.tensor)].row_bytes();
        const int32_t* rows = i32(op.index);
        for (int64_t r = 0; r < op.rows; ++r) {
          MOSAIC_ASSERT(rows[r] >= 0 && rows[r] < from.rows, "gathered row {} outside {}", rows[r],
                        graph.tensor_name(op.a.tensor));
          std::memcpy(address(op.out) + r * row_bytes, address({op.a.tensor, rows[r]}), row_bytes);
        }
        break;
      }
      case OpKind::scatter_rows: {
        const uint64_t row_bytes = graph.tensors[static_cast<size_t>(op.a.tensor)].row_bytes();
        const int32_t* rows = i32(op.index);
        for (int64_t r = 0; r < op.rows; ++r)
          std::memcpy(address({op.out.tensor, rows[r]}), address(op.a) + r * row_bytes, row_bytes);
        break;
      }
      case OpKind::swiglu:
        cpu::swiglu(op.rows, cols(op.out), f32(op.out), cols(op.out), f32(op.b), cols(op.b));
        break;
      case OpKind::head_norm: {  // rows of heads x head_dim, contiguous: rows x heads norms of head_dim
        MOSAIC_ASSERT(cols(op.out) % c.head_dim == 0, "head_norm over {} columns", cols(op.out));
        const int64_t norms = op.rows * (cols(op.out) / c.head_dim);
        cpu::rms_norm(norms, c.head_dim, f32(op.out), c.head_dim, small_weight(op.layer, op.weight).data(), eps,
                      f32(op.out), c.head_dim);
        break;
      }
      case OpKind::moe_route:
        cpu::moe_route(op.rows, c.experts, c.experts_per_token, f32(op.a), cols(op.a), i32(op.out), f32(op.out2));
        break;
      case OpKind::moe_route_grouped:
        cpu::moe_route_grouped(op.rows, grouped_routing(c), f32(op.a), cols(op.a),
                               small_weight(op.layer, WeightRole::router_bias).data(), i32(op.out), f32(op.out2));
        break;
      case OpKind::moe_permute:
        cpu::moe_permute(op.rows, c.experts, c.experts_per_token, i32(op.a), i32(op.out), i32(op.out2));
        break;
      case OpKind::expert_linear: {  // one product per expert over its run of permuted rows
        const int32_t* offsets = i32(op.index);
        for (int64_t e = 0; e < c.experts; ++e) {
          const int64_t first = offsets[e], rows = offsets[e + 1] - offsets[e];
          if (rows == 0) continue;
          const WeightView& weight = expert_weight_of(w, op.layer, op.weight, e);
          cpu::GemmArgs args;
          args.m = rows, args.n = weight.shape[0], args.k = weight.shape[1];
          args.a = f32(op.a) + first * cols(op.a), args.lda = cols(op.a);
          args.b = product_weight(op, weight, static_cast<int32_t>(e)), args.b_dtype = weight.dtype, args.ldb = weight.shape[1];
          args.c = f32(op.out) + first * cols(op.out), args.ldc = cols(op.out);
          cpu::gemm_nt(args);
        }
        break;
      }
      case OpKind::stage_weights: {  // the host's copy is the weights themselves: copied as stored
        std::byte* staged = address(op.out);
        for (const StagedWeight& s : staged_layouts.at(static_cast<size_t>(op.layer)).weights) {
          const WeightView& view = s.expert >= 0 ? expert_weight_of(w, op.layer, s.role, s.expert)
                                                 : weight_of(w, op.layer, s.role);
          MOSAIC_ASSERT(view.shape.size() == 2 && view.shape[0] == s.n && view.shape[1] == s.k &&
                            dtype_size(view.dtype) == graph.staged_weight_bytes,
                        "layer {}'s staged {} weight is [{}, {}] of {} bytes an element; the model's is {}", op.layer,
                        weight_role_name(s.role), s.n, s.k, graph.staged_weight_bytes, view.name);
          std::memcpy(staged + s.offset, view.data, static_cast<size_t>(s.n * s.k) * graph.staged_weight_bytes);
        }
        break;
      }
      case OpKind::stage_rows:
      case OpKind::unstage_rows: {  // rows of a host tensor to or from their staged copy
        const GraphTensor& from = graph.tensors[static_cast<size_t>(op.a.tensor)];
        MOSAIC_ASSERT(from.row_bytes() == graph.tensors[static_cast<size_t>(op.out.tensor)].row_bytes(),
                      "{} copies rows of different widths", op_kind_name(op.kind));
        std::memcpy(address(op.out), address(op.a), static_cast<size_t>(op.rows) * from.row_bytes());
        break;
      }
      case OpKind::moe_combine:
        cpu::moe_combine(op.rows, c.hidden, c.experts_per_token, f32(op.out), cols(op.out), f32(op.a), cols(op.a),
                         f32(op.b), i32(op.index));
        break;
      case OpKind::lm_head: {
        cpu::GemmArgs args;
        args.m = op.rows, args.n = c.vocab, args.k = c.hidden;
        args.a = f32(op.a), args.lda = cols(op.a);
        args.b = w.lm_head.data, args.b_dtype = w.lm_head.dtype, args.ldb = c.hidden;
        args.c = f32(op.out), args.ldc = cols(op.out);
        cpu::gemm_nt(args);
        break;
      }
      case OpKind::lm_head_stats:
        if (graph.tensor_parallel > 1) {  // this rank's vocabulary rows, combined across ranks by the next op
          cpu::lm_head_sample_share(op.rows, c.hidden, f32(op.a), cols(op.a), w.lm_head.data, w.lm_head.dtype,
                                    rank_.vocab_begin, c.vocab,
                                    sampling.empty() ? nullptr : sampling.data() + op.out.row, f32(op.out),
                                    cols(op.out));
          break;
        }
        cpu::lm_head_sample(op.rows, c.hidden, f32(op.a), cols(op.a), w.lm_head.data,
                            w.lm_head.dtype, c.vocab,
                            sampling.empty() ? nullptr : sampling.data() + op.out.row, f32(op.out),
                            cols(op.out));
        break;
    }
  }
  const GraphTensor& output = graph.tensors[static_cast<size_t>(graph.output)];
  const float* result = f32({graph.output, 0});
  return std::vector<float>(result, result + output.rows * output.cols);
}

}  // namespace mosaic
