#!/usr/bin/python3
"""Self-test of the LLaDA 2.x NumPy reference (llada2_np.py; no Mosaic needed): the forward
against an explicit per-row loop version, the block-causal mask, partial RoPE, the
group-limited router, the dense first layer and the shared expert, folders written with
safetensors_np (sharded, expert_bias in float64, refusals), the LLaDA2.0 commit rule and
block loop on hand-made probability tables, the LLaDA2.1 editing loop likewise, generation
on a tiny model against a hand loop over the naive forward; and the plumbing of
check_llada2_forward.py / check_llada2_generate.py against fake_llada2_mosaic.py.

Tiny random checkpoints are made here in NumPy (tiny_config / tiny_tensors, also used by
the fake CLI).

Run: /usr/bin/python3 tests/reference/test_llada2_reference_self.py    (exit 0 = all pass)
"""

import contextlib
import io
import math
import os
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llada2_np as l2  # noqa: E402
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------------------------------
# Tiny random checkpoints (the real HF keys and names, moe-models.md §2.1 / §2.2)
# ----------------------------------------------------------------------------------------

def tiny_config(layers=2, hidden=32, heads=4, kv_heads=2, experts=8, experts_per_token=2,
                expert_ffn=16, ffn=48, groups=4, topk_groups=2, shared=1, dense=1,
                vocab=64, rope_theta=600000.0, eps=1e-6, rotary=0.5, scaling=2.5,
                tied=False, mask=None, eos=None):
    """config.json dict of a tiny LLaDA2MoeModelLM (no use_qk_norm key: the default true)."""
    config = {"architectures": [l2.ARCHITECTURE], "model_type": "llada2_moe",
              "hidden_size": hidden, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": kv_heads,
              "head_dim": hidden // heads, "intermediate_size": ffn,
              "moe_intermediate_size": expert_ffn, "num_experts": experts,
              "num_experts_per_tok": experts_per_token, "num_shared_experts": shared,
              "n_group": groups, "topk_group": topk_groups,
              "routed_scaling_factor": scaling, "first_k_dense_replace": dense,
              "norm_topk_prob": True, "score_function": "sigmoid",
              "moe_router_enable_expert_bias": True, "router_dtype": "fp32",
              "rope_theta": rope_theta, "partial_rotary_factor": rotary,
              "rope_scaling": None, "rms_norm_eps": eps, "use_qkv_bias": False,
              "use_bias": False, "norm_head": False, "tie_word_embeddings": tied,
              "hidden_act": "silu", "vocab_size": vocab, "max_position_embeddings": 4096,
              "use_sliding_window": False, "sliding_window": 4096,
              "pad_token_id": vocab - 2 if eos is None else eos,
              "mask_token_id": vocab - 1 if mask is None else mask,
              "eos_token_id": vocab - 2 if eos is None else eos,
              "torch_dtype": "bfloat16"}
    return config


