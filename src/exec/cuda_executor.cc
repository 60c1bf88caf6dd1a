#include "exec/cuda_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/gate_up_swiglu.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/lm_head.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/moe_route_grouped.h"
#include "core/error.h"
#include "core/format_bytes.h"
#include "core/half.h"
#include "exec/attention_tail_split.h"
#include "exec/cuda_host_rows.h"
#include "exec/cuda_op_profile.h"
#include "exec/cuda_step_graphs.h"
#include "exec/gate_up_swiglu_fusion.h"
#include "graph/weight_staging.h"
#include "model/weight_names.h"

namespace mosaic {
namespace {

constexpr uint64_t kAlign = 256;

// From this many candidate rows in a step on, the fused head takes its logits from cuBLASLt
// chunk by chunk (155 -> ~700 TFLOP/s on the H200 at 2,048 rows); below, the fused kernel,
// which reads W once without the extra launches, is as fast (docs/design/cuda-kernels.md).
constexpr int64_t kHeadRowsThroughGemm = 256;

uint64_t elements_of(const WeightView& view) {
  uint64_t count = 1;
  for (int64_t extent : view.shape) count *= static_cast<uint64_t>(extent);
  return count;
}

// A growable device buffer for small per-step data (segments, sampling rows).
struct DeviceBuffer {
  void* data = nullptr;
  size_t size = 0;
  void* fit(size_t bytes) {
    if (bytes <= size) return data;
    if (data != nullptr) MOSAIC_CUDA_CHECK(cudaFree(data));
    size = std::max<size_t>(bytes, 4096);
    MOSAIC_CUDA_CHECK(cudaMalloc(&data, size));
    return data;
  }
  ~DeviceBuffer() {
    if (data != nullptr) cudaFree(data);
  }
};

// Every value the forward's launches read on the host (CudaStepGraphs): the per-step buffers'
// addresses, the attention segments (their row counts size the grids), whether every row is
// greedy (it picks the head's fold kernel), and per op its fields and the address and row length
// of each tensor it names. Weights and model constants are the executor's own and never change.
template <typename Address>
CudaStepGraphs::Signature launch_signature(const Graph& graph, const Address& address, const void* segments,
                                           const void* sampling, const void* kv_pages, bool all_greedy) {
  CudaStepGraphs::Signature signature;
  signature.reserve(6 + 5 * graph.segments.size() + 20 * graph.ops.size());
  auto put = [&](auto value) { signature.push_back(static_cast<int64_t>(value)); };
  put(reinterpret_cast<intptr_t>(segments)), put(reinterpret_cast<intptr_t>(sampling)), put(all_greedy);
  put(reinterpret_cast<intptr_t>(kv_pages)), put(graph.kv_page_rows);
  put(graph.tensors[static_cast<size_t>(graph.output)].rows);
  for (const AttentionSegment& s : graph.segments)
    put(s.q_begin), put(s.q_count), put(s.kv_begin), put(s.kv_count), put(s.kv_pages), put(s.key_splits);
  for (const GraphOp& op : graph.ops) {
    put(op.kind), put(op.layer), put(op.weight), put(op.has_bias), put(op.accumulate), put(op.rows);
    put(op.segment_begin), put(op.segment_count);
    for (const TensorRef* ref : {&op.out, &op.a, &op.b, &op.c, &op.index, &op.scratch, &op.out2, &op.staged}) {
      if (!ref->valid()) {
        put(-1);
        continue;
      }
      put(reinterpret_cast<intptr_t>(address(*ref))), put(graph.tensors[static_cast<size_t>(ref->tensor)].cols);
    }
  }
  return signature;
}

}  // namespace

struct CudaExecutor::Impl {
  const Model& model;
  int device;
  cudaStream_t stream = nullptr;  // the step's, at the device's greatest priority
  // Long attention ops' last rows run here, at the least priority (exec/attention_tail_split.h);
  // MOSAIC_ATTENTION_TAIL_STREAM=0 runs them on `stream` in one launch, as every other op.
  cudaStream_t tail_stream = nullptr;
  cudaEvent_t tail_fork = nullptr, tail_join = nullptr;
  // Recorded before a step's first upload and after its last copy back: the span the device
  // worked on the step (CudaStepResult::device_seconds).
  cudaEvent_t span_begin = nullptr, span_end = nullptr;
  bool tail_overlap = true;
  // MOSAIC_FUSED_SWIGLU=1: a layer's gate and up products and SwiGLU as one fused product where
  // the device and shapes allow (exec/gate_up_swiglu_fusion.h). Off by default: the same bits,
  // but steps measured 0.5-1 % slower on the H200 (docs/design/gate-up-swiglu.md).
  bool fuse_gate_up = false;
  void* weights = nullptr;   // one allocation, bf16 tensors at 256-byte aligned offsets
  // Mixture-of-experts layers: per layer and role (expert_gate, expert_up, expert_down) the
  // device addresses of its experts' weights, [layers][3][experts], for the grouped product.
  DeviceBuffer expert_tables;
  // LLaDA 2.x routers' expert biases, fp32 as stored (they decide choices; bf16 would change
  // them): [layers][experts], a dense layer's row unused.
  DeviceBuffer router_biases;
  uint64_t weight_bytes = 0;
  std::map<const void*, const void*> device_of;  // host view data -> device bf16 copy
  cuda::Gemm gemm;
  DeviceBuffer segments, sampling, commit_sequences, committed, kv_pages;
  std::chrono::steady_clock::time_point launch_end;
  CudaOpProfile profile;  // MOSAIC_PROFILE_OPS=1
  CudaStepGraphs graphs;  // MOSAIC_CUDA_GRAPHS=0 turns replays off
  // Streamed layers (graph/weight_staging.h): per layer its product weights in pinned host memory
  // in the staged layout, and the events that order its copy: `slot_free` when the step's stream
  // reaches the stage op (the staged tensor's earlier tenants are done), `arrived` when the copy
  // stream has written it (the layer's first product waits for it).
  struct StreamedLayer {
    StagedLayer layout;
    void* host = nullptr;
    cudaEvent_t slot_free = nullptr, arrived = nullptr;
  };
  std::map<int32_t, StreamedLayer> streamed;
  cudaStream_t copy_stream = nullptr;
  // A residual stream in host memory (graph/residual_staging.h): its pinned buffer and copies.
  CudaHostRows host_rows;

