#include "exec/direct_forward.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/attention.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/moe.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "exec/moe_routing.h"

namespace mosaic {
namespace {

std::vector<float> to_f32(const WeightView& weight) {
  if (!weight) return {};
  int64_t count = 1;
  for (int64_t extent : weight.shape) count *= extent;
  std::vector<float> out(static_cast<size_t>(count));
  cpu::convert_to_f32(count, weight.data, weight.dtype, out.data());
  return out;
}

// y[rows, out] = x[rows, in] W^T (+ bias), W being [out, in].
void linear(int64_t rows, const float* x, int64_t in, const WeightView& weight,
            const std::vector<float>& bias, float* y, const int32_t* x_rows = nullptr) {
  cpu::GemmArgs args;
  args.m = rows;
  args.n = weight.shape[0];
  args.k = in;
  args.a = x;
  args.lda = in;
  args.a_rows = x_rows;
  args.b = weight.data;
  args.b_dtype = weight.dtype;
  args.ldb = in;
  args.c = y;
  args.ldc = args.n;
  args.bias = bias.empty() ? nullptr : bias.data();
  cpu::gemm_nt(args);
}

}  // namespace

std::vector<float> direct_forward(const Model& model, const PackedBatch& packed) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const int64_t T = packed.tokens();
  const auto sz = [](int64_t a, int64_t b) { return static_cast<size_t>(a * b); };

  std::vector<float> x(sz(T, c.hidden)), normed(sz(T, c.hidden)), projected(sz(T, c.hidden));
  std::vector<float> q(sz(T, c.q_dim())), k(sz(T, c.kv_dim())), v(sz(T, c.kv_dim()));
  const int64_t dense_width = std::max(c.ffn, c.shared_expert_ffn);
  std::vector<float> attended(sz(T, c.q_dim())), gate(sz(T, dense_width)), up(sz(T, dense_width));
  const int64_t K = c.experts_per_token;
  std::vector<float> router(sz(T, c.experts)), route_weights(sz(T, K));
  std::vector<int32_t> route_experts(sz(T, K)), own_slots(static_cast<size_t>(K));
  std::vector<float> expert_gate(static_cast<size_t>(c.expert_ffn)), expert_up(static_cast<size_t>(c.expert_ffn));
  std::vector<float> expert_out(sz(K, c.hidden));
  for (int64_t j = 0; j < K; ++j) own_slots[static_cast<size_t>(j)] = static_cast<int32_t>(j);
  const std::vector<float> inv_freq = cpu::rope_inv_freq(c.rotary(), c.rope_theta);
  const float eps = static_cast<float>(c.rms_eps);

  std::vector<cpu::AttentionSegment> segments;
  for (int64_t s = 0; s < packed.sequences(); ++s) {
    const int64_t begin = packed.offsets[s], count = packed.offsets[s + 1] - begin;
    segments.push_back({begin, count, begin, count});
  }