def tiny_tensors(config, seed=0):
    """Random float32 tensors for a LLaDA 2.x `config`, scaled so activations stay O(1):
    router logits ~ N(0, 1), expert_bias ~ N(0, 0.1) (it moves some choices), norms
    around 1 (so a wrong norm weight changes the numbers)."""
    rng = np.random.default_rng(seed)
    hp = l2.hparams_from_config(config)
    embed = l2.tensor_names(hp)["embed"]
    tensors = {}
    for name, shape in l2.expected_shapes(hp).items():
        if name.endswith("expert_bias"):
            tensors[name] = (0.1 * rng.standard_normal(shape)).astype(np.float32)
        elif len(shape) == 1:
            tensors[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        elif name == embed:
            tensors[name] = rng.standard_normal(shape).astype(np.float32)
        else:
            tensors[name] = (rng.standard_normal(shape) / np.sqrt(shape[1])).astype(np.float32)
    return tensors


def tiny_model(seed=0, **kwargs):
    """(config, tensors) of a random tiny LLaDA 2.x; kwargs as tiny_config."""
    config = tiny_config(**kwargs)
    return config, tiny_tensors(config, seed)


def rel_err(a, b):
    """max |a - b| / max |b|."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


# ----------------------------------------------------------------------------------------
# An explicit per-row loop forward, written apart from llada2_np
# ----------------------------------------------------------------------------------------

def naive_forward(config, tensors, ids, block_length=None):
    """Loop-by-loop LLaDA 2.x logits of every row: literal HF names, per-position / per-head
    / per-group / per-expert loops, routing by Python's sorted() on (-score, index); float64
    except the float32 RoPE angles (as the PyTorch reference builds them)."""
    H, nq, nkv = (config["hidden_size"], config["num_attention_heads"],
                  config["num_key_value_heads"])
    d = H // nq
    rd = int(d * config["partial_rotary_factor"])
    E, K = config["num_experts"], config["num_experts_per_tok"]
    G, TG = config["n_group"], config["topk_group"]
    eps, theta = config["rms_norm_eps"], config["rope_theta"]
    W = {k: v.astype(np.float64) for k, v in tensors.items()}
    L = len(ids)

    def norm(x, w):
        return x / math.sqrt(float(np.dot(x, x)) / len(x) + eps) * w

    def rope(vec, pos):
        out = vec.copy()
        for j in range(rd // 2):
            inv = np.float32(1.0) / (np.float32(theta) ** (np.float32(2 * j) / np.float32(rd)))
            angle = float(np.float32(pos) * inv)
            c, s = math.cos(angle), math.sin(angle)
            out[j] = vec[j] * c - vec[j + rd // 2] * s
            out[j + rd // 2] = vec[j + rd // 2] * c + vec[j] * s
        return out                                  # channels >= rd untouched

    def mlp(x, prefix):
        g = W[prefix + "gate_proj.weight"] @ x
        u = W[prefix + "up_proj.weight"] @ x
        return W[prefix + "down_proj.weight"] @ (g / (1 + np.exp(-g)) * u)

    def visible(i):
        if block_length is None:
            return range(L)
        return range(min(L, (i // block_length + 1) * block_length))

    h = [W["model.word_embeddings.weight"][t].copy() for t in ids]
    for li in range(config["num_hidden_layers"]):
        p = f"model.layers.{li}."
        Q, Kh, V = [], [], []
        for pos in range(L):
            qkv = W[p + "attention.query_key_value.weight"] @ norm(
                h[pos], W[p + "input_layernorm.weight"])
            qn, kn = W[p + "attention.query_layernorm.weight"], \
                W[p + "attention.key_layernorm.weight"]
            Q.append([rope(norm(qkv[a * d:(a + 1) * d], qn), pos) for a in range(nq)])
            Kh.append([rope(norm(qkv[(nq + b) * d:(nq + b + 1) * d], kn), pos)
                       for b in range(nkv)])
            V.append([qkv[(nq + nkv + b) * d:(nq + nkv + b + 1) * d] for b in range(nkv)])
        new_h = []
        for i in range(L):
            att = np.zeros(nq * d)
            for a in range(nq):
                b = a // (nq // nkv)
                keys = list(visible(i))
                scores = [float(np.dot(Q[i][a], Kh[j][b])) / math.sqrt(d) for j in keys]
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                for j, w in zip(keys, e):
                    att[a * d:(a + 1) * d] += w / sum(e) * V[j][b]
            hi = h[i] + W[p + "attention.dense.weight"] @ att
            m = norm(hi, W[p + "post_attention_layernorm.weight"])
            if li < config["first_k_dense_replace"]:
                new_h.append(hi + mlp(m, p + "mlp."))
                continue
            s = [1 / (1 + math.exp(-v)) for v in W[p + "mlp.gate.weight"] @ m]
            sel = [s[e] + W[p + "mlp.gate.expert_bias"][e] for e in range(E)]
            size = E // G
            gscore = [sum(sorted(sel[g * size:(g + 1) * size], reverse=True)[:2])
                      for g in range(G)]
            kept = sorted(range(G), key=lambda g: (-gscore[g], g))[:TG]
            cands = [e for g in kept for e in range(g * size, (g + 1) * size)]
            chosen = sorted(cands, key=lambda e: (-sel[e], e))[:K]
            total = sum(s[e] for e in chosen)
            y = np.zeros(H)
            for e in sorted(chosen):
                w = s[e] / (total + 1e-20) if K > 1 else s[e]
                y += w * config["routed_scaling_factor"] * mlp(m, p + f"mlp.experts.{e}.")
            if config.get("num_shared_experts"):
                y += mlp(m, p + "mlp.shared_experts.")
            new_h.append(hi + y)
        h = new_h
    head = W["model.word_embeddings.weight"] if config["tie_word_embeddings"] \
        else W["lm_head.weight"]
    return np.array([head @ norm(x, W["model.norm.weight"]) for x in h])


class ForwardTest(unittest.TestCase):
    def test_matches_loop_implementation(self):
        """Vectorised forward == naive loops: GQA 4/2, dense layer 0, 2 MoE layers, 4 groups
        keep 2, shared expert; block-causal B 3 on L 7 (a partial last block) and full."""
        config, tensors = tiny_model(seed=1, layers=3, hidden=16, heads=4, kv_heads=2,
                                     experts=8, experts_per_token=3, expert_ffn=8, ffn=20,
                                     vocab=24)
        model = l2.build_model(config, tensors)
        ids = [3, 17, 0, 9, 9, 5, 22]
        for B in (3, None):
            with self.subTest(block_length=B):
                self.assertGreater(l2.min_routing_margin(model, ids, B), 1e-4)
                got = l2.forward(model, ids, range(7), B)
                self.assertLess(rel_err(got, naive_forward(config, tensors, ids, B)), 1e-12)

    def test_loop_implementation_other_shapes(self):
        """The same with one group (plain top-k), k = 1 (no renormalisation), no shared
        expert, no dense layer, tied embeddings, MQA, block 2."""
        config, tensors = tiny_model(seed=2, layers=2, hidden=16, heads=2, kv_heads=1,
                                     experts=4, experts_per_token=1, groups=1,
                                     topk_groups=1, shared=0, dense=0, vocab=20, tied=True)
        model = l2.build_model(config, tensors)
        ids = [1, 4, 19, 7, 2]
        self.assertGreater(l2.min_routing_margin(model, ids, 2), 1e-4)
        self.assertLess(rel_err(l2.forward(model, ids, range(5), 2),
                                naive_forward(config, tensors, ids, 2)), 1e-12)

    def test_single_token_closed_form(self):
        """L = 1: attention returns v of each head's kv head (QK-norm and RoPE cannot
        matter); dense layer 0 and MoE layer 1 with its shared expert by hand."""
        config, tensors = tiny_model(seed=3, layers=2, hidden=8, heads=2, kv_heads=1,
                                     experts=4, experts_per_token=2, groups=2,
                                     topk_groups=1, expert_ffn=6, ffn=10, vocab=12)
        W = {k: v.astype(np.float64) for k, v in tensors.items()}

        def rms(x, w):
            return x / np.sqrt(np.mean(x ** 2) + 1e-6) * w

        def swiglu(x, prefix):
            g = W[prefix + "gate_proj.weight"] @ x
            u = W[prefix + "up_proj.weight"] @ x
            return W[prefix + "down_proj.weight"] @ (ref.silu(g) * u)

        h = W["model.word_embeddings.weight"][5]
        for i in range(2):
            p = f"model.layers.{i}."
            a = rms(h, W[p + "input_layernorm.weight"])
            qkv = W[p + "attention.query_key_value.weight"] @ a
            v = qkv[3 * 4:4 * 4]                           # heads: q0 q1 k0 v0 (hd 4)
            h = h + W[p + "attention.dense.weight"] @ np.concatenate([v, v])
            m = rms(h, W[p + "post_attention_layernorm.weight"])
            if i == 0:
                h = h + swiglu(m, p + "mlp.")
                continue
            s = 1 / (1 + np.exp(-(W[p + "mlp.gate.weight"] @ m)))
            sel = s + W[p + "mlp.gate.expert_bias"]
            group = 0 if np.sort(sel[:2]).sum() >= np.sort(sel[2:]).sum() else 1
            chosen = [2 * group, 2 * group + 1]            # top 2 of the one kept group
            y = sum(s[e] / s[chosen].sum() * 2.5 * swiglu(m, p + f"mlp.experts.{e}.")
                    for e in chosen)
            h = h + y + swiglu(m, p + "mlp.shared_experts.")
        want = W["lm_head.weight"] @ rms(h, W["model.norm.weight"])
        got = l2.forward(l2.build_model(config, tensors), [5], [0])
        self.assertLess(rel_err(got[0], want), 1e-13)

    def test_rows_subset(self):
        """A rows subset is the full forward's rows, in the order asked."""
        config, tensors = tiny_model(seed=4)
        model = l2.build_model(config, tensors)
        ids = list(np.random.default_rng(5).integers(0, 64, 11))
        full = l2.forward(model, ids, range(11), 4)
        np.testing.assert_array_equal(l2.forward(model, ids, [10, 0, 4], 4), full[[10, 0, 4]])