  Impl(const Model& m, int d) : model(m), device(d) {}

  const float* router_bias(int32_t layer) const {
    return static_cast<const float*>(router_biases.data) + int64_t{layer} * model.config().experts;
  }

  const void* const* expert_table(int32_t layer, WeightRole role) const {
    const int64_t which = role == WeightRole::expert_gate ? 0 : role == WeightRole::expert_up ? 1 : 2;
    const int64_t experts = model.config().experts;
    return static_cast<const void* const*>(expert_tables.data) + (int64_t{layer} * 3 + which) * experts;
  }

  const void* on_device(const WeightView& view) const {
    const auto found = device_of.find(view.data);
    MOSAIC_ASSERT(found != device_of.end(), "weight {} was not uploaded", view.name);
    return found->second;
  }
};

uint64_t CudaExecutor::head_scratch_per_row(int64_t vocab) {
  return (cuda::lm_head_scratch_bytes(1024, vocab) + 1023) / 1024;
}

CudaExecutor::CudaExecutor(const Model& model, int device, std::span<const int32_t> streamed_layers)
    : impl_(std::make_unique<Impl>(model, device)) {
  MOSAIC_CUDA_CHECK(cudaSetDevice(device));
  // The step's stream outranks the tail stream, so that the GPU starts a split attention op's
  // tail CTAs only when its head part has none left to start (lower numbers rank higher).
  int least_priority = 0, greatest_priority = 0;
  MOSAIC_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  MOSAIC_CUDA_CHECK(cudaStreamCreateWithPriority(&impl_->stream, cudaStreamNonBlocking, greatest_priority));
  MOSAIC_CUDA_CHECK(cudaStreamCreateWithPriority(&impl_->tail_stream, cudaStreamNonBlocking, least_priority));
  MOSAIC_CUDA_CHECK(cudaEventCreateWithFlags(&impl_->tail_fork, cudaEventDisableTiming));
  MOSAIC_CUDA_CHECK(cudaEventCreate(&impl_->span_begin));
  MOSAIC_CUDA_CHECK(cudaEventCreate(&impl_->span_end));
  MOSAIC_CUDA_CHECK(cudaEventCreateWithFlags(&impl_->tail_join, cudaEventDisableTiming));
  const char* tail_setting = std::getenv("MOSAIC_ATTENTION_TAIL_STREAM");
  impl_->tail_overlap = tail_setting == nullptr || std::strcmp(tail_setting, "0") != 0;
  const char* fused_setting = std::getenv("MOSAIC_FUSED_SWIGLU");
  impl_->fuse_gate_up = fused_setting != nullptr && std::strcmp(fused_setting, "1") == 0;

  // Every distinct tensor once (a tied LM head is the embedding).
  const ModelWeights& w = model.weights();
  std::vector<const WeightView*> views = {&w.embedding, &w.final_norm, &w.lm_head};
  for (const LayerWeights& l : w.layers) {
    for (const WeightView* v : {&l.attn_norm, &l.q, &l.k, &l.v, &l.q_bias, &l.k_bias, &l.v_bias, &l.o,
                                &l.q_norm, &l.k_norm, &l.ffn_norm, &l.gate, &l.up, &l.down, &l.router})
      views.push_back(v);
    for (const ExpertWeights& e : l.experts)
      for (const WeightView* v : {&e.gate, &e.up, &e.down}) views.push_back(v);
  }
  // Streamed layers' product weights go to pinned host memory below, not to the device.
  std::set<const void*> on_host;
  for (const int32_t layer : streamed_layers) {
    if (layer < 0 || layer >= model.config().layers)
      fail("layer {} cannot be streamed: the model has {}", layer, model.config().layers);
    const LayerWeights& l = w.layers[static_cast<size_t>(layer)];
    if (!l.experts.empty())
      fail("layer {} has experts: the CUDA backend streams the weights of dense layers only", layer);
    for (const WeightView* v : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down})
      if (*v) on_host.insert(v->data);
  }
  std::map<const void*, uint64_t> offsets;
  uint64_t total = 0;
  for (const WeightView* view : views) {
    if (!*view || offsets.contains(view->data) || on_host.contains(view->data)) continue;
    offsets[view->data] = total;
    total += (elements_of(*view) * 2 + kAlign - 1) / kAlign * kAlign;
  }
  const cudaError_t status = cudaMalloc(&impl_->weights, total);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    fail("the GPU cannot hold the weights ({} as bf16)", format_bytes(total));
  }
  MOSAIC_CUDA_CHECK(status);
  impl_->weight_bytes = total;
  std::vector<uint16_t> converted;
  // A view's elements as bf16 (converted once on the host where stored otherwise).
  auto bf16_of = [&](const WeightView& view) -> const void* {
    if (view.dtype == DType::bf16) return view.data;
    const uint64_t count = elements_of(view);
    converted.resize(count);
    for (uint64_t i = 0; i < count; ++i) {
      const float value = view.dtype == DType::f32 ? static_cast<const float*>(view.data)[i]
                                                   : f16_to_f32(static_cast<const uint16_t*>(view.data)[i]);
      converted[i] = f32_to_bf16(value);
    }
    return converted.data();
  };
  for (const WeightView* view : views) {
    if (!*view || impl_->device_of.contains(view->data) || on_host.contains(view->data)) continue;
    auto* target = static_cast<std::byte*>(impl_->weights) + offsets[view->data];
    MOSAIC_CUDA_CHECK(cudaMemcpy(target, bf16_of(*view), elements_of(*view) * 2, cudaMemcpyHostToDevice));
    impl_->device_of[view->data] = target;
  }
  if (!streamed_layers.empty()) MOSAIC_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->copy_stream, cudaStreamNonBlocking));
  const std::vector<StagedLayer> layouts =
      streamed_layers.empty() ? std::vector<StagedLayer>() : staged_layers(model.config(), 2);
  for (const int32_t layer : streamed_layers) {
    if (impl_->streamed.contains(layer)) continue;
    Impl::StreamedLayer& streamed = impl_->streamed[layer];
    streamed.layout = layouts[static_cast<size_t>(layer)];
    const cudaError_t pinned = cudaHostAlloc(&streamed.host, streamed.layout.bytes, cudaHostAllocDefault);
    if (pinned != cudaSuccess) {
      cudaGetLastError();
      streamed.host = nullptr;
      fail("pinned host memory for the weights of streamed layer {} ({}) cannot be allocated: {}", layer,
           format_bytes(streamed.layout.bytes), cudaGetErrorString(pinned));
    }
    for (const StagedWeight& staged : streamed.layout.weights) {
      const WeightView& view = weight_of(w, layer, staged.role);
      MOSAIC_ASSERT(view.shape.size() == 2 && view.shape[0] == staged.n && view.shape[1] == staged.k,
                    "layer {}'s {} weight is not [{}, {}] as staged", layer, weight_role_name(staged.role), staged.n,
                    staged.k);
      std::memcpy(static_cast<std::byte*>(streamed.host) + staged.offset, bf16_of(view), elements_of(view) * 2);
    }
    MOSAIC_CUDA_CHECK(cudaEventCreateWithFlags(&streamed.slot_free, cudaEventDisableTiming));
    MOSAIC_CUDA_CHECK(cudaEventCreateWithFlags(&streamed.arrived, cudaEventDisableTiming));
  }
  if (model.config().experts > 0) {
    std::vector<const void*> table;
    for (size_t l = 0; l < w.layers.size(); ++l)
      for (WeightRole role : {WeightRole::expert_gate, WeightRole::expert_up, WeightRole::expert_down})
        for (int64_t e = 0; e < model.config().experts; ++e)
          table.push_back(w.layers[l].experts.empty()
                              ? nullptr
                              : impl_->on_device(expert_weight_of(w, static_cast<int32_t>(l), role, e)));
    impl_->expert_tables.fit(table.size() * sizeof(void*));
    MOSAIC_CUDA_CHECK(cudaMemcpy(impl_->expert_tables.data, table.data(), table.size() * sizeof(void*),
                                 cudaMemcpyHostToDevice));
  }
  if (model.config().router == RouterKind::sigmoid_grouped) {
    const int64_t experts = model.config().experts;
    std::vector<float> biases(w.layers.size() * static_cast<size_t>(experts), 0.0f);
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const WeightView& bias = w.layers[l].router_bias;
      if (bias) cpu::convert_to_f32(experts, bias.data, bias.dtype, biases.data() + l * static_cast<size_t>(experts));
    }
    impl_->router_biases.fit(biases.size() * sizeof(float));
    MOSAIC_CUDA_CHECK(cudaMemcpy(impl_->router_biases.data, biases.data(), biases.size() * sizeof(float),
                                 cudaMemcpyHostToDevice));
  }
}