  cpu::embedding_gather(T, c.hidden, packed.ids.data(), w.embedding.data, w.embedding.dtype,
                        x.data(), c.hidden);
  for (int32_t l = 0; l < static_cast<int32_t>(w.layers.size()); ++l) {
    const LayerWeights& layer = w.layers[static_cast<size_t>(l)];
    cpu::rms_norm(T, c.hidden, x.data(), c.hidden, to_f32(layer.attn_norm).data(), eps,
                  normed.data(), c.hidden);
    linear(T, normed.data(), c.hidden, layer.q, to_f32(layer.q_bias), q.data());
    linear(T, normed.data(), c.hidden, layer.k, to_f32(layer.k_bias), k.data());
    linear(T, normed.data(), c.hidden, layer.v, to_f32(layer.v_bias), v.data());
    if (c.qk_norm) {  // every head's head_dim values: rows x heads norms
      cpu::rms_norm(T * c.heads, c.head_dim, q.data(), c.head_dim, to_f32(layer.q_norm).data(), eps, q.data(),
                    c.head_dim);
      cpu::rms_norm(T * c.kv_heads, c.head_dim, k.data(), c.head_dim, to_f32(layer.k_norm).data(), eps, k.data(),
                    c.head_dim);
    }
    cpu::rope_apply(T, c.heads, c.rotary(), q.data(), c.q_dim(), packed.positions.data(), inv_freq.data(),
                    c.head_dim);
    cpu::rope_apply(T, c.kv_heads, c.rotary(), k.data(), c.kv_dim(), packed.positions.data(), inv_freq.data(),
                    c.head_dim);
    cpu::AttentionArgs attention;
    attention.q = q.data(), attention.q_stride = c.q_dim();
    attention.k = k.data(), attention.k_stride = c.kv_dim();
    attention.v = v.data(), attention.v_stride = c.kv_dim();
    attention.out = attended.data(), attention.out_stride = c.q_dim();
    attention.q_heads = c.heads, attention.kv_heads = c.kv_heads, attention.head_dim = c.head_dim;
    attention.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    attention.segments = segments;
    cpu::attention(attention);
    linear(T, attended.data(), c.q_dim(), layer.o, {}, projected.data());
    cpu::add_inplace(T, c.hidden, x.data(), c.hidden, projected.data(), c.hidden);

    cpu::rms_norm(T, c.hidden, x.data(), c.hidden, to_f32(layer.ffn_norm).data(), eps,
                  normed.data(), c.hidden);
    // The dense SwiGLU: the FFN of a dense layer, the shared expert of an expert layer.
    const auto dense_swiglu = [&](int64_t width) {
      linear(T, normed.data(), c.hidden, layer.gate, {}, gate.data());
      linear(T, normed.data(), c.hidden, layer.up, {}, up.data());
      cpu::swiglu(T, width, gate.data(), width, up.data(), width);
      linear(T, gate.data(), width, layer.down, {}, projected.data());
      cpu::add_inplace(T, c.hidden, x.data(), c.hidden, projected.data(), c.hidden);
    };
    if (c.moe_layer(l)) {
      if (c.shared_expert_ffn > 0) dense_swiglu(c.shared_expert_ffn);
      linear(T, normed.data(), c.hidden, layer.router, {}, router.data());
      if (c.router == RouterKind::sigmoid_grouped)
        cpu::moe_route_grouped(T, grouped_routing(c), router.data(), c.experts, to_f32(layer.router_bias).data(),
                               route_experts.data(), route_weights.data());
      else
        cpu::moe_route(T, c.experts, K, router.data(), c.experts, route_experts.data(), route_weights.data());
      for (int64_t t = 0; t < T; ++t) {
        const float* row = normed.data() + t * c.hidden;
        for (int64_t j = 0; j < K; ++j) {
          const ExpertWeights& expert = layer.experts.at(static_cast<size_t>(route_experts[static_cast<size_t>(t * K + j)]));
          linear(1, row, c.hidden, expert.gate, {}, expert_gate.data());
          linear(1, row, c.hidden, expert.up, {}, expert_up.data());
          cpu::swiglu(1, c.expert_ffn, expert_gate.data(), c.expert_ffn, expert_up.data(), c.expert_ffn);
          linear(1, expert_gate.data(), c.expert_ffn, expert.down, {}, expert_out.data() + j * c.hidden);
        }
        cpu::moe_combine(1, c.hidden, K, x.data() + t * c.hidden, c.hidden, expert_out.data(), c.hidden,
                         route_weights.data() + t * K, own_slots.data());
      }
      continue;
    }
    dense_swiglu(c.ffn);
  }

  // Mask-only head: the final norm and the LM head see only the rows whose logits were asked for.
  const int64_t R = static_cast<int64_t>(packed.logit_rows.size());
  std::vector<float> head_in(sz(R, c.hidden)), logits(sz(R, c.vocab));
  const std::vector<float> final_norm = to_f32(w.final_norm);
  for (int64_t r = 0; r < R; ++r)
    cpu::rms_norm(1, c.hidden, x.data() + packed.logit_rows[r] * c.hidden, c.hidden,
                  final_norm.data(), eps, head_in.data() + r * c.hidden, c.hidden);
  if (R > 0) linear(R, head_in.data(), c.hidden, w.lm_head, {}, logits.data());
  return logits;
}

}  // namespace mosaic