class BlockCausalTest(unittest.TestCase):
    def setUp(self):
        config, tensors = tiny_model(seed=6, layers=3)
        self.model = l2.build_model(config, tensors)
        self.ids = list(np.random.default_rng(7).integers(0, 62, 10))

    def test_later_block_does_not_change_earlier_blocks(self):
        """B 4, L 10: changing position 9 (block 2) leaves rows 0..7 bit for bit, changes
        rows 8..9 (its own block, bidirectional: row 8 too)."""
        other = list(self.ids)
        other[9] = (other[9] + 1) % 62
        a = l2.forward(self.model, self.ids, range(10), 4)
        b = l2.forward(self.model, other, range(10), 4)
        np.testing.assert_array_equal(a[:8], b[:8])
        for row in (8, 9):
            self.assertGreater(rel_err(b[row], a[row]), 1e-3)

    def test_same_block_earlier_position_sees_later_one(self):
        """Changing position 6 (block 1) changes row 4 (same block) and rows 8, 9 (later
        block), not rows 0..3."""
        other = list(self.ids)
        other[6] = (other[6] + 5) % 62
        a = l2.forward(self.model, self.ids, range(10), 4)
        b = l2.forward(self.model, other, range(10), 4)
        np.testing.assert_array_equal(a[:4], b[:4])
        for row in (4, 8, 9):
            self.assertGreater(rel_err(b[row], a[row]), 1e-3)

    def test_key_ends_and_full_attention(self):
        """end(q) = min(L, (q // B + 1) B); None = L; a block covering L is full attention;
        block-causal differs from full on early rows."""
        np.testing.assert_array_equal(l2.key_ends(10, 4), [4, 4, 4, 4, 8, 8, 8, 8, 10, 10])
        np.testing.assert_array_equal(l2.key_ends(3, None), [3, 3, 3])
        np.testing.assert_array_equal(l2.forward(self.model, self.ids, range(10), 16),
                                      l2.forward(self.model, self.ids, range(10), None))
        full = l2.forward(self.model, self.ids, [0], None)
        self.assertGreater(rel_err(l2.forward(self.model, self.ids, [0], 4), full), 1e-3)
        with self.assertRaises(ValueError):
            l2.key_ends(4, 0)


class PartialRopeTest(unittest.TestCase):
    def test_hand_case(self):
        """hd 8, rotary 4, theta 100: channels 4..7 untouched at every position; channels
        0..3 rotate pairs (0, 2) and (1, 3) by pos * theta^(-2j/4); position 0 is identity."""
        x = np.arange(1.0, 9.0).reshape(1, 1, 8).repeat(3, axis=1)      # [heads 1, L 3, 8]
        cos, sin = ref.rope_cos_sin(3, 4, 100.0)
        out = l2.apply_partial_rope(x, cos, sin, 4)
        np.testing.assert_array_equal(out[..., 4:], x[..., 4:])
        np.testing.assert_array_equal(out[0, 0], x[0, 0])
        for pos in (1, 2):
            a0, a1 = pos * 1.0, pos * 100.0 ** -0.5
            want = [1 * math.cos(a0) - 3 * math.sin(a0), 2 * math.cos(a1) - 4 * math.sin(a1),
                    3 * math.cos(a0) + 1 * math.sin(a0), 4 * math.cos(a1) + 2 * math.sin(a1)]
            np.testing.assert_allclose(out[0, pos, :4], want, rtol=1e-6)

    def test_rotary_dim_from_config(self):
        """rotary dim = int(head_dim * partial_rotary_factor); absent: the HF default 0.5."""
        config, tensors = tiny_model(seed=8)              # head_dim 8
        for factor, want in ((0.5, 4), (1.0, 8), (0.75, 6), (None, 4)):
            c = dict(config, partial_rotary_factor=factor)
            self.assertEqual(l2.build_model(c, tensors).rotary_dim, want)


# ----------------------------------------------------------------------------------------
# The router, the dense first layer, the shared expert
# ----------------------------------------------------------------------------------------

