#!/usr/bin/python3
"""Self-test of the LLaDA-MoE NumPy reference (llada_moe_np.py; no Mosaic needed): the forward
against an explicit loop version, the MoE block's algebra, the router, the per-head QK-norm,
folders written by tiny_checkpoint_np, the refusals, and check_moe_forward.py's plumbing
against fake_moe_mosaic.py; the cached forward and generation through generate_np
(GenerationModel), and check_moe_generate.py's plumbing against the same fake.

Run: /usr/bin/python3 tests/reference/test_moe_reference_self.py    (exit 0 = all pass)
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
import check_moe_forward  # noqa: E402
import check_moe_generate  # noqa: E402
import generate_np as gen  # noqa: E402
import llada_moe_np as moe  # noqa: E402
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402
from tiny_checkpoint_np import tiny_model, tiny_moe_config, tiny_moe_model  # noqa: E402


def rel_err(a, b):
    """max |a - b| / max |b|."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def layer_prefix(i):
    return f"model.layers.{i}."


# ----------------------------------------------------------------------------------------
# An explicit loop forward, written apart from llada_moe_np
# ----------------------------------------------------------------------------------------

def naive_moe_forward(config, tensors, ids):
    """Loop-by-loop LLaDA-MoE logits of every row: literal HF names, per-position /
    per-head / per-expert loops, routing by Python's sorted() on (-p, expert); float64
    except the float32 RoPE angles (as the PyTorch reference builds them)."""
    H = config["hidden_size"]
    nq, nkv = config["num_attention_heads"], config["num_key_value_heads"]
    E, K = config["num_experts"], config["num_experts_per_tok"]
    eps, theta = config["rms_norm_eps"], config["rope_theta"]
    d = H // nq
    W = {k: v.astype(np.float64) for k, v in tensors.items()}

    def lin(x, name):
        w = W[name]
        return np.array([sum(w[o, i] * x[i] for i in range(w.shape[1]))
                         for o in range(w.shape[0])])

    def norm(x, w):
        ms = sum(v * v for v in x) / len(x)
        return np.array([x[i] / math.sqrt(ms + eps) * w[i] for i in range(len(x))])

    def rope(vec, pos):
        out = vec.copy()
        for j in range(d // 2):
            inv = np.float32(1.0) / (np.float32(theta) ** (np.float32(2 * j) / np.float32(d)))
            angle = float(np.float32(pos) * inv)
            c, s = math.cos(angle), math.sin(angle)
            out[j] = vec[j] * c - vec[j + d // 2] * s
            out[j + d // 2] = vec[j + d // 2] * c + vec[j] * s
        return out

    L = len(ids)
    h = [W["model.embed_tokens.weight"][t].copy() for t in ids]
    for li in range(config["num_hidden_layers"]):
        p = layer_prefix(li)
        xs = [norm(x, W[p + "input_layernorm.weight"]) for x in h]
        Q, K_, V = [], [], []
        for pos, x in enumerate(xs):
            q = lin(x, p + "self_attn.q_proj.weight")
            k = lin(x, p + "self_attn.k_proj.weight")
            # per head: RMS-normalise with the shared [d] weight, then rotate
            Q.append([rope(norm(q[a * d:(a + 1) * d], W[p + "self_attn.q_norm.weight"]), pos)
                      for a in range(nq)])
            K_.append([rope(norm(k[b * d:(b + 1) * d], W[p + "self_attn.k_norm.weight"]), pos)
                       for b in range(nkv)])
            V.append(lin(x, p + "self_attn.v_proj.weight"))
        new_h = []
        for i in range(L):
            att = np.zeros(nq * d)
            for a in range(nq):
                b = a // (nq // nkv)
                scores = [sum(Q[i][a][c] * K_[j][b][c] for c in range(d)) / math.sqrt(d)
                          for j in range(L)]
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                for j in range(L):
                    att[a * d:(a + 1) * d] += e[j] / sum(e) * V[j][b * d:(b + 1) * d]
            hi = h[i] + lin(att, p + "self_attn.o_proj.weight")
            m = norm(hi, W[p + "post_attention_layernorm.weight"])
            logits = lin(m, p + "mlp.gate.weight")
            top = max(logits)
            z = sum(math.exp(v - top) for v in logits)
            probs = [math.exp(v - top) / z for v in logits]
            chosen = sorted(range(E), key=lambda e: (-probs[e], e))[:K]
            y = np.zeros(H)
            for e in sorted(chosen):
                q = p + f"mlp.experts.{e}."
                g = lin(m, q + "gate_proj.weight")
                u = lin(m, q + "up_proj.weight")
                act = np.array([g[c] / (1 + math.exp(-g[c])) * u[c] for c in range(len(g))])
                y += probs[e] * lin(act, q + "down_proj.weight")
            new_h.append(hi + y)
        h = new_h
    return np.array([lin(norm(x, W["model.norm.weight"]), "lm_head.weight") for x in h])


def swiglu(x, gate, up, down):
    return (ref.silu(x @ gate.T) * (x @ up.T)) @ down.T


class MoeForwardTest(unittest.TestCase):
    def test_matches_loop_implementation(self):
        """Vectorised forward == naive loops (GQA 4/2, 2 layers, top 2 of 4, untied)."""
        config, tensors = tiny_moe_model(seed=31, layers=2, hidden=16, heads=4, kv_heads=2,
                                         experts=4, experts_per_token=2, expert_ffn=12,
                                         vocab=20)
        ids = [3, 17, 0, 9, 9, 5]
        model = moe.build_model(config, tensors)
        self.assertGreater(moe.min_routing_margin(model, ids), 1e-3)   # no tie to blur it
        got = moe.forward(model, ids, range(len(ids)))
        self.assertLess(rel_err(got, naive_moe_forward(config, tensors, ids)), 1e-12)

    def test_single_token_closed_form(self):
        """L = 1: attention returns v (QK-norm and RoPE cannot matter), the rest by hand."""
        config, tensors = tiny_moe_model(seed=32, layers=1, hidden=8, heads=2, kv_heads=1,
                                         experts=3, experts_per_token=1, expert_ffn=6,
                                         vocab=10)
        W = {k: v.astype(np.float64) for k, v in tensors.items()}
        eps = config["rms_norm_eps"]
        p = layer_prefix(0)

        def rms(x, w):
            return x / np.sqrt(np.mean(x ** 2) + eps) * w

        x = W["model.embed_tokens.weight"][4]
        v = W[p + "self_attn.v_proj.weight"] @ rms(x, W[p + "input_layernorm.weight"])
        h = x + W[p + "self_attn.o_proj.weight"] @ np.concatenate([v, v])   # 2 heads, 1 kv
        m = rms(h, W[p + "post_attention_layernorm.weight"])
        logits = W[p + "mlp.gate.weight"] @ m
        probs = np.exp(logits) / np.exp(logits).sum()
        e = int(np.argmax(probs))
        q = p + f"mlp.experts.{e}."
        h = h + probs[e] * swiglu(m, W[q + "gate_proj.weight"], W[q + "up_proj.weight"],
                                  W[q + "down_proj.weight"])
        want = W["lm_head.weight"] @ rms(h, W["model.norm.weight"])
        got = moe.forward(moe.build_model(config, tensors), [4], [0])
        self.assertLess(rel_err(got[0], want), 1e-13)

    def test_attention_is_bidirectional(self):
        """Row 0's logits depend on the last token (no causal mask)."""
        config, tensors = tiny_moe_model(seed=33)
        model = moe.build_model(config, tensors)
        a = moe.forward(model, [1, 2, 3], [0])
        b = moe.forward(model, [1, 2, 7], [0])
        self.assertGreater(rel_err(a, b), 1e-3)


# ----------------------------------------------------------------------------------------
# (a) the MoE block's algebra, (b) the router
# ----------------------------------------------------------------------------------------

def moe_layer(n_experts, hidden, ffn, seed, identical=False):
    """A MoeLayer with random router and experts (attention weights unused by moe_block)."""
    rng = np.random.default_rng(seed)
    n = 1 if identical else n_experts
    gate = rng.standard_normal((n, ffn, hidden)) / math.sqrt(hidden)
    up = rng.standard_normal((n, ffn, hidden)) / math.sqrt(hidden)
    down = rng.standard_normal((n, hidden, ffn)) / math.sqrt(ffn)
    if identical:
        gate, up, down = (np.repeat(a, n_experts, axis=0) for a in (gate, up, down))
    return moe.MoeLayer(attn_norm=None, wq=None, wk=None, wv=None, wo=None, q_norm=None,
                        k_norm=None, ffn_norm=None,
                        router=rng.standard_normal((n_experts, hidden)),
                        w_gate=gate, w_up=up, w_down=down)


class MoeBlockTest(unittest.TestCase):
    def setUp(self):
        self.x = np.random.default_rng(40).standard_normal((9, 16))

    def test_all_experts_equal_dense_swiglu(self):
        """(a) k == E and every expert one SwiGLU: the block IS that SwiGLU (weights sum to 1)."""
        layer = moe_layer(6, 16, 20, seed=41, identical=True)
        y, probs = moe.moe_block(layer, self.x, k=6)
        np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=0, atol=1e-14)
        dense = swiglu(self.x, layer.w_gate[0], layer.w_up[0], layer.w_down[0])
        self.assertLess(rel_err(y, dense), 1e-13)

    def test_topk_weights_are_not_renormalised(self):
        """(b) k < E, identical experts: y = (sum of the k chosen probabilities) * SwiGLU, with
        that sum < 1; a renormalising router would give the SwiGLU itself."""
        layer = moe_layer(6, 16, 20, seed=42, identical=True)
        y, probs = moe.moe_block(layer, self.x, k=2)
        kept = -np.sort(-probs, axis=-1)[:, :2].sum(axis=-1)
        self.assertTrue(np.all(kept < 1 - 1e-3))
        dense = swiglu(self.x, layer.w_gate[0], layer.w_up[0], layer.w_down[0])
        self.assertLess(rel_err(y, kept[:, None] * dense), 1e-13)
        self.assertGreater(rel_err(y, dense), 1e-2)

    def test_block_is_weighted_sum_of_chosen_experts(self):
        """(b) distinct experts: y[row] = sum over its k largest p of p_e * expert_e(x[row])."""
        layer = moe_layer(8, 16, 12, seed=43)
        y, probs = moe.moe_block(layer, self.x, k=3)
        for row in range(self.x.shape[0]):
            top = np.argsort(probs[row])[::-1][:3]
            want = sum(probs[row, e] * swiglu(self.x[row], layer.w_gate[e], layer.w_up[e],
                                              layer.w_down[e]) for e in top)
            self.assertLess(rel_err(y[row], want), 1e-13)
            logits = layer.router @ self.x[row]
            np.testing.assert_allclose(probs[row], np.exp(logits) / np.exp(logits).sum(),
                                       rtol=1e-13)

    def test_router_chooses_the_k_largest(self):
        """(b) hand-made probabilities: the k largest, largest first, weights = p as given."""
        probs = np.array([[0.05, 0.30, 0.10, 0.40, 0.15],
                          [0.50, 0.01, 0.02, 0.03, 0.44]])
        experts, weights = moe.top_k_experts(probs, 2)
        np.testing.assert_array_equal(experts, [[3, 1], [0, 4]])
        np.testing.assert_array_equal(weights, [[0.40, 0.30], [0.50, 0.44]])
        experts, _ = moe.top_k_experts(probs, 5)
        np.testing.assert_array_equal(np.sort(experts, axis=-1), [list(range(5))] * 2)

    def test_router_ties_go_to_the_lower_index(self):
        """Exactly equal probabilities: the lower expert index is chosen (stated rule)."""
        probs = np.array([[0.1, 0.3, 0.3, 0.3], [0.25, 0.25, 0.25, 0.25]])
        experts, weights = moe.top_k_experts(probs, 2)
        np.testing.assert_array_equal(experts, [[1, 2], [0, 1]])
        np.testing.assert_array_equal(weights, [[0.3, 0.3], [0.25, 0.25]])

    def test_routing_margins(self):
        """(p_k - p_(k+1)) / p_k per row; inf when every expert is chosen."""
        probs = np.array([[0.1, 0.4, 0.2, 0.3], [0.25, 0.25, 0.25, 0.25]])
        np.testing.assert_allclose(moe.routing_margins(probs, 2), [(0.3 - 0.2) / 0.3, 0.0])
        np.testing.assert_allclose(moe.routing_margins(probs, 1), [(0.4 - 0.3) / 0.4, 0.0])
        self.assertTrue(np.all(np.isinf(moe.routing_margins(probs, 4))))


# ----------------------------------------------------------------------------------------
# (c) QK-norm
# ----------------------------------------------------------------------------------------

class QkNormTest(unittest.TestCase):
    def test_every_head_has_unit_rms(self):
        """(c) weight ones: each head's head_dim values have RMS sqrt(ms / (ms + eps)) ~ 1,
        heads of very different scales alike (a whole-row norm would leave them unequal)."""
        rng = np.random.default_rng(50)
        L, heads, d, eps = 5, 4, 16, 1e-5
        q = rng.standard_normal((L, heads, d)) * np.array([0.5, 1.0, 10.0, 300.0])[:, None]
        out = moe.qk_norm(q, np.ones(d), eps)
        ms = np.mean(q * q, axis=-1)
        rms = np.sqrt(np.mean(out * out, axis=-1))
        np.testing.assert_allclose(rms, np.sqrt(ms / (ms + eps)), rtol=1e-13)
        np.testing.assert_allclose(rms, 1.0, atol=1e-3)
        whole = ref.rms_norm(q.reshape(L, heads * d), 1.0, eps).reshape(L, heads, d)
        self.assertGreater(np.ptp(np.sqrt(np.mean(whole * whole, axis=-1))), 1.0)

    def test_attention_ignores_per_head_scale(self):
        """Through attention(): scaling one query head's (or the kv head's) Wq/Wk rows by a
        positive factor changes nothing (eps tiny), because each head is normalised on
        its own; the norm weights themselves do change the output."""
        config, tensors = tiny_moe_model(seed=51, layers=1, hidden=32, heads=4, kv_heads=2,
                                         eps=1e-12)
        model = moe.build_model(config, tensors)
        layer = model.layers[0]
        x = np.random.default_rng(52).standard_normal((6, 32))
        cos, sin = ref.rope_cos_sin(6, model.head_dim, model.rope_theta)
        base = moe.attention(model, layer, x, cos, sin)
        d = model.head_dim
        scaled = moe.MoeLayer(**vars(layer))
        scaled.wq = layer.wq.copy()
        scaled.wq[1 * d:2 * d] *= 37.0
        scaled.wk = layer.wk.copy()
        scaled.wk[0:d] *= 0.1
        self.assertLess(rel_err(moe.attention(model, scaled, x, cos, sin), base), 1e-9)
        reweighted = moe.MoeLayer(**vars(layer))
        reweighted.q_norm = layer.q_norm * np.linspace(0.5, 2.0, d)
        self.assertGreater(rel_err(moe.attention(model, reweighted, x, cos, sin), base), 1e-3)


# ----------------------------------------------------------------------------------------
# (d) folders from the NumPy writer
# ----------------------------------------------------------------------------------------

class MoeFolderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_folder_loads_and_is_deterministic(self):
        """(d) bf16, 1 and 3 shards: loads (weights = the bf16-rounded written values), the
        two folders agree exactly, and repeated forwards are bitwise equal."""
        config, tensors = tiny_moe_model(seed=60, layers=2, hidden=32, heads=4, kv_heads=2,
                                         experts=8, experts_per_token=2, vocab=50)
        one, three = os.path.join(self.dir, "one"), os.path.join(self.dir, "three")
        st.save_model_dir(one, config, tensors, "BF16", shards=1)
        st.save_model_dir(three, config, tensors, "BF16", shards=3)
        a, b = moe.load_model(one), moe.load_model(three)
        name = "model.layers.1.mlp.experts.5.down_proj.weight"
        np.testing.assert_array_equal(
            a.layers[1].w_down[5],
            st.bf16_bits_to_float32(st.float32_to_bf16_bits(tensors[name])))
        self.assertEqual(a.layers[1].w_down.dtype, np.float64)
        ids = list(np.random.default_rng(61).integers(0, 50, 11))
        first = moe.forward(a, ids, range(11))
        np.testing.assert_array_equal(moe.forward(a, ids, range(11)), first)
        np.testing.assert_array_equal(moe.forward(b, ids, range(11)), first)
        self.assertEqual(first.shape, (11, 50))
        self.assertTrue(np.all(np.isfinite(first)))

    def test_rows_and_expert_permutation(self):
        """(d) a rows subset is the full forward's rows; renumbering the experts (router rows
        and expert tensors alike) gives the same logits."""
        config, tensors = tiny_moe_model(seed=62, layers=2, hidden=32, heads=4, experts=6,
                                         experts_per_token=3, vocab=40)
        d = os.path.join(self.dir, "m")
        st.save_model_dir(d, config, tensors, "F32")
        model = moe.load_model(d)
        ids = list(np.random.default_rng(63).integers(0, 40, 9))
        self.assertGreater(moe.min_routing_margin(model, ids), 1e-6)
        full = moe.forward(model, ids, range(9))
        np.testing.assert_allclose(moe.forward(model, ids, [8, 0, 4]), full[[8, 0, 4]],
                                   rtol=1e-13, atol=1e-13)
        perm = np.random.default_rng(64).permutation(6)     # new expert j = old perm[j]
        permuted = dict(tensors)
        for i in range(2):
            p = layer_prefix(i) + "mlp."
            permuted[p + "gate.weight"] = tensors[p + "gate.weight"][perm]
            for j in range(6):
                for proj in ("gate_proj", "up_proj", "down_proj"):
                    permuted[p + f"experts.{j}.{proj}.weight"] = \
                        tensors[p + f"experts.{perm[j]}.{proj}.weight"]
        other = moe.build_model(config, permuted)
        self.assertFalse(np.array_equal(other.layers[0].router, model.layers[0].router))
        self.assertLess(rel_err(moe.forward(other, ids, range(9)), full), 1e-12)
        # routing_probabilities follows the renumbering
        np.testing.assert_allclose(moe.routing_probabilities(other, ids)[1],
                                   moe.routing_probabilities(model, ids)[1][:, perm],
                                   rtol=1e-12)

    def test_tied_head(self):
        """tie_word_embeddings without lm_head.weight: the LM head is the embedding."""
        config, tensors = tiny_moe_model(seed=65, tied=True)
        self.assertNotIn("lm_head.weight", tensors)
        d = os.path.join(self.dir, "tied")
        st.save_model_dir(d, config, tensors, "F32", shards=2)
        model = moe.load_model(d)
        self.assertIs(model.lm_head, model.embed)
        h, _ = moe.final_hidden(model, [1, 2, 3])
        np.testing.assert_array_equal(moe.forward(model, [1, 2, 3], [2]), h[[2]] @ model.embed.T)


# ----------------------------------------------------------------------------------------
# (e) refusals
# ----------------------------------------------------------------------------------------

class MoeRefusalTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.config, self.tensors = tiny_moe_model(seed=70, experts=4, experts_per_token=2)

    def tearDown(self):
        self.tmp.cleanup()

    def assert_folder_refused(self, config, tensors, pattern):
        d = tempfile.mkdtemp(dir=self.tmp.name)
        st.save_model_dir(d, config, tensors, "BF16")
        with self.assertRaisesRegex(ValueError, pattern):
            moe.load_model(d)

    def test_damaged_folders(self):
        """(e) a missing expert tensor, a wrong router shape, moe_layer_freq with a 0."""
        missing = dict(self.tensors)
        del missing["model.layers.1.mlp.experts.3.up_proj.weight"]
        self.assert_folder_refused(self.config, missing,
                                   r"'model\.layers\.1\.mlp\.experts\.3\.up_proj\.weight' "
                                   r"is missing")
        wrong = dict(self.tensors)
        wrong["model.layers.0.mlp.gate.weight"] = np.zeros((5, 32), np.float32)
        self.assert_folder_refused(self.config, wrong,
                                   r"'model\.layers\.0\.mlp\.gate\.weight' has shape "
                                   r"\[5, 32\], expected \[4, 32\]")
        self.assert_folder_refused(dict(self.config, moe_layer_freq=[1, 0]), self.tensors,
                                   r"moe_layer_freq marks layer\(s\) \[1\] as not MoE")

    def test_unsupported_config_values(self):
        """Switches the forward does not implement are refused, naming the field."""
        cases = {
            "shared_expert_intermediate_size": 64, "partial_rotary_factor": 0.5,
            "rope_scaling": {"type": "linear", "factor": 2.0}, "clip_qkv": 8.0,
            "attention_bias": True, "moe_router_enable_expert_bias": True,
            "qk_layernorm": False, "hidden_act": "gelu", "num_experts_per_tok": 5,
            "moe_layer_freq": [1, 1, 1], "architectures": ["LLaDAModelLM"],
            "num_key_value_heads": 3, "head_dim": 16,
        }
        for key, value in cases.items():
            with self.subTest(key):
                with self.assertRaisesRegex(ValueError, key):
                    moe.build_model(dict(self.config, **{key: value}), self.tensors)
        no_rotary = dict(self.config)
        del no_rotary["partial_rotary_factor"]
        with self.assertRaisesRegex(ValueError, "partial_rotary_factor"):
            moe.build_model(no_rotary, self.tensors)
        for key in ("num_experts", "expert_intermediate_size", "rms_norm_eps"):
            with self.subTest(missing=key):
                with self.assertRaisesRegex(ValueError, f"'{key}' is missing"):
                    moe.build_model(dict(self.config, **{key: None}), self.tensors)

    def test_norm_topk_prob_is_ignored(self):
        """norm_topk_prob true changes nothing: the HF block hard-codes no renormalisation."""
        ids = [1, 2, 3, 4]
        a = moe.forward(moe.build_model(self.config, self.tensors), ids, [0, 3])
        b = moe.forward(moe.build_model(dict(self.config, norm_topk_prob=True), self.tensors),
                        ids, [0, 3])
        np.testing.assert_array_equal(a, b)

    def test_unexpected_tensors(self):
        """strict: an expert bias, a 5th expert or a q bias is refused; strict=False loads."""
        for name, shape in [("model.layers.0.mlp.gate.expert_bias", (4,)),
                            ("model.layers.1.mlp.experts.4.up_proj.weight", (24, 32)),
                            ("model.layers.0.self_attn.q_proj.bias", (32,))]:
            with self.subTest(name):
                extra = dict(self.tensors, **{name: np.zeros(shape, np.float32)})
                with self.assertRaisesRegex(ValueError, "unexpected tensor"):
                    moe.build_model(self.config, extra)
                moe.build_model(self.config, extra, strict=False)

    def test_bad_ids_and_rows(self):
        model = moe.build_model(self.config, self.tensors)
        with self.assertRaises(ValueError):
            moe.forward(model, [1, 64], [0])
        with self.assertRaises(ValueError):
            moe.forward(model, [1, 2], [2])
        with self.assertRaises(ValueError):
            moe.forward(model, [], [])


# ----------------------------------------------------------------------------------------
# check_moe_forward.py plumbing, against fake_moe_mosaic.py
# ----------------------------------------------------------------------------------------

class CheckMoeForwardPlumbingTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.mosaic = os.path.join(self.tmp.name, "mosaic")
        fake = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_moe_mosaic.py")
        with open(self.mosaic, "w") as f:
            f.write(f'#!/bin/sh\nexec {sys.executable} {fake} "$@"\n')
        os.chmod(self.mosaic, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def run_check(self, cases, bug="", extra=()):
        out = io.StringIO()
        with mock.patch.dict(os.environ, {"FAKE_MOSAIC_BUG": bug}), \
                contextlib.redirect_stdout(out):
            rc = check_moe_forward.main(["--mosaic", self.mosaic, "--cases", cases,
                                         "--workdir", os.path.join(self.tmp.name, "w")]
                                        + list(extra))
        return rc, out.getvalue()

    def test_correct_cli_passes(self):
        """A CLI that follows the contract passes, one PASS line per case."""
        rc, out = self.run_check("moe_tiny_preset_bf16,moe_all_experts_chosen")
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.count("PASS "), 2, out)
        self.assertIn("near-ties 0/", out)

    def test_bugs_are_reported(self):
        """Renormalised top-k weights, a missing QK-norm, a wrong torch_dtype: status 1."""
        for bug, case in [("renormalize_topk", "moe_gqa_fp32_odd_vocab"),
                          ("no_qk_norm", "moe_gqa_fp32_odd_vocab"),
                          ("fp16_torch_dtype", "moe_tiny_preset_bf16")]:
            with self.subTest(bug):
                rc, out = self.run_check(case, bug)
                self.assertEqual(rc, 1, out)
                self.assertIn("FAIL " + case, out)

    def test_near_ties_are_left_out_and_counted(self):
        """With a huge --tie-margin every sequence counts as a near-tie: the rows are not
        held to the tolerance, but more than a quarter left out fails the case; top k == E
        never ties."""
        rc, out = self.run_check("moe_gqa_fp32_odd_vocab", extra=("--tie-margin", "2"))
        self.assertEqual(rc, 1, out)
        self.assertIn("left out: routing margin", out)
        self.assertIn("too few left to check", out)
        rc, out = self.run_check("moe_all_experts_chosen", extra=("--tie-margin", "2"))
        self.assertEqual(rc, 0, out)
        self.assertTrue(check_moe_forward.excluded_too_many(2, 7))
        self.assertFalse(check_moe_forward.excluded_too_many(1, 4))



# ----------------------------------------------------------------------------------------
# (f) the cached forward and generation through generate_np (check_moe_generate.py's reference)
# ----------------------------------------------------------------------------------------

def full_ranges(L):
    return ref.key_ranges(None, range(L), 1, 1, L)


class MoeCachedForwardTest(unittest.TestCase):
    def setUp(self):
        config, tensors = tiny_moe_model(seed=70, layers=2, hidden=16, heads=4, kv_heads=2,
                                         experts=4, experts_per_token=2, expert_ffn=12,
                                         vocab=30)
        self.model = moe.build_model(config, tensors)
        self.x = np.array([3, 17, 0, 9, 29, 29, 29, 29, 5], dtype=np.int64)

    def test_full_forward_rows_equals_forward(self):
        """c0 = 0, c1 = L, full key ranges, an empty cache: forward(), routing included."""
        L = self.x.size
        got, routing = moe.forward_rows_with_routing(self.model, self.x, 0, L, full_ranges(L),
                                                     ref.new_cache(self.model, L), range(L))
        want, want_routing = moe.forward_with_routing(self.model, self.x, range(L))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        for a, b in zip(routing, want_routing):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-14)

    def test_some_rows_from_a_full_cache(self):
        """A cache filled by a full forward, then only [a, b) recomputed on the same canvas:
        the full forward's logits for those rows (no shift: row q is position q)."""
        L = self.x.size
        full = moe.forward(self.model, self.x, range(L))
        cache = ref.new_cache(self.model, L)
        moe.forward_rows(self.model, self.x, 0, L, full_ranges(L), cache, [])
        for a, b in ((4, 8), (0, 3), (8, 9)):
            got = moe.forward_rows(self.model, self.x, a, b, full_ranges(L)[a:b], cache,
                                   range(a, b))
            np.testing.assert_allclose(got, full[a:b], rtol=0, atol=1e-12,
                                       err_msg=f"[{a}, {b})")

    def test_stale_cache_is_used(self):
        """Changing a token inside [a, b) and recomputing only [a, b): the rows outside keep
        the old K/V, so the result is neither the old nor the new full forward."""
        L = self.x.size
        cache = ref.new_cache(self.model, L)
        moe.forward_rows(self.model, self.x, 0, L, full_ranges(L), cache, [])
        y = self.x.copy()
        y[5] = 11
        got = moe.forward_rows(self.model, y, 4, 8, full_ranges(L)[4:8], cache, range(4, 8))
        self.assertGreater(rel_err(got, moe.forward(self.model, y, range(4, 8))), 1e-6)
        self.assertGreater(rel_err(got, moe.forward(self.model, self.x, range(4, 8))), 1e-6)

    def test_bad_requests(self):
        """An uncomputed cache row, logits rows outside [c0, c1), a wrong range count."""
        L = self.x.size
        with self.assertRaisesRegex(ValueError, "no forward has computed"):
            moe.forward_rows(self.model, self.x, 4, 8, full_ranges(L)[4:8],
                             ref.new_cache(self.model, L), [4])
        with self.assertRaisesRegex(ValueError, "outside the computed"):
            moe.forward_rows(self.model, self.x, 0, L - 1, full_ranges(L)[:L - 1],
                             ref.new_cache(self.model, L), [L - 1])
        with self.assertRaisesRegex(ValueError, "key ranges for"):
            moe.forward_rows(self.model, self.x, 0, L, full_ranges(L)[1:],
                             ref.new_cache(self.model, L), [0])


def hand_llada_generate(config, tensors, prompt, G, B, steps, mask):
    """Greedy low_confidence LLaDA generate() of sampling.md §1, written out with the naive
    loop forward of this file (row p predicts p), the mask id never chosen."""
    x = list(prompt) + [mask] * G
    P = len(prompt)
    S = steps // (G // B)
    for b in range(G // B):
        lo, hi = P + b * B, P + (b + 1) * B
        M = sum(1 for q in range(lo, hi) if x[q] == mask)
        quota = [M // S + (1 if i < M % S else 0) for i in range(S)]
        for i in range(S):
            logits = naive_moe_forward(config, tensors, x)
            cand = []
            for q in range(lo, hi):
                if x[q] != mask:
                    continue
                row = logits[q].copy()
                row[mask] = -np.inf
                tok = int(np.argmax(row))
                conf = np.exp(logits[q][tok] - logits[q].max()) / \
                    np.sum(np.exp(logits[q] - logits[q].max()))
                cand.append((-conf, q, tok))
            for _, q, tok in sorted(cand)[:quota[i]]:
                x[q] = tok
    return x[P:]


class MoeGenerationTest(unittest.TestCase):
    def setUp(self):
        self.config, self.tensors = tiny_moe_model(seed=71, layers=2, hidden=16, heads=4,
                                                   kv_heads=2, experts=4,
                                                   experts_per_token=2, expert_ffn=12,
                                                   vocab=30)
        self.model = moe.build_model(self.config, self.tensors)
        self.gm = moe.GenerationModel(self.model)
        self.ids = gen.special_ids_from_config(self.config)

    def test_view(self):
        """LLaDA's sampler, full attention, the MoeModel's attributes, its own forward; the
        dense models keep reference_forward."""
        self.assertEqual(self.gm.family, ref.FAMILY_LLADA)
        self.assertIsNone(self.gm.block_attention)
        self.assertEqual(self.gm.vocab, 30)
        self.assertIs(self.gm.layers, self.model.layers)
        self.assertIs(gen.forward_module(self.gm), self.gm)
        dense_config, dense_tensors = tiny_model("llada", seed=1)
        self.assertIs(gen.forward_module(ref.build_model(dense_config, dense_tensors)), ref)

    def test_generate_equals_hand_loop(self):
        """generate_np on the view == sampling.md's loop written out on the naive forward."""
        for B, steps in ((8, 8), (4, 8), (4, 4)):
            r = gen.generate(self.gm, [3, 17, 0], gen.Params(gen_length=8, steps=steps,
                                                             block_length=B), self.ids)
            self.assertEqual(r.output_ids, hand_llada_generate(
                self.config, self.tensors, [3, 17, 0], 8, B, steps, self.ids.mask),
                f"B {B} steps {steps}")
            self.assertGreater(r.ties.closest.gap, 1e-9)

    def test_min_margin_tracks_every_forward(self):
        """min_margin = the smallest routing margin of the forwards since reset()."""
        self.assertEqual(self.gm.min_margin, math.inf)
        a, b = [3, 17, 0, 9], [5, 5, 1]
        self.gm.forward(self.gm, a, [0])
        self.assertEqual(self.gm.min_margin, moe.min_routing_margin(self.model, a))
        self.gm.forward(self.gm, b, [0])
        self.assertEqual(self.gm.min_margin, min(moe.min_routing_margin(self.model, a),
                                                 moe.min_routing_margin(self.model, b)))
        self.assertEqual(self.gm.forward_calls, 2)
        self.gm.reset()
        self.assertEqual((self.gm.min_margin, self.gm.forward_calls), (math.inf, 0))
        r = gen.generate(self.gm, [3, 17], gen.Params(gen_length=8, steps=8, block_length=4,
                                                      cache="dual"), self.ids)
        self.assertEqual(self.gm.forward_calls, r.forwards)
        self.assertLess(self.gm.min_margin, math.inf)
        config, tensors = tiny_moe_model(seed=72, experts=4, experts_per_token=4, vocab=30)
        every = moe.GenerationModel(moe.build_model(config, tensors))
        gen.generate(every, [3], gen.Params(gen_length=4, steps=4), self.ids)
        self.assertEqual(every.min_margin, math.inf)     # top 4 of 4 cannot flip

    def test_caches_change_the_result(self):
        """prefix and dual are approximate: on this model they decode differently from none
        (so a CLI that ignores --cache is caught); they recompute [bs, L) and [bs, be)
        between refreshes; each is deterministic."""
        p = dict(gen_length=12, steps=12, block_length=4, temperature=1.0, seed=2)
        out = {c: gen.generate(self.gm, [3, 17, 0], gen.Params(cache=c, **p), self.ids)
               for c in ("none", "prefix", "dual")}
        self.assertNotEqual(out["none"].output_ids, out["prefix"].output_ids)
        self.assertNotEqual(out["none"].output_ids, out["dual"].output_ids)
        self.assertEqual([out[c].cache for c in out], ["none", "prefix", "dual"])
        L = 15
        for t, c0, c1 in out["prefix"].computed:
            self.assertEqual((c0, c1), (0, L) if t % 4 == 0 else (3 + t // 4 * 4, L))
        for t, c0, c1 in out["dual"].computed:
            bs = 3 + t // 4 * 4
            self.assertEqual((c0, c1), (0, L) if t % 4 == 0 else (bs, bs + 4))
        again = gen.generate(self.gm, [3, 17, 0], gen.Params(cache="dual", **p), self.ids)
        self.assertEqual(again.output_ids, out["dual"].output_ids)


class CheckMoeGeneratePlumbingTest(unittest.TestCase):
    CASES = "moe_t0_b8_s16,moe_prefix_t0_b8_s8,moe_dual_t0_b8_s8,all_t0_b4_s8"

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.mosaic = os.path.join(self.tmp.name, "mosaic")
        fake = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_moe_mosaic.py")
        with open(self.mosaic, "w") as f:
            f.write(f'#!/bin/sh\nexec {sys.executable} {fake} "$@"\n')
        os.chmod(self.mosaic, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def run_check(self, cases, bug="", extra=()):
        out = io.StringIO()
        with mock.patch.dict(os.environ, {"FAKE_MOSAIC_BUG": bug}), \
                contextlib.redirect_stdout(out):
            rc = check_moe_generate.main(["--mosaic", self.mosaic, "--cases", cases,
                                          "--workdir", os.path.join(self.tmp.name, "w")]
                                         + list(extra))
        return rc, out.getvalue()

    def test_correct_cli_passes(self):
        """A CLI that follows the contract (float32) passes every case, nothing excluded."""
        rc, out = self.run_check(self.CASES)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.count("PASS "), 4, out)
        self.assertIn("routing near-ties: 0 of 12 requests excluded", out)

    def test_bugs_are_reported(self):
        """Dream's shift, renormalised top-k weights, a cache ignored, a wrong token: status
        1, the failing case named with the first difference."""
        for bug, case in [("shift", "moe_t0_b8_s16"), ("renormalize_topk", "moe_t0_b8_s16"),
                          ("no_qk_norm", "all_t0_b4_s8"),
                          ("cache_ignored", "moe_prefix_t0_b8_s8"),
                          ("cache_ignored", "moe_dual_t0_b8_s8"), ("token", "all_t0_b4_s8")]:
            with self.subTest(bug=bug, case=case):
                rc, out = self.run_check(case, bug)
                self.assertEqual(rc, 1, out)
                self.assertIn("FAIL " + case, out)
                self.assertIn("first difference at generated position", out)

    def test_routing_near_ties_are_excluded_and_counted(self):
        """With a huge --tie-margin every request of a top-2-of-8 model is excluded (and the
        case fails: too few left), while top 4 of 4 never ties."""
        rc, out = self.run_check("moe_t0_b8_s16,all_t0_b4_s8", extra=("--tie-margin", "2"))
        self.assertEqual(rc, 1, out)
        self.assertIn("ROUTING TIE: prompt 0", out)
        self.assertIn("too few left to check", out)
        self.assertIn("PASS all_t0_b4_s8", out)
        self.assertIn("routing near-ties: 3 of 6 requests excluded", out)
        self.assertTrue(check_moe_generate.excluded_too_many(2, 7))
        self.assertFalse(check_moe_generate.excluded_too_many(1, 4))


if __name__ == "__main__":
    unittest.main(verbosity=2)