CudaExecutor::~CudaExecutor() {
  for (cudaStream_t stream : {impl_->stream, impl_->tail_stream, impl_->copy_stream})
    if (stream != nullptr) cudaStreamSynchronize(stream);
  if (impl_->weights != nullptr) cudaFree(impl_->weights);
  for (auto& [layer, streamed] : impl_->streamed) {
    if (streamed.host != nullptr) cudaFreeHost(streamed.host);
    for (cudaEvent_t event : {streamed.slot_free, streamed.arrived})
      if (event != nullptr) cudaEventDestroy(event);
  }
  if (impl_->copy_stream != nullptr) cudaStreamDestroy(impl_->copy_stream);
  for (cudaEvent_t event : {impl_->tail_fork, impl_->tail_join, impl_->span_begin, impl_->span_end})
    if (event != nullptr) cudaEventDestroy(event);
  for (cudaStream_t stream : {impl_->stream, impl_->tail_stream})
    if (stream != nullptr) cudaStreamDestroy(stream);
}

uint64_t CudaExecutor::weight_bytes() const { return impl_->weight_bytes; }
uint64_t CudaExecutor::streamed_weight_bytes() const {
  uint64_t bytes = 0;
  for (const auto& [layer, streamed] : impl_->streamed) bytes += streamed.layout.bytes;
  return bytes;
}