class RouterTest(unittest.TestCase):
    def test_high_expert_in_dropped_group_is_not_chosen(self):
        """8 experts, 4 groups of 2, keep 2, top 2: expert 0 has the highest single score
        but its group (0, 1) sums lowest; the choice comes from groups 2 and 3."""
        sel = np.array([[0.99, 0.01, 0.40, 0.30, 0.60, 0.55, 0.50, 0.52]])
        np.testing.assert_allclose(l2.group_scores(sel, 4), [[1.00, 0.70, 1.15, 1.02]])
        experts = l2.select_experts(sel, 4, 2, 2)
        np.testing.assert_array_equal(experts, [[4, 5]])
        self.assertNotIn(0, experts[0])
        np.testing.assert_array_equal(l2.select_experts(sel, 4, 4, 2), [[0, 4]])   # keep all
        np.testing.assert_array_equal(l2.select_experts(sel, 1, 1, 2), [[0, 4]])   # one group

    def test_group_score_is_sum_of_two_largest(self):
        """Groups of 4: the two largest, not the max nor the sum of all."""
        sel = np.array([[0.9, 0.0, 0.0, 0.0, 0.5, 0.5, 0.1, 0.1]])
        np.testing.assert_allclose(l2.group_scores(sel, 2), [[0.9, 1.0]])
        np.testing.assert_array_equal(l2.select_experts(sel, 2, 1, 1), [[4]])
        np.testing.assert_allclose(l2.group_scores(sel, 8), sel)   # one expert a group

    def test_bias_changes_selection_not_weights(self):
        """A bias lifts expert 3 into the top 2; the weights are the UNBIASED scores of the
        chosen experts, renormalised, times 2.5 (so they sum to 2.5)."""
        model = l2.Llada2Model(hidden=4, n_layers=1, n_heads=1, n_kv_heads=1, head_dim=4,
                               rotary_dim=2, ffn=None, expert_ffn=2, n_experts=4,
                               experts_per_token=2, n_shared=0, n_group=1, topk_group=1,
                               routed_scaling=2.5, first_dense=0, vocab=4, rope_theta=1e4,
                               eps=1e-6, mask_id=3, eos_id=2, embed=None, final_norm=None,
                               lm_head=None)
        logits = np.array([[2.0, 1.0, 0.0, -1.0]])
        m, router = np.array([[1.0, 0, 0, 0]]), np.zeros((4, 4))
        router[:, 0] = logits[0]
        s = 1 / (1 + np.exp(-logits[0]))
        mlp = l2.MoeMlp(router=router, expert_bias=np.zeros(4), w_gate=None, w_up=None,
                        w_down=None)
        experts, weights, _ = l2.route(model, mlp, m)
        np.testing.assert_array_equal(experts, [[0, 1]])
        np.testing.assert_allclose(weights, [2.5 * s[[0, 1]] / s[[0, 1]].sum()], rtol=1e-15)
        mlp.expert_bias = np.array([0.0, 0.0, 0.0, 0.9])
        experts, weights, selection = l2.route(model, mlp, m)
        np.testing.assert_array_equal(experts, [[3, 0]])
        np.testing.assert_allclose(selection, [s + mlp.expert_bias])
        np.testing.assert_allclose(weights, [2.5 * s[[3, 0]] / s[[3, 0]].sum()], rtol=1e-15)
        self.assertAlmostEqual(float(weights.sum()), 2.5, places=14)

    def test_weights_and_k1(self):
        """k > 1: weights sum to routed_scaling_factor; k = 1: the raw score times it (HF
        renormalises only when top_k > 1)."""
        scores = np.array([[0.2, 0.7, 0.4], [0.9, 0.1, 0.5]])
        w = l2.expert_weights(scores, np.array([[1, 2], [0, 2]]), 2.5)
        np.testing.assert_allclose(w.sum(axis=-1), [2.5, 2.5], rtol=1e-15)
        np.testing.assert_allclose(l2.expert_weights(scores, np.array([[1], [0]]), 2.5),
                                   [[0.7 * 2.5], [0.9 * 2.5]])

    def test_ties_go_to_lower_index(self):
        """Equal group scores keep the lower group; equal scores pick the lower expert."""
        sel = np.array([[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]])
        np.testing.assert_array_equal(l2.select_experts(sel, 4, 2, 3), [[0, 1, 2]])
        # groups (0.1 0.3) (0.3 0.1) (0.3 0.3): group 2, then group 0 over the equal group 1;
        # among experts 1, 4, 5 (all 0.3) the lower two
        sel = np.array([[0.1, 0.3, 0.3, 0.1, 0.3, 0.3]])
        np.testing.assert_array_equal(l2.select_experts(sel, 3, 2, 2), [[1, 4]])

    def test_routing_margins(self):
        """Expert margin: k-th minus (k+1)-th in the kept groups; group margin only where
        swapping the boundary groups changes the set; inf when nothing can flip."""
        sel = np.array([[0.99, 0.01, 0.40, 0.30, 0.60, 0.55, 0.50, 0.52]])
        # kept groups 2 (1.15) and 3 (1.02); experts 0.60 0.55 | 0.52 -> expert gap 0.03;
        # swapping group 3 for group 0 (1.00) brings in expert 0: group gap 0.02 counts
        np.testing.assert_allclose(l2.routing_margins(sel, 4, 2, 2), [0.02], rtol=1e-9)
        np.testing.assert_allclose(l2.routing_margins(sel, 4, 2, 1), [0.02], rtol=1e-9)
        # group 0 (0.51 0.50 = 1.01) is 0.01 behind group 3 (1.02), but for k 1 and 2 the
        # swap keeps the same experts (4; 4 and 5): only the expert gaps count; for k 3 it
        # brings in expert 0 for expert 7, and the group gap 0.01 is the margin
        sel = np.array([[0.51, 0.50, 0.10, 0.05, 0.60, 0.55, 0.50, 0.52]])
        np.testing.assert_allclose(l2.routing_margins(sel, 4, 2, 1), [0.05], rtol=1e-9)
        np.testing.assert_allclose(l2.routing_margins(sel, 4, 2, 2), [0.03], rtol=1e-9)
        np.testing.assert_allclose(l2.routing_margins(sel, 4, 2, 3), [0.01], rtol=1e-9)
        # every group kept: the plain k-th minus (k+1)-th; everything chosen: inf
        np.testing.assert_allclose(l2.routing_margins(sel, 4, 4, 2), [0.55 - 0.52], rtol=1e-9)
        self.assertTrue(np.isinf(l2.routing_margins(sel, 1, 1, 8)[0]))


class MlpLayerTest(unittest.TestCase):
    def setUp(self):
        self.config, self.tensors = tiny_model(seed=10, layers=3, dense=2, shared=2,
                                               expert_ffn=8, ffn=40)
        self.model = l2.build_model(self.config, self.tensors)

    def test_dense_layers_are_swiglu(self):
        """first_k_dense_replace 2: layers 0, 1 hold a DenseMlp of intermediate_size, no
        router (no routing entry); layer 2 is MoE."""
        self.assertEqual([type(x.mlp).__name__ for x in self.model.layers],
                         ["DenseMlp", "DenseMlp", "MoeMlp"])
        self.assertEqual(self.model.layers[0].mlp.w_gate.shape, (40, 32))
        routing = l2.routing_selection(self.model, [1, 2, 3])
        self.assertEqual([r is None for r in routing], [True, True, False])
        m = np.random.default_rng(11).standard_normal((3, 32))
        y, sel = l2.ffn(self.model, self.model.layers[1], m)
        mlp = self.model.layers[1].mlp
        self.assertIsNone(sel)
        want = (ref.silu(m @ mlp.w_gate.T) * (m @ mlp.w_up.T)) @ mlp.w_down.T
        np.testing.assert_allclose(y, want, rtol=1e-13)

    def test_shared_expert(self):
        """Width moe_intermediate_size * num_shared_experts (8 * 2); the MoE output is the
        routed sum plus the shared SwiGLU of the same input; without it, just the sum."""
        mlp = self.model.layers[2].mlp
        self.assertEqual(mlp.shared.w_up.shape, (16, 32))
        m = np.random.default_rng(12).standard_normal((5, 32))
        y, _ = l2.moe_block(self.model, mlp, m)
        routed = l2.MoeMlp(**{**vars(mlp), "shared": None})
        y0, _ = l2.moe_block(self.model, routed, m)
        np.testing.assert_allclose(y - y0, l2.swiglu(mlp.shared, m), rtol=1e-12, atol=1e-14)
        experts, weights, _ = l2.route(self.model, mlp, m)
        for r in range(5):
            want = sum(weights[r, j] * l2.expert_mlp(mlp, e, m[r:r + 1])[0]
                       for j, e in enumerate(experts[r]))
            np.testing.assert_allclose(y0[r], want, rtol=1e-12, atol=1e-14)

    def test_no_shared_expert_config(self):
        """num_shared_experts 0 or absent: no shared tensors expected, none built."""
        for value in (0, None):
            config = dict(self.config, num_shared_experts=value)
            hp = l2.hparams_from_config(config)
            self.assertFalse([n for n in l2.expected_shapes(hp) if "shared" in n])
            tensors = {k: v for k, v in self.tensors.items() if "shared" not in k}
            self.assertIsNone(l2.build_model(config, tensors).layers[2].mlp.shared)


# ----------------------------------------------------------------------------------------
# Folders and refusals
# ----------------------------------------------------------------------------------------

class FolderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.config, self.tensors = tiny_model(seed=20)

    def tearDown(self):
        self.tmp.cleanup()

    def save(self, name, config, tensors, dtype="BF16", shards=1):
        d = os.path.join(self.tmp.name, name)
        st.save_model_dir(d, config, tensors, dtype, shards)
        return d

    def test_sharded_bf16_loads(self):
        """1 and 3 shards agree exactly; weights are the bf16-rounded values."""
        a = l2.load_model(self.save("one", self.config, self.tensors))
        b = l2.load_model(self.save("three", self.config, self.tensors, shards=3))
        name = "model.layers.1.mlp.experts.5.down_proj.weight"
        np.testing.assert_array_equal(
            a.layers[1].mlp.w_down[5],
            st.bf16_bits_to_float32(st.float32_to_bf16_bits(self.tensors[name])))
        ids = [1, 5, 9, 60, 2, 2, 7]
        np.testing.assert_array_equal(l2.forward(a, ids, range(7), 4),
                                      l2.forward(b, ids, range(7), 4))

    def test_expert_bias_kept_in_float64(self):
        """An F64 folder: expert_bias loads bit for bit in float64 (0.1 is not a float32),
        the other tensors through float32."""
        tensors = dict(self.tensors)
        name = "model.layers.1.mlp.gate.expert_bias"
        tensors[name] = np.full(8, 0.1)
        model = l2.load_model(self.save("f64", self.config, tensors, dtype="F64"))
        self.assertEqual(model.layers[1].mlp.expert_bias.dtype, np.float64)
        np.testing.assert_array_equal(model.layers[1].mlp.expert_bias, np.full(8, 0.1))
        f32 = l2.load_model(self.save("f32", self.config, tensors, dtype="F32"), dtype=np.float32)
        self.assertEqual(f32.layers[1].mlp.expert_bias.dtype, np.float64)
        self.assertEqual(f32.layers[1].mlp.router.dtype, np.float32)
        np.testing.assert_array_equal(f32.layers[1].mlp.expert_bias,
                                      np.full(8, np.float32(0.1), dtype=np.float64))

    def test_defaults(self):
        """use_qk_norm absent = true (norm tensors required); mask / eos absent = 156895 /
        156892; rms_norm_eps absent = 1e-6; use_sliding_window true is ignored."""
        config = {k: v for k, v in self.config.items()
                  if k not in ("mask_token_id", "eos_token_id", "rms_norm_eps")}
        config["use_sliding_window"] = True
        model = l2.build_model(config, self.tensors)
        self.assertEqual((model.mask_id, model.eos_id, model.eps, model.qk_norm),
                         (156895, 156892, 1e-6, True))
        missing = {k: v for k, v in self.tensors.items() if "query_layernorm" not in k}
        with self.assertRaisesRegex(ValueError, r"attention\.query_layernorm\.weight' is "
                                                r"missing"):
            l2.build_model(config, missing)

    def test_use_qk_norm_false(self):
        """use_qk_norm false: no norm tensors, q / k used as projected."""
        config = dict(self.config, use_qk_norm=False)
        tensors = {k: v for k, v in self.tensors.items() if "_layernorm" not in k
                   or "input" in k or "post" in k}
        model = l2.build_model(config, tensors)
        ones = dict(self.tensors)
        for k in ones:
            if "query_layernorm" in k or "key_layernorm" in k:
                ones[k] = np.ones_like(ones[k])
        normed = l2.build_model(self.config, ones)
        ids = [4, 8, 15, 16, 23]
        self.assertGreater(rel_err(l2.forward(model, ids, range(5)),
                                   l2.forward(normed, ids, range(5))), 1e-3)

    def test_damaged_folders(self):
        """A missing expert tensor, a wrong qkv shape, an unexpected tensor: named."""
        missing = dict(self.tensors)
        del missing["model.layers.1.mlp.experts.3.up_proj.weight"]
        with self.assertRaisesRegex(ValueError, r"'model\.layers\.1\.mlp\.experts\.3\."
                                                r"up_proj\.weight' is missing"):
            l2.load_model(self.save("missing", self.config, missing))
        wrong = dict(self.tensors)
        wrong["model.layers.0.attention.query_key_value.weight"] = np.zeros((32, 32))
        with self.assertRaisesRegex(ValueError, r"'model\.layers\.0\.attention\."
                                                r"query_key_value\.weight' has shape "
                                                r"\[32, 32\], expected \[64, 32\]"):
            l2.build_model(self.config, wrong)
        for extra in ("model.layers.0.mlp.gate.weight",
                      "model.layers.1.mlp.experts.8.up_proj.weight",
                      "model.layers.1.attention.query_key_value.bias"):
            with self.subTest(extra):
                with self.assertRaisesRegex(ValueError, "unexpected tensor"):
                    l2.build_model(self.config, dict(self.tensors, **{extra: np.zeros(3)}))

    def test_refused_config_values(self):
        """Switches the forward does not implement are refused, naming the field."""
        cases = {"rope_scaling": {"type": "yarn", "factor": 2.0}, "use_qkv_bias": True,
                 "use_bias": True, "score_function": "softmax", "norm_head": True,
                 "hidden_act": "gelu", "head_dim": 16, "architectures": ["LLaDAMoEModelLM"],
                 "n_group": 3, "topk_group": 5, "num_experts_per_tok": 5,
                 "num_key_value_heads": 3, "partial_rotary_factor": 0.1,
                 "first_k_dense_replace": 3}
        for key, value in cases.items():
            with self.subTest(key):
                with self.assertRaisesRegex(ValueError, key):
                    l2.build_model(dict(self.config, **{key: value}), self.tensors)
        for key in ("num_experts", "moe_intermediate_size", "routed_scaling_factor",
                    "intermediate_size"):
            with self.subTest(missing=key):
                with self.assertRaisesRegex(ValueError, f"'{key}' is missing"):
                    l2.build_model(dict(self.config, **{key: None}), self.tensors)

    def test_bad_ids_and_rows(self):
        model = l2.build_model(self.config, self.tensors)
        for ids, rows in (([1, 64], [0]), ([1, 2], [2]), ([], [])):
            with self.assertRaises(ValueError):
                l2.forward(model, ids, rows)


# ----------------------------------------------------------------------------------------
# LLaDA2.0 decoding on hand-made probability tables
# ----------------------------------------------------------------------------------------

V, MASK, EOS = 8, 7, 6


def row_logits(token, prob):
    """Logits of one row whose softmax gives `token` probability `prob` and shares the rest
    evenly (prob must exceed (1 - prob) / (V - 1) to be the argmax)."""
    probs = np.full(V, (1.0 - prob) / (V - 1))
    probs[token] = prob
    return np.log(probs)