std::chrono::steady_clock::time_point CudaExecutor::last_launch_end() const { return impl_->launch_end; }

cudaStream_t CudaExecutor::stream() const { return impl_->stream; }

size_t CudaExecutor::graph_replays() const { return impl_->graphs.replays(); }
bool CudaExecutor::graphs_enabled() const { return impl_->graphs.enabled(); }

uint64_t CudaExecutor::workspace_bytes() const {
  return impl_->gemm.workspace_bytes() + impl_->segments.size + impl_->sampling.size +
         impl_->commit_sequences.size + impl_->committed.size + impl_->kv_pages.size + impl_->expert_tables.size +
         impl_->router_biases.size;
}

CudaStepResult CudaExecutor::run(const Graph& graph, const PlannedStep& planned, CudaArena& arena,
                                 const PackedBatch& batch, std::span<const HeadRowSampling> sampling,
                                 const DeviceStepIo& io) {
  Impl& x = *impl_;
  const ModelConfig& c = x.model.config();
  const ModelWeights& w = x.model.weights();
  const MemoryPlan& plan = planned.plan;
  cudaStream_t stream = x.stream;
  MOSAIC_ASSERT(plan.offsets.size() == graph.tensors.size() && planned.graph.op_count() == graph.op_count(),
                "plan and graph disagree in structure");
  MOSAIC_ASSERT(arena.mapped() >= plan.peak_bytes, "the arena does not cover the plan");
  MOSAIC_ASSERT(!graph.cached() || (io.cache != nullptr && batch.kv_rows.size() == static_cast<size_t>(graph.tokens)),
                "a cached step needs the KV cache and every computed row's cache row");
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    const GraphTensor& tensor = graph.tensors[t];
    if (tensor.resident || tensor.host) continue;
    MOSAIC_ASSERT(tensor.bytes() <= planned.usages[t].bytes, "{} does not fit its slot", graph.tensor_name(int32_t(t)));
    // fp32 only where the graph asks for it whatever the activations: the head's results, the
    // router's probabilities, LLaDA 2.x's router logits.
    MOSAIC_ASSERT(tensor.dtype != DType::f32 || tensor.category == TensorCategory::head ||
                      tensor.role == TensorRole::route_weights || tensor.role == TensorRole::router_logits,
                  "the CUDA backend runs bf16 activations ({} is fp32)", graph.tensor_name(int32_t(t)));
  }
  x.host_rows.prepare(graph);  // pinned memory for host tensors: refused here, before any launch
  MOSAIC_CUDA_CHECK(cudaEventRecord(x.span_begin, stream));
  auto* base = static_cast<std::byte*>(arena.base());
  auto address = [&](const TensorRef& ref) -> void* {
    const GraphTensor& t = graph.tensors[static_cast<size_t>(ref.tensor)];
    if (t.host) return static_cast<std::byte*>(x.host_rows.host_address(ref.tensor)) + ref.row * t.row_bytes();
    if (t.resident) {  // the layer's K or V region of the cache
      void* region = t.role == TensorRole::cache_k ? io.cache->k(t.layer) : io.cache->v(t.layer);
      return static_cast<std::byte*>(region) + ref.row * t.row_bytes();
    }
    return base + plan.offsets[static_cast<size_t>(ref.tensor)] + ref.row * t.row_bytes();
  };
  auto i32 = [&](const TensorRef& ref) { return static_cast<int32_t*>(address(ref)); };
  auto cols = [&](const TensorRef& ref) { return graph.tensors[static_cast<size_t>(ref.tensor)].cols; };

  auto upload = [&](int32_t tensor, const std::vector<int32_t>& values) {
    if (!values.empty())
      MOSAIC_CUDA_CHECK(cudaMemcpyAsync(i32({tensor, 0}), values.data(), values.size() * 4,
                                        cudaMemcpyHostToDevice, stream));
  };
  // Ids: copied on the device from each resident canvas, uploaded for the other sequences.
  if (io.canvases.empty()) {
    upload(graph.ids, batch.ids);
  } else {
    MOSAIC_ASSERT(static_cast<int64_t>(io.canvases.size()) == batch.sequences(), "one canvas slot per sequence");
    int32_t* ids = i32({graph.ids, 0});
    for (int64_t s = 0; s < batch.sequences(); ++s) {
      const int64_t begin = batch.offsets[s], bytes = (batch.offsets[s + 1] - begin) * 4;
      if (io.canvases[s] != nullptr)  // the computed positions of the canvas
        MOSAIC_CUDA_CHECK(cudaMemcpyAsync(ids + begin, io.canvases[s] + batch.canvas_begin[s], bytes,
                                          cudaMemcpyDeviceToDevice, stream));
      else
        MOSAIC_CUDA_CHECK(cudaMemcpyAsync(ids + begin, batch.ids.data() + begin, bytes, cudaMemcpyHostToDevice, stream));
    }
  }
  upload(graph.positions, batch.positions);
  upload(graph.logit_rows, batch.logit_rows);
  int32_t* device_kv_pages = nullptr;
  if (graph.cached()) {
    upload(graph.kv_rows, batch.kv_rows);
    device_kv_pages = static_cast<int32_t*>(x.kv_pages.fit(std::max<size_t>(graph.kv_pages.size(), 1) * 4));
    if (!graph.kv_pages.empty())
      MOSAIC_CUDA_CHECK(cudaMemcpyAsync(device_kv_pages, graph.kv_pages.data(), graph.kv_pages.size() * 4,
                                        cudaMemcpyHostToDevice, stream));
  }
  // The attention ops split at a tail (profiled steps run every op on its own): their two parts'
  // segments go to the device after the graph's, head part first; split_at[i] is the head part's
  // index there, 0 where op i runs whole (the graph's own segments come first, so a split's index
  // is never 0).
  std::vector<AttentionSegment> all_segments = graph.segments;
  std::vector<size_t> split_at(graph.ops.size(), 0);
  if (x.tail_overlap && !x.profile.enabled()) {
    for (size_t i = 0; i < graph.ops.size(); ++i) {
      const std::optional<AttentionTailSplit> split = attention_tail_split(graph, i);
      if (!split) continue;
      split_at[i] = all_segments.size();
      all_segments.push_back(split->head);
      all_segments.push_back(split->tail);
    }
  }
  auto* segments = static_cast<AttentionSegment*>(x.segments.fit(all_segments.size() * sizeof(AttentionSegment)));
  if (!all_segments.empty())
    MOSAIC_CUDA_CHECK(cudaMemcpyAsync(segments, all_segments.data(), all_segments.size() * sizeof(AttentionSegment),
                                      cudaMemcpyHostToDevice, stream));
  HeadRowSampling* device_sampling = nullptr;
  if (!sampling.empty()) {
    device_sampling = static_cast<HeadRowSampling*>(x.sampling.fit(sampling.size_bytes()));
    MOSAIC_CUDA_CHECK(cudaMemcpyAsync(device_sampling, sampling.data(), sampling.size_bytes(),
                                      cudaMemcpyHostToDevice, stream));
  }

  // The commit's buffers are sized and its sequences uploaded with the other inputs: an
  // allocation or a copy from pageable memory after the forward's launches would wait for it.
  const GraphTensor& output = graph.tensors[static_cast<size_t>(graph.output)];
  cuda::CommitSequence* commit_sequences = nullptr;
  CommittedRow* committed = nullptr;
  if (!io.commits.empty()) {
    MOSAIC_ASSERT(device_sampling != nullptr && output.cols == kHeadStatCount && output.dtype == DType::f32,
                  "the device commit reads the fused head's statistics and the rows' sampling");
    commit_sequences = static_cast<cuda::CommitSequence*>(x.commit_sequences.fit(io.commits.size_bytes()));
    committed = static_cast<CommittedRow*>(x.committed.fit(static_cast<size_t>(output.rows) * sizeof(CommittedRow)));
    MOSAIC_CUDA_CHECK(cudaMemcpyAsync(commit_sequences, io.commits.data(), io.commits.size_bytes(),
                                      cudaMemcpyHostToDevice, stream));
  }

  const auto rope_precision = c.family == Family::llada ? cuda::RopePrecision::fp32 : cuda::RopePrecision::bf16_tables;
  const float eps = static_cast<float>(c.rms_eps);

  // A streamed layer's staged weights are waited for once, before its first product; `copied`
  // holds the layers whose copy this enqueue started, so that the step's stream joins every copy
  // (a capture must end with the copy stream joined) even where no product ran.
  std::set<int32_t> arrived, copied;
  auto staged_weight = [&](const GraphOp& op, cudaStream_t on) -> const void* {
    const auto streamed = x.streamed.find(op.layer);
    MOSAIC_ASSERT(streamed != x.streamed.end(), "layer {} is staged but not streamed by this executor", op.layer);
    if (arrived.insert(op.layer).second) MOSAIC_CUDA_CHECK(cudaStreamWaitEvent(on, streamed->second.arrived));
    return static_cast<const std::byte*>(address(op.staged)) + streamed->second.layout.find(op.weight).offset;
  };
  // A linear op's rows [first, first + rows) (out = a W^T, or out += with op.accumulate).
  auto run_linear = [&](const GraphOp& op, int64_t first, int64_t rows) {
    const WeightView& view = weight_of(w, op.layer, op.weight);
    cuda::GemmArgs args;
    args.m = rows, args.n = view.shape[0], args.k = view.shape[1];
    args.a = address({op.a.tensor, op.a.row + first}), args.lda = cols(op.a);
    args.b = op.staged.valid() ? staged_weight(op, stream) : x.on_device(view), args.ldb = view.shape[1];
    args.c = address({op.out.tensor, op.out.row + first}), args.ldc = cols(op.out);
    args.c_dtype = graph.tensors[static_cast<size_t>(op.out.tensor)].dtype;  // bf16; fp32 router logits
    if (op.has_bias) args.bias = x.on_device(weight_of(w, op.layer, bias_role_of(op.weight)));
    args.accumulate = op.accumulate;
    x.gemm.run(args, stream);
  };
  // An attention op over `count` segments from device_segments (the op's own, or a part of it).
  auto run_attention = [&](const GraphOp& op, const AttentionSegment* device_segments,
                           std::span<const AttentionSegment> host_segments, cudaStream_t on) {
    cuda::AttentionArgs args;
    args.q = address(op.a), args.q_stride = cols(op.a);
    args.k = address(op.b), args.k_stride = cols(op.b);
    args.v = address(op.c), args.v_stride = cols(op.c);
    args.out = address(op.out), args.out_stride = cols(op.out);
    args.q_heads = c.heads, args.kv_heads = c.kv_heads, args.head_dim = c.head_dim;
    args.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    args.segments = device_segments, args.segment_count = static_cast<int64_t>(host_segments.size());
    cuda::summarize_segments(args, host_segments);
    if (graph.cached()) args.kv_pages = device_kv_pages, args.page_rows = graph.kv_page_rows;
    cuda::attention(args, on);
  };
  // A split attention op and its o-projection (exec/attention_tail_split.h): the head part on the
  // step's stream, the tail part on the tail stream once everything before the op is done, the
  // head rows' projection after the head part, the tail rows' after both.
  auto run_split_attention = [&](size_t index) {
    const GraphOp& op = graph.ops[index];
    const GraphOp& projection = graph.ops[index + 1];
    const size_t head = split_at[index];
    const int64_t head_rows = all_segments[head].q_count, tail_rows = all_segments[head + 1].q_count;
    MOSAIC_CUDA_CHECK(cudaEventRecord(x.tail_fork, stream));
    run_attention(op, segments + head, std::span(all_segments).subspan(head, 1), stream);
    MOSAIC_CUDA_CHECK(cudaStreamWaitEvent(x.tail_stream, x.tail_fork));
    run_attention(op, segments + head + 1, std::span(all_segments).subspan(head + 1, 1), x.tail_stream);
    MOSAIC_CUDA_CHECK(cudaEventRecord(x.tail_join, x.tail_stream));
    run_linear(projection, 0, head_rows);
    MOSAIC_CUDA_CHECK(cudaStreamWaitEvent(stream, x.tail_join));
    run_linear(projection, head_rows, tail_rows);
  };

  // fused_gate_up[i]: where ops i .. i + 2 (a layer's gate product, up product and SwiGLU) run as
  // one fused product, its arguments (SwiGLU's output is the gate product's tensor).
  std::vector<std::optional<cuda::GateUpSwigluArgs>> fused_gate_up(graph.ops.size());
  if (x.fuse_gate_up && cuda::gate_up_swiglu_available()) {
    for (size_t i = 0; i < graph.ops.size(); ++i) {
      if (!is_gate_up_swiglu(graph, i)) continue;
      const GraphOp& gate = graph.ops[i];
      if (gate.staged.valid()) continue;  // a streamed layer's weights are not resident
      const WeightView& gate_weight = weight_of(w, gate.layer, WeightRole::gate);
      const WeightView& up_weight = weight_of(w, gate.layer, WeightRole::up);
      if (up_weight.shape != gate_weight.shape) continue;
      cuda::GateUpSwigluArgs args;
      args.m = gate.rows, args.f = gate_weight.shape[0], args.k = gate_weight.shape[1];
      args.x = address(gate.a), args.x_stride = cols(gate.a);
      args.gate = x.on_device(gate_weight), args.up = x.on_device(up_weight), args.weight_stride = args.k;
      args.out = address(gate.out), args.out_stride = cols(gate.out);
      if (cuda::gate_up_swiglu_shape_fits(args)) fused_gate_up[i] = args;
    }
  }

  // No row samples with noise: the LM head folds its logits with its greedy kernel.
  const bool all_greedy = std::all_of(sampling.begin(), sampling.end(),
                                      [](const HeadRowSampling& row) { return row.choice_inv_temperature == 0.0; });

  // The forward's launches, op by op. Everything they read on the host is in the signature
  // below; what they read on the device was uploaded above.
  auto enqueue_forward = [&] {
    arrived.clear(), copied.clear();  // each enqueue (a capture that fell back launches again) waits anew
    x.host_rows.begin();
    for (size_t index = 0; index < graph.ops.size(); ++index) {
      const GraphOp& op = graph.ops[index];
      if (op.rows == 0) continue;
      // Staged rows of the residual stream (the visit's first op, its norm, names them first).
      if (op.kind != OpKind::stage_rows)
        for (const TensorRef* ref : {&op.out, &op.a, &op.b, &op.c})
          if (ref->valid() && graph.tensors[static_cast<size_t>(ref->tensor)].role == TensorRole::residual_rows)
            x.host_rows.wait_for(ref->tensor, stream);
      if (split_at[index] != 0) {
        run_split_attention(index);
        ++index;  // the o-projection ran with it
        continue;
      }
      if (fused_gate_up[index]) {
        cuda::gate_up_swiglu(*fused_gate_up[index], stream);
        index += 2;  // the up product and SwiGLU ran with it
        if (x.profile.enabled()) x.profile.mark("gate_up_swiglu", stream);
        continue;
      }
      switch (op.kind) {
        case OpKind::embed:
          cuda::embedding_gather(op.rows, c.hidden, i32(op.a), x.on_device(w.embedding), DType::bf16,
                                 address(op.out), cols(op.out), stream);
          break;
        case OpKind::rms_norm:
          cuda::rms_norm(op.rows, c.hidden, address(op.a), cols(op.a),
                         op.index.valid() ? i32(op.index) : nullptr, x.on_device(weight_of(w, op.layer, op.weight)),
                         eps, address(op.out), cols(op.out), stream);
          break;
        case OpKind::linear:
          run_linear(op, 0, op.rows);
          break;
        case OpKind::rope:
          cuda::rope(op.rows, cols(op.out) / c.head_dim, c.rotary(), address(op.out), cols(op.out), i32(op.b),
                     c.rope_theta, rope_precision, stream, c.head_dim);
          break;
        case OpKind::attention: {
          run_attention(op, segments + op.segment_begin,
                        std::span(graph.segments).subspan(static_cast<size_t>(op.segment_begin),
                                                          static_cast<size_t>(op.segment_count)),
                        stream);
          break;
        }
        case OpKind::gather_rows: {
          const GraphTensor& from = graph.tensors[static_cast<size_t>(op.a.tensor)];
          const GraphTensor& to = graph.tensors[static_cast<size_t>(op.out.tensor)];
          cuda::gather_rows(op.rows, static_cast<int64_t>(to.row_bytes()), address(op.a),
                            static_cast<int64_t>(from.row_bytes()), i32(op.index), address(op.out),
                            static_cast<int64_t>(to.row_bytes()), stream);
          break;
        }
        case OpKind::scatter_rows: {
          const GraphTensor& from = graph.tensors[static_cast<size_t>(op.a.tensor)];
          const GraphTensor& to = graph.tensors[static_cast<size_t>(op.out.tensor)];
          cuda::scatter_rows(op.rows, static_cast<int64_t>(from.row_bytes()), address(op.a),
                             static_cast<int64_t>(from.row_bytes()), i32(op.index), address(op.out),
                             static_cast<int64_t>(to.row_bytes()), stream);
          break;
        }
        case OpKind::swiglu:
          cuda::swiglu(op.rows, cols(op.out), address(op.out), cols(op.out), address(op.b), cols(op.b), stream);
          break;
        case OpKind::lm_head: {
          cuda::GemmArgs args;
          args.m = op.rows, args.n = c.vocab, args.k = c.hidden;
          args.a = address(op.a), args.lda = cols(op.a);
          args.b = x.on_device(w.lm_head), args.ldb = c.hidden;
          args.c = address(op.out), args.ldc = cols(op.out), args.c_dtype = DType::f32;
          x.gemm.run(args, stream);
          break;
        }
        case OpKind::head_norm:  // rows x heads norms of head_dim (contiguous heads)
          cuda::rms_norm(op.rows * (cols(op.out) / c.head_dim), c.head_dim, address(op.out), c.head_dim, nullptr,
                         x.on_device(weight_of(w, op.layer, op.weight)), eps, address(op.out), c.head_dim, stream);
          break;
        case OpKind::moe_route:
          cuda::moe_route(op.rows, c.experts, c.experts_per_token, address(op.a), cols(op.a), i32(op.out),
                          static_cast<float*>(address(op.out2)), stream);
          break;
        case OpKind::moe_route_grouped: {
          cuda::GroupedRouteArgs args;
          args.rows = op.rows, args.experts = c.experts, args.k = c.experts_per_token;
          args.groups = c.router_groups, args.top_groups = c.router_top_groups;
          args.scaling = static_cast<float>(c.routed_scaling);
          args.logits = static_cast<const float*>(address(op.a)), args.logits_stride = cols(op.a);
          args.bias = x.router_bias(op.layer);
          args.route_experts = i32(op.out), args.route_weights = static_cast<float*>(address(op.out2));
          cuda::moe_route_grouped(args, stream);
          break;
        }
        case OpKind::moe_permute:
          cuda::moe_permute(op.rows, c.experts, c.experts_per_token, i32(op.a), i32(op.out), i32(op.out2), stream);
          x.profile.count_experts(i32(op.out), c.experts, stream);
          break;
        case OpKind::expert_linear: {
          const WeightView& first = expert_weight_of(w, op.layer, op.weight, 0);
          cuda::ExpertGemmArgs args;
          args.max_rows = op.rows, args.n = first.shape[0], args.k = first.shape[1], args.experts = c.experts;
          args.max_rows_per_expert = op.rows / c.experts_per_token;  // each row takes an expert at most once
          args.a = address(op.a), args.lda = cols(op.a);
          args.weights = x.expert_table(op.layer, op.weight);
          args.offsets = i32(op.index);
          args.out = address(op.out), args.ldc = cols(op.out);
          cuda::expert_gemm(args, stream);
          break;
        }
        case OpKind::stage_weights: {
          const auto streamed = x.streamed.find(op.layer);
          MOSAIC_ASSERT(streamed != x.streamed.end() && graph.staged_weight_bytes == 2 &&
                            graph.tensors[static_cast<size_t>(op.out.tensor)].bytes() == streamed->second.layout.bytes,
                        "layer {} is staged as this executor does not stream it", op.layer);
          // The copy waits for the step's stream to reach this op: the staged tensor's slot is then
          // free of its earlier tenants. The layer's first product waits for `arrived`.
          MOSAIC_CUDA_CHECK(cudaEventRecord(streamed->second.slot_free, stream));
          MOSAIC_CUDA_CHECK(cudaStreamWaitEvent(x.copy_stream, streamed->second.slot_free));
          MOSAIC_CUDA_CHECK(cudaMemcpyAsync(address(op.out), streamed->second.host, streamed->second.layout.bytes,
                                            cudaMemcpyHostToDevice, x.copy_stream));
          MOSAIC_CUDA_CHECK(cudaEventRecord(streamed->second.arrived, x.copy_stream));
          copied.insert(op.layer);
          break;
        }
        case OpKind::stage_rows:
          x.host_rows.stage(op.out.tensor, address(op.out), address(op.a),
                            static_cast<size_t>(op.rows) * graph.tensors[static_cast<size_t>(op.a.tensor)].row_bytes(),
                            stream);
          break;
        case OpKind::unstage_rows:
          CudaHostRows::unstage(address(op.out), address(op.a),
                                static_cast<size_t>(op.rows) * graph.tensors[static_cast<size_t>(op.a.tensor)].row_bytes(),
                                stream);
          break;
        case OpKind::all_reduce:
        case OpKind::combine_head_stats:
        case OpKind::all_gather_rows:
          // make_step_runner refuses --tensor-parallel / --context-parallel on CUDA before any graph.
          MOSAIC_ASSERT(false, "the CUDA executor runs one device; {} joins ranks",
                        op_kind_name(op.kind));
          break;
        case OpKind::moe_combine:
          cuda::moe_combine(op.rows, c.hidden, c.experts_per_token, address(op.out), cols(op.out), address(op.a),
                            cols(op.a), static_cast<const float*>(address(op.b)), i32(op.index), stream);
          break;
        case OpKind::lm_head_stats: {
          MOSAIC_ASSERT(op.scratch.valid(), "the CUDA fused head needs its scratch tensor (head_scratch_per_row)");
          cuda::LmHeadArgs args;
          args.rows = op.rows, args.hidden = c.hidden, args.vocab = c.vocab;
          args.h = address(op.a), args.h_stride = cols(op.a);
          args.weight = x.on_device(w.lm_head);
          args.sampling = device_sampling ? device_sampling + op.out.row : nullptr;
          args.out = static_cast<float*>(address(op.out)), args.out_stride = cols(op.out);
          args.scratch = address(op.scratch);
          // Chosen from the step's candidate count, not from this op's rows: row chunks of one step
          // must take the same path to give the same bits.
          args.gemm = output.rows >= kHeadRowsThroughGemm ? &x.gemm : nullptr;
          args.all_greedy = all_greedy;
          cuda::lm_head_sample(args, stream);
          break;
        }
      }
      if (x.profile.enabled()) {
        std::string label(op_kind_name(op.kind));
        if (op.kind == OpKind::linear) label += fmt::format(" {}", weight_role_name(op.weight));
        x.profile.mark(label, stream);
      }
    }
    for (const int32_t layer : copied)
      if (!arrived.contains(layer)) MOSAIC_CUDA_CHECK(cudaStreamWaitEvent(stream, x.streamed.at(layer).arrived));
  };
  if (x.profile.enabled()) {  // events between the ops: launched directly
    x.profile.begin(stream);
    enqueue_forward();
  } else if (!x.graphs.enabled()) {  // MOSAIC_CUDA_GRAPHS=0: no signature to build
    enqueue_forward();
  } else {
    x.graphs.run(launch_signature(graph, address, segments, device_sampling, device_kv_pages, all_greedy), stream,
                 enqueue_forward, io.shape_repeats);
  }
  CudaStepResult result;
  if (committed != nullptr) {
    cuda::CommitArgs args;
    args.stats = static_cast<const float*>(address({graph.output, 0})), args.stats_stride = output.cols;
    args.sampling = device_sampling;
    args.sequences = commit_sequences, args.sequence_count = static_cast<int64_t>(io.commits.size());
    args.out = committed;
    cuda::commit_rows(args, stream);
    result.committed.resize(static_cast<size_t>(output.rows));
  }
  x.launch_end = std::chrono::steady_clock::now();
  if (io.copy_output) {
    result.values.resize(static_cast<size_t>(output.rows * output.cols));
    MOSAIC_CUDA_CHECK(cudaMemcpyAsync(result.values.data(), address({graph.output, 0}),
                                      result.values.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  }
  if (committed != nullptr)
    MOSAIC_CUDA_CHECK(cudaMemcpyAsync(result.committed.data(), committed, result.committed.size() * sizeof(CommittedRow),
                                      cudaMemcpyDeviceToHost, stream));
  MOSAIC_CUDA_CHECK(cudaEventRecord(x.span_end, stream));
  MOSAIC_CUDA_CHECK(cudaStreamSynchronize(stream));
  float span_ms = 0;
  MOSAIC_CUDA_CHECK(cudaEventElapsedTime(&span_ms, x.span_begin, x.span_end));
  result.device_seconds = span_ms * 1e-3;
  x.profile.report();
  return result;
}

}  // namespace mosaic