class TablePredictor:
    """predict(x, lo, hi) for decode_blocks: table(call, x, lo, hi) -> [(token, prob)] per
    row of [lo, hi); records every call's (len(x), lo, hi) and canvas."""

    def __init__(self, table):
        self.table = table
        self.calls = []

    def __call__(self, x, lo, hi):
        rows = self.table(len(self.calls), x, lo, hi)
        self.calls.append((len(x), lo, hi, x.copy()))
        return np.array([row_logits(t, p) for t, p in rows])


def constant_table(rows_by_position):
    """The same (token, prob) for a position at every call."""
    return lambda call, x, lo, hi: [rows_by_position[q] for q in range(lo, hi)]


class CommitRuleTest(unittest.TestCase):
    def test_threshold_path_commits_all_confident(self):
        """k 1, two masked positions above 0.95: both commit in one step."""
        conf = np.array([0.97, 0.96, 0.50, 0.30])
        np.testing.assert_array_equal(l2.commit_mask(conf, np.ones(4, bool), 1, 0.95),
                                      [True, True, False, False])
        # k 3 > 2 confident: the fallback takes the 3 most confident instead
        np.testing.assert_array_equal(l2.commit_mask(conf, np.ones(4, bool), 3, 0.95),
                                      [True, True, True, False])

    def test_fallback_and_masks_only(self):
        """Nothing above the threshold: the k most confident MASKED positions; a prompt /
        committed position never counts, however confident; ties: lower position."""
        conf = np.array([0.99, 0.40, 0.60, 0.40, 0.40])
        masked = np.array([False, True, True, True, True])
        np.testing.assert_array_equal(l2.commit_mask(conf, masked, 2, 0.95),
                                      [False, True, True, False, False])
        np.testing.assert_array_equal(l2.commit_mask(conf, masked, 9, 0.95), masked)
        np.testing.assert_array_equal(l2.commit_mask(conf, masked, 0, 0.95), [False] * 5)
        np.testing.assert_array_equal(l2.commit_mask(conf, masked, 0, 0.5),
                                      [False, False, True, False, False])

    def test_schedule(self):
        """Even split, remainder to the first steps; steps > B: trailing zeros; the steps
        per block cap gen_length // minimal_topk."""
        self.assertEqual(l2.transfer_schedule(32, 32), [1] * 32)
        self.assertEqual(l2.transfer_schedule(8, 3), [3, 3, 2])
        self.assertEqual(l2.transfer_schedule(4, 6), [1, 1, 1, 1, 0, 0])
        self.assertEqual(l2.transfer_schedule(8, 0), [])
        self.assertEqual(l2.steps_per_block(32, 6, 2), 3)
        self.assertEqual(l2.steps_per_block(32, 64, 1), 32)
        self.assertEqual(l2.canvas_blocks(5, 6, 4), (3, 1))
        self.assertEqual(l2.canvas_blocks(8, 8, 4), (4, 2))


class DecodeBlocksTest(unittest.TestCase):
    def test_threshold_then_fallback(self):
        """P 4 = B (P % B == 0): block 1 only. Step 0: positions 4, 5 above 0.95 both
        commit (k 1); step 1: fallback commits the most confident (7); step 2: 6."""
        rows = {4: (1, 0.97), 5: (2, 0.96), 6: (3, 0.50), 7: (4, 0.60)}
        pred = TablePredictor(constant_table(rows))
        canvas, forwards = l2.decode_blocks(pred, [0, 1, 2, 3], 4, 4, 4, 0.95, mask_id=MASK)
        np.testing.assert_array_equal(canvas, [0, 1, 2, 3, 1, 2, 3, 4])
        self.assertEqual(forwards, 3)
        self.assertEqual([c[:3] for c in pred.calls], [(8, 4, 8)] * 3)
        np.testing.assert_array_equal(pred.calls[1][3][4:], [1, 2, MASK, MASK])
        np.testing.assert_array_equal(pred.calls[2][3][4:], [1, 2, MASK, 4])

    def test_schedule_with_remainder(self):
        """B 8, steps 3, threshold 1.0 (pure schedule): 3, 3, 2 tokens, most confident
        first."""
        conf = [0.30, 0.90, 0.50, 0.80, 0.40, 0.70, 0.35, 0.60]
        rows = {8 + j: (j % 6, c) for j, c in enumerate(conf)}
        pred = TablePredictor(constant_table(rows))
        canvas, forwards = l2.decode_blocks(pred, [0] * 8, 8, 8, 3, 1.0, mask_id=MASK)
        self.assertEqual(forwards, 3)
        seen = [np.sum(c[3][8:] != MASK) for c in pred.calls]
        self.assertEqual(seen, [0, 3, 6])
        np.testing.assert_array_equal(pred.calls[1][3][8:] != MASK,
                                      [False, True, False, True, False, True, False, False])
        np.testing.assert_array_equal(canvas[8:], [j % 6 for j in range(8)])

    def test_partial_first_block(self):
        """P 5, B 4, gen 6: canvas ceil(11 / 4) * 4 = 12; decoding starts at block 1
        (positions 4..7, 4 is the prompt's and never changes though the table is confident
        there); block 1 takes 3 steps, block 2 four (steps 4, k 1); forwards see the prefix
        [0, 8) then [0, 12); position 11 (past P + gen) is decoded too."""
        rows = {q: ((q + 1) % 6, 0.5 + 0.04 * q) for q in range(12)}
        rows[4] = (5, 0.99)
        prompt = [0, 1, 2, 3, 4]
        pred = TablePredictor(constant_table(rows))
        canvas, forwards = l2.decode_blocks(pred, prompt, 6, 4, 4, 0.95, mask_id=MASK)
        self.assertEqual(len(canvas), 12)
        self.assertEqual(forwards, 7)
        self.assertEqual([c[:3] for c in pred.calls], [(8, 4, 8)] * 3 + [(12, 8, 12)] * 4)
        np.testing.assert_array_equal(canvas[:5], prompt)
        np.testing.assert_array_equal(canvas[5:], [(q + 1) % 6 for q in range(5, 12)])
        # commit order: most confident (largest q) first within each block
        self.assertEqual(pred.calls[1][3][7], (7 + 1) % 6)
        self.assertEqual(pred.calls[1][3][5], MASK)

    def test_minimal_topk_caps_steps(self):
        """gen 6, minimal_topk 2: 3 steps per block -> schedule [2, 1, 1] for B 4."""
        rows = {q: (1, 0.3 + 0.01 * q) for q in range(12)}
        pred = TablePredictor(constant_table(rows))
        _, forwards = l2.decode_blocks(pred, [0, 1, 2, 3], 6, 4, 32, 1.0, 2, mask_id=MASK)
        self.assertEqual(forwards, 6)
        self.assertEqual([int(np.sum(c[3][4:8] != MASK)) for c in pred.calls[:3]], [0, 2, 3])

    def test_committed_mask_id_stays_masked(self):
        """The argmax is the mask id (0.9 > 0.8) at position 5 for two calls: committed, it
        is still a mask, so the block goes on; at call 2 everything clears the threshold."""
        def table(call, x, lo, hi):
            return [(MASK, 0.9) if q == 5 and call < 2 else (2, 0.6 + 0.3 * (call >= 2))
                    for q in range(lo, hi)]
        trace = l2.Trace()
        canvas, forwards = l2.decode_blocks(TablePredictor(table), [0, 1, 2, 3], 4, 4, 4, 0.8,
                                            mask_id=MASK, trace=trace, ban_mask=False)
        self.assertEqual(trace.mask_commits, 2)
        self.assertEqual(forwards, 3)
        np.testing.assert_array_equal(canvas[4:], [2, 2, 2, 2])
        # Banned (the default, Mosaic's convention): position 5 takes its next-best token.
        trace = l2.Trace()
        canvas, _ = l2.decode_blocks(TablePredictor(table), [0, 1, 2, 3], 4, 4, 4, 0.8,
                                     mask_id=MASK, trace=trace)
        self.assertEqual(trace.mask_commits, 0)
        self.assertNotIn(MASK, canvas[4:].tolist())

    def test_eos_early_stop_breaks_the_block(self):
        """eos_early_stop: the step that commits EOS ends its block (masks left); the next
        block is still decoded. Without it the block completes."""
        rows = {q: (EOS if q == 5 else 1, 0.9 if q == 5 else 0.5) for q in range(12)}
        for stop, left in ((True, 3), (False, 0)):
            pred = TablePredictor(constant_table(rows))
            canvas, forwards = l2.decode_blocks(pred, [0, 1, 2, 3], 8, 4, 4, 0.95,
                                                mask_id=MASK, eos_id=EOS, eos_early_stop=stop,
                                                stop_at_block_eos=False)
            self.assertEqual(int(np.sum(canvas[4:8] == MASK)), left)
            self.assertTrue(np.all(canvas[8:] == 1))
            self.assertEqual(forwards, 1 + 4 if stop else 8)

    def test_an_eos_ends_decoding_after_its_block(self):
        """The HF generate()'s stop (the default): block [4, 8) commits an EOS at 5, so block
        [8, 12) is never decoded and reads as EOS."""
        rows = {q: (EOS if q == 5 else 1, 0.9 if q == 5 else 0.5) for q in range(12)}
        pred = TablePredictor(constant_table(rows))
        canvas, forwards = l2.decode_blocks(pred, [0, 1, 2, 3], 8, 4, 4, 0.95,
                                            mask_id=MASK, eos_id=EOS)
        self.assertEqual(forwards, 4)
        np.testing.assert_array_equal(canvas[4:8], [1, EOS, 1, 1])
        self.assertTrue(np.all(canvas[8:] == EOS))

    def test_trace_gaps(self):
        """The trace keeps the closest threshold, cut and token decisions, relative."""
        rows = {4: (1, 0.951), 5: (2, 0.50), 6: (3, 0.499), 7: (4, 0.30)}
        trace = l2.Trace()
        l2.decode_blocks(TablePredictor(constant_table(rows)), [0, 1, 2, 3], 4, 4, 2, 0.96,
                         mask_id=MASK, trace=trace)
        self.assertAlmostEqual(trace.gaps["threshold"], 0.009 / 0.96, places=12)
        self.assertAlmostEqual(trace.gaps["cut"], 0.001 / 0.5, places=12)
        self.assertAlmostEqual(trace.gaps["token"], (0.30 - 0.70 / 7) / 0.30, places=12)
        self.assertEqual(trace.closest()[0], "cut")
        self.assertTrue(trace.near_tie(decision_tie=0.01))
        self.assertFalse(trace.near_tie())
        self.assertFalse(trace.near_tie(routing_tie=1e-6))        # no forward: inf
        trace.routing = 1e-7
        self.assertTrue(trace.near_tie(routing_tie=1e-6))
        np.testing.assert_allclose(l2.relative_gap([0.5, 0.2, 0.0], [0.25, 0.4, 0.0]),
                                   [0.5, 0.5, 0.0])


class Llada21DecodeTest(unittest.TestCase):
    def test_mask_then_edit_then_stop(self):
        """P 5, B 4: block 1 = positions 4..7 (4 is prompt). num_to_transfer 1, threshold
        0.95, editing 0.9. Call 0: 5 (0.97) and 6 (0.96) commit; call 1: nothing high, the
        most confident mask (7) commits, and position 5's new argmax 3 at 0.93 edits it;
        call 2 (no masks: post step 1): no edit (the prompt position 4 is confident in
        another token but never edited) -> the block ends. Block 2 likewise."""
        def table(call, x, lo, hi):
            if lo == 4:
                rows = {4: (5, 0.99), 5: (2, 0.97) if call == 0 else (3, 0.93),
                        6: (1, 0.96), 7: (4, 0.60)}
                return [rows[q] for q in range(lo, hi)]
            return [(2, 0.5 + 0.01 * (q - lo)) for q in range(lo, hi)]
        pred = TablePredictor(table)
        canvas, forwards = l2.decode_blocks_llada21(pred, [0, 1, 2, 3, 0], 7, 4, 0.95, 0.9,
                                                    16, 1, mask_id=MASK)
        np.testing.assert_array_equal(canvas[:8], [0, 1, 2, 3, 0, 3, 1, 4])
        np.testing.assert_array_equal(pred.calls[1][3][4:8], [0, 2, 1, MASK])
        self.assertEqual(forwards, 3 + 5)
        np.testing.assert_array_equal(canvas[8:], [2, 2, 2, 2])

    def test_post_steps_limit(self):
        """A block whose argmax keeps flipping (0.99 each time) edits every call; it stops
        after max_post_steps post steps: 4 mask steps + 3 post steps with max 3."""
        def table(call, x, lo, hi):
            return [((call + q) % 2, 0.99) if q == lo else (3, 0.5) for q in range(lo, hi)]
        pred = TablePredictor(table)
        _, forwards = l2.decode_blocks_llada21(pred, [0, 1, 2, 3], 4, 4, 0.95, 0.9, 3, 1,
                                               mask_id=MASK)
        self.assertEqual(forwards, 4 + 3)
        _, forwards = l2.decode_blocks_llada21(TablePredictor(table), [0, 1, 2, 3], 4, 4,
                                               0.95, 0.9, 0, 1, mask_id=MASK)
        self.assertEqual(forwards, 4)

    def test_num_to_transfer_and_eos_early_stop(self):
        """num_to_transfer 2: two masks a call; eos_early_stop after a block whose
        generated part is complete and holds EOS: later blocks stay masked."""
        rows = {q: (EOS if q == 6 else 1, 0.5 + 0.01 * q) for q in range(16)}
        pred = TablePredictor(constant_table(rows))
        canvas, forwards = l2.decode_blocks_llada21(pred, [0, 1, 2, 3], 12, 4, 0.95, 0.9, 16,
                                                    2, mask_id=MASK, eos_id=EOS,
                                                    eos_early_stop=True, stop_at_block_eos=False)
        self.assertEqual(forwards, 3)            # 2 + 2 masks, then one post step
        np.testing.assert_array_equal(canvas[4:8], [1, 1, EOS, 1])
        self.assertTrue(np.all(canvas[8:] == MASK))
        # Mosaic's convention (the default): the same stop, the rest reading as EOS.
        canvas, forwards = l2.decode_blocks_llada21(TablePredictor(constant_table(rows)), [0, 1, 2, 3], 12, 4,
                                                    0.95, 0.9, 16, 2, mask_id=MASK, eos_id=EOS)
        self.assertEqual(forwards, 3)
        self.assertTrue(np.all(canvas[8:] == EOS))


# ----------------------------------------------------------------------------------------
# Generation on a tiny model against a hand loop over the naive forward
# ----------------------------------------------------------------------------------------

def hand_generate(config, tensors, prompt, gen_length, B, steps, threshold, mask):
    """moe-models.md §2.4's loop written out on naive_forward (full recompute each step)."""
    n_blocks = -(-(len(prompt) + gen_length) // B)
    x = list(prompt) + [mask] * (n_blocks * B - len(prompt))
    steps = min(steps, gen_length)
    quota = [B // steps + (1 if i < B % steps else 0) for i in range(steps)]
    forwards = 0
    for b in range(len(prompt) // B, n_blocks):
        lo, hi = b * B, (b + 1) * B
        for i in range(steps):
            if mask not in x[lo:hi]:
                break
            logits = naive_forward(config, tensors, x[:hi], B)
            forwards += 1
            cand = []
            for q in range(lo, hi):
                if x[q] != mask:
                    continue
                p = np.exp(logits[q] - logits[q].max())
                p /= p.sum()
                cand.append((-p.max(), q, int(np.argmax(p))))
            high = [c for c in cand if -c[0] > threshold]
            chosen = high if len(high) >= quota[i] else sorted(cand)[:quota[i]]
            for _, q, tok in chosen:
                x[q] = tok
    return x, forwards


class GenerateTest(unittest.TestCase):
    def setUp(self):
        self.config, self.tensors = tiny_model(seed=30, layers=2, hidden=16, heads=4,
                                               kv_heads=2, experts=8, experts_per_token=2,
                                               expert_ffn=8, ffn=20, vocab=40)
        self.model = l2.build_model(self.config, self.tensors)

    def test_generate_equals_hand_loop(self):
        """generate == the hand loop: P % B != 0 and == 0, uneven schedule, a threshold low
        enough to commit several at once."""
        mask = self.model.mask_id
        for prompt, gen, B, steps, thr in (([3, 17, 0], 6, 4, 3, 0.95),
                                           ([3, 17, 0, 5], 4, 4, 4, 1.0),
                                           ([9, 1, 20, 2, 11], 7, 4, 2, 0.08)):
            with self.subTest(P=len(prompt), B=B, steps=steps, threshold=thr):
                trace = l2.Trace()
                canvas, forwards = l2.generate(self.model, prompt, gen, B, steps, thr,
                                               trace=trace)
                want, want_forwards = hand_generate(self.config, self.tensors, prompt, gen,
                                                    B, steps, thr, mask)
                self.assertEqual(list(canvas), want)
                self.assertEqual(forwards, want_forwards)
                self.assertEqual(trace.forwards, forwards)
                self.assertFalse(trace.near_tie(routing_tie=1e-6), trace)

    def test_llada21_runs_and_edits_nothing_with_threshold_one(self):
        """editing_threshold 1.0 (no probability exceeds it) and max_post_steps 0: the 2.1
        loop is the 2.0 loop with one token a step."""
        prompt = [3, 17, 0]
        a, fa = l2.generate_llada21(self.model, prompt, 6, 4, threshold=1.0,
                                    editing_threshold=1.0, max_post_steps=0)
        b, fb = l2.generate(self.model, prompt, 6, 4, steps=4, threshold=1.0)
        np.testing.assert_array_equal(a, b)
        self.assertEqual(fa, fb)


# ----------------------------------------------------------------------------------------
# The check scripts' plumbing against fake_llada2_mosaic.py
# ----------------------------------------------------------------------------------------

class CheckPlumbingTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.mosaic = os.path.join(self.tmp.name, "mosaic")
        fake = os.path.join(HERE, "fake_llada2_mosaic.py")
        with open(self.mosaic, "w") as f:
            f.write(f'#!/bin/sh\nexec {sys.executable} {fake} "$@"\n')
        os.chmod(self.mosaic, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def run_main(self, module, cases, bug=""):
        out = io.StringIO()
        with mock.patch.dict(os.environ, {"FAKE_MOSAIC_BUG": bug}), \
                contextlib.redirect_stdout(out):
            rc = module.main(["--mosaic", self.mosaic, "--cases", cases,
                              "--workdir", os.path.join(self.tmp.name, "w")])
        return rc, out.getvalue()

    def test_forward_check(self):
        """check_llada2_forward passes on a correct CLI and fails, naming the case, on a
        perturbed logit, on full attention and on a selection that ignores the bias."""
        import check_llada2_forward as cf
        rc, out = self.run_main(cf, "llada2_no_shared")
        self.assertEqual(rc, 0, out)
        self.assertIn("PASS llada2_no_shared", out)
        for bug in ("perturb", "full_attention", "no_expert_bias"):
            with self.subTest(bug=bug):
                rc, out = self.run_main(cf, "llada2_no_shared", bug)
                self.assertEqual(rc, 1, out)
                self.assertIn("FAIL llada2_no_shared", out)

    def test_generate_check(self):
        """check_llada2_generate passes on a correct CLI and fails on a wrong token."""
        import check_llada2_generate as cgen
        rc, out = self.run_main(cgen, "b8_s8_t095_p8")
        self.assertEqual(rc, 0, out)
        rc, out = self.run_main(cgen, "b8_s8_t095_p8", "token")
        self.assertEqual(rc, 1, out)
        self.assertIn("first difference at generated position", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
