#!/usr/bin/python3
"""Self-test of the NumPy reference (no Mosaic needed): reader, writer and forward.

Run: /usr/bin/python3 tests/reference/test_reference_self.py
"""

import contextlib
import io
import json
import math
import os
import struct
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_forward  # noqa: E402
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402
from tiny_checkpoint_np import tiny_config, tiny_model  # noqa: E402


def rel_err(a, b):
    """max |a - b| / max |b|."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def write_raw_safetensors(path, header, data, header_len=None):
    """Write a file byte by byte: header dict (JSON, space padded to 8) and data bytes."""
    raw = json.dumps(header).encode("utf-8")
    raw += b" " * ((-len(raw)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw) if header_len is None else header_len))
        f.write(raw)
        f.write(data)


# ----------------------------------------------------------------------------------------
# safetensors
# ----------------------------------------------------------------------------------------

class SafetensorsReaderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_hand_built_file(self):
        """Known bit patterns of F32/BF16/F16, out-of-order offsets, metadata, padding."""
        bf16 = struct.pack("<4H", 0x3F80, 0xC000, 0x4049, 0x8000)     # 1, -2, 3.140625, -0
        f16 = struct.pack("<3H", 0x3C00, 0xC100, 0x7BFF)              # 1, -2.5, 65504
        f32 = struct.pack("<2f", 1.5, -2.0)
        header = {"__metadata__": {"format": "pt"},
                  "a": {"dtype": "F32", "shape": [2], "data_offsets": [14, 22]},
                  "b": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},
                  "c": {"dtype": "F16", "shape": [3], "data_offsets": [8, 14]}}
        path = os.path.join(self.dir, "x.safetensors")
        write_raw_safetensors(path, header, bf16 + f16 + f32)
        t = st.load_file(path)
        self.assertEqual(sorted(t), ["a", "b", "c"])
        np.testing.assert_array_equal(t["a"], np.array([1.5, -2.0], np.float32))
        np.testing.assert_array_equal(t["b"], np.array([[1, -2], [3.140625, 0]], np.float32))
        self.assertTrue(np.signbit(t["b"][1, 1]))
        np.testing.assert_array_equal(t["c"], np.array([1, -2.5, 65504], np.float32))
        for v in t.values():
            self.assertEqual(v.dtype, np.float32)
        self.assertEqual(list(st.load_file(path, ["c"])), ["c"])

    def test_malformed_files_are_rejected(self):
        """Bad dtype, out-of-range offsets, wrong byte count, bad lengths raise errors."""
        good = {"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
        cases = {
            "dtype": ({"t": {"dtype": "I8", "shape": [2], "data_offsets": [0, 2]}}, None),
            "range": ({"t": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, None),
            "count": ({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, None),
            "length": (good, 1 << 40),
        }
        for name, (header, header_len) in cases.items():
            with self.subTest(name):
                path = os.path.join(self.dir, name + ".safetensors")
                write_raw_safetensors(path, header, b"\0" * 8, header_len)
                with self.assertRaises(st.SafetensorsError):
                    st.load_file(path)
        short = os.path.join(self.dir, "short.safetensors")
        with open(short, "wb") as f:
            f.write(b"\1\0\0")
        with self.assertRaises(st.SafetensorsError):
            st.load_file(short)

    def test_bf16_rounding(self):
        """float32 -> bf16 rounds to nearest even; bf16 -> float32 is exact."""
        values = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -0.5, 1 + 2**-7 + 2**-9],
                          np.float32)
        bits = st.float32_to_bf16_bits(values)
        self.assertEqual([int(b) for b in bits], [0x3F80, 0x3F80, 0x3F82, 0xBF00, 0x3F81])
        np.testing.assert_array_equal(st.bf16_bits_to_float32(bits),
                                      np.array([1, 1, 1 + 2**-6, -0.5, 1 + 2**-7], np.float32))

    def test_round_trip_each_dtype(self):
        """Writer -> reader gives the values rounded to the stored dtype."""
        rng = np.random.default_rng(3)
        x = rng.standard_normal((5, 7)).astype(np.float32)
        expect = {"F32": x, "F16": x.astype(np.float16).astype(np.float32),
                  "BF16": st.bf16_bits_to_float32(st.float32_to_bf16_bits(x))}
        for dtype, want in expect.items():
            with self.subTest(dtype):
                path = os.path.join(self.dir, dtype + ".safetensors")
                st.save_file(path, {"w": x, "v": x[0]}, dtype)
                t = st.load_file(path)
                np.testing.assert_array_equal(t["w"], want)
                np.testing.assert_array_equal(t["v"], want[0])
                _, meta, start, _ = st.read_header(path)
                self.assertEqual(meta, {"format": "pt"})
                self.assertEqual(start % 8, 0)
        self.assertLess(np.max(np.abs(expect["BF16"] - x) / np.abs(x)), 2**-8 + 1e-9)

    def test_single_and_sharded_folders_agree(self):
        """A 3-shard folder with an index loads to the same tensors as a single file."""
        config, tensors = tiny_model("llada", seed=5)
        one = os.path.join(self.dir, "one")
        three = os.path.join(self.dir, "three")
        st.save_model_dir(one, config, tensors, "BF16", shards=1)
        st.save_model_dir(three, config, tensors, "BF16", shards=3)
        self.assertEqual(len(st.model_files(three)), 3)
        self.assertTrue(os.path.exists(os.path.join(three, "model-00003-of-00003.safetensors")))
        c1, t1 = st.load_model_dir(one)
        c3, t3 = st.load_model_dir(three)
        self.assertEqual(c1, config)
        self.assertEqual(c3, config)
        self.assertEqual(sorted(t1), sorted(tensors))
        self.assertEqual(sorted(t3), sorted(tensors))
        for name in tensors:
            np.testing.assert_array_equal(t1[name], t3[name])
        self.assertEqual(set(st.tensor_dtypes(three).values()), {"BF16"})

    def test_index_errors(self):
        """An index naming a missing shard, or a tensor absent from its shard, fails."""
        config, tensors = tiny_model("dream", seed=6)
        d = os.path.join(self.dir, "m")
        st.save_model_dir(d, config, tensors, "F32", shards=2)
        index_path = os.path.join(d, st.INDEX_NAME)
        with open(index_path) as f:
            index = json.load(f)
        name = next(iter(index["weight_map"]))
        other = [s for s in set(index["weight_map"].values())
                 if s != index["weight_map"][name]][0]
        index["weight_map"][name] = other
        with open(index_path, "w") as f:
            json.dump(index, f)
        with self.assertRaises(st.SafetensorsError):
            st.load_model_dir(d)
        index["weight_map"][name] = "model-00009-of-00009.safetensors"
        with open(index_path, "w") as f:
            json.dump(index, f)
        with self.assertRaises(st.SafetensorsError):
            st.load_model_dir(d)


# ----------------------------------------------------------------------------------------
# Forward
# ----------------------------------------------------------------------------------------

def naive_forward(config, tensors, ids):
    """Loop-by-loop forward (all L rows, unshifted), written apart from reference_forward.

    Literal HF names, explicit per-position / per-head / per-channel loops; float64 except
    the float32 RoPE angles.
    """
    llada = config["architectures"] == ["LLaDAModelLM"]
    H = config["d_model"] if llada else config["hidden_size"]
    nq = config["n_heads"] if llada else config["num_attention_heads"]
    nkv = config["n_kv_heads"] if llada else config["num_key_value_heads"]
    layers = config["n_layers"] if llada else config["num_hidden_layers"]
    eps = config["rms_norm_eps"]
    theta = config["rope_theta"]
    d = H // nq
    W = {k: v.astype(np.float64) for k, v in tensors.items()}

    def lin(x, name, bias_name=None):
        w = W[name]
        y = np.array([sum(w[o, i] * x[i] for i in range(w.shape[1]))
                      for o in range(w.shape[0])])
        if bias_name is not None and bias_name in W:
            y = y + W[bias_name]
        return y

    def norm(x, name):
        ms = sum(v * v for v in x) / len(x)
        return np.array([x[i] / math.sqrt(ms + eps) * W[name][i] for i in range(len(x))])

    def rope(vec, pos):
        out = vec.copy()
        for j in range(d // 2):
            inv = np.float32(1.0) / (np.float32(theta) ** (np.float32(2 * j) / np.float32(d)))
            angle = float(np.float32(pos) * np.float32(inv))
            c, s = math.cos(angle), math.sin(angle)
            out[j] = vec[j] * c - vec[j + d // 2] * s
            out[j + d // 2] = vec[j + d // 2] * c + vec[j] * s
        return out

    if llada:
        emb, fin, head = ("model.transformer.wte.weight", "model.transformer.ln_f.weight",
                          "model.transformer.ff_out.weight")
    else:
        emb, fin, head = "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"
    L = len(ids)
    h = [W[emb][t].copy() for t in ids]
    for li in range(layers):
        if llada:
            p = f"model.transformer.blocks.{li}."
            n1, q, k, v, o = "attn_norm", "q_proj", "k_proj", "v_proj", "attn_out"
            n2, gate, up, down = "ff_norm", "ff_proj", "up_proj", "ff_out"
        else:
            p = f"model.layers.{li}."
            n1, n2 = "input_layernorm", "post_attention_layernorm"
            q, k, v, o = "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", \
                "self_attn.o_proj"
            gate, up, down = "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"
        xs = [norm(x, p + n1 + ".weight") for x in h]
        Q = [lin(x, p + q + ".weight", p + q + ".bias") for x in xs]
        K = [lin(x, p + k + ".weight", p + k + ".bias") for x in xs]
        V = [lin(x, p + v + ".weight", p + v + ".bias") for x in xs]
        new_h = []
        for i in range(L):
            att = np.zeros(nq * d)
            for head_q in range(nq):
                head_kv = head_q // (nq // nkv)
                qi = rope(Q[i][head_q * d:(head_q + 1) * d], i)
                scores = []
                for j in range(L):
                    kj = rope(K[j][head_kv * d:(head_kv + 1) * d], j)
                    scores.append(sum(qi[c] * kj[c] for c in range(d)) / math.sqrt(d))
                m = max(scores)
                e = [math.exp(s - m) for s in scores]
                for j in range(L):
                    att[head_q * d:(head_q + 1) * d] += e[j] / sum(e) * \
                        V[j][head_kv * d:(head_kv + 1) * d]
            hi = h[i] + lin(att, p + o + ".weight")
            n = norm(hi, p + n2 + ".weight")
            g = lin(n, p + gate + ".weight")
            u = lin(n, p + up + ".weight")
            act = np.array([g[c] / (1 + math.exp(-g[c])) * u[c] for c in range(len(g))])
            new_h.append(hi + lin(act, p + down + ".weight"))
        h = new_h
    return np.array([lin(norm(x, fin), head) for x in h])


def unshifted_logits(model, ids):
    """LM-head output of every final hidden row (no Dream shift)."""
    return ref.linear(ref.final_hidden(model, ids), model.lm_head)


class ReferenceForwardTest(unittest.TestCase):
    def test_matches_loop_implementation(self):
        """Vectorised forward == naive loops (GQA, biases, 2 layers) for both families."""
        cases = {
            "llada_gqa_bias": tiny_model("llada", seed=11, layers=2, hidden=16, heads=4,
                                         kv_heads=2, ffn=24, vocab=20, qkv_bias=True),
            "dream_gqa": tiny_model("dream", seed=12, layers=2, hidden=16, heads=4,
                                    kv_heads=1, ffn=24, vocab=20, rope_theta=1e6),
        }
        ids = [3, 17, 0, 9, 9]
        for name, (config, tensors) in cases.items():
            with self.subTest(name):
                model = ref.build_model(config, tensors)
                want = naive_forward(config, tensors, ids)
                got = unshifted_logits(model, ids)
                self.assertLess(rel_err(got, want), 1e-12)

    def test_single_token_closed_form(self):
        """L = 1: attention is the identity on v, so the block is closed-form."""
        config, tensors = tiny_model("dream", seed=13, layers=1, hidden=8, heads=2,
                                     kv_heads=1, ffn=12, vocab=10)
        W = {k: v.astype(np.float64) for k, v in tensors.items()}
        p = "model.layers.0."

        def rms(x, w):
            return x / np.sqrt(np.mean(x ** 2) + config["rms_norm_eps"]) * w

        x = W["model.embed_tokens.weight"][4]
        n1 = rms(x, W[p + "input_layernorm.weight"])
        v = W[p + "self_attn.v_proj.weight"] @ n1 + W[p + "self_attn.v_proj.bias"]
        h = x + W[p + "self_attn.o_proj.weight"] @ np.concatenate([v, v])   # 2 heads, 1 kv
        n2 = rms(h, W[p + "post_attention_layernorm.weight"])
        g = W[p + "mlp.gate_proj.weight"] @ n2
        u = W[p + "mlp.up_proj.weight"] @ n2
        h = h + W[p + "mlp.down_proj.weight"] @ (g / (1 + np.exp(-g)) * u)
        want = W["lm_head.weight"] @ rms(h, W["model.norm.weight"])
        got = ref.forward(ref.build_model(config, tensors), [4], [0])
        self.assertLess(rel_err(got[0], want), 1e-13)

    def test_attention_is_bidirectional(self):
        """With q = k = 0 attention averages v over ALL positions, earlier rows included."""
        config, tensors = tiny_model("llada", seed=14, layers=1, hidden=8, heads=2,
                                     ffn=12, vocab=10)
        p = "model.transformer.blocks.0."
        tensors[p + "q_proj.weight"][:] = 0
        tensors[p + "k_proj.weight"][:] = 0
        model = ref.build_model(config, tensors)
        ids = [1, 2, 3]
        L = len(ids)
        x = model.embed[ids]
        layer = model.layers[0]
        n1 = ref.rms_norm(x, layer.attn_norm, model.eps)
        mean_v = (n1 @ layer.wv.T).mean(axis=0)
        cos, sin = ref.rope_cos_sin(L, model.head_dim, model.rope_theta)
        att = ref.attention(model, layer, n1, cos, sin)
        np.testing.assert_allclose(att, np.tile(mean_v @ layer.wo.T, (L, 1)), rtol=1e-12,
                                   atol=1e-12)
        a = ref.forward(model, [1, 2, 3], [0])
        b = ref.forward(model, [1, 2, 7], [0])
        self.assertGreater(np.max(np.abs(a - b)), 1e-3)   # row 0 sees the last token

    def test_rope(self):
        """Position 0 is the identity; a hand-computed d=4 rotation; relative positions."""
        x = np.arange(1.0, 9.0).reshape(2, 1, 4)   # [heads, L=1, d]
        cos, sin = ref.rope_cos_sin(1, 4, 10000.0)
        np.testing.assert_array_equal(ref.apply_rope(x, cos, sin), x)
        np.testing.assert_array_equal(ref.rope_inv_freq(4, 10000.0),
                                      np.array([1.0, 0.01], np.float32))
        cos, sin = ref.rope_cos_sin(4, 4, 10000.0)
        v = np.array([[[1.0, 2.0, 3.0, 4.0]] * 4])       # [1, L=4, 4]
        y = ref.apply_rope(v, cos, sin)[0, 3]
        a0, a1 = 3.0, float(np.float32(3) * np.float32(0.01))
        want = [1 * math.cos(a0) - 3 * math.sin(a0), 2 * math.cos(a1) - 4 * math.sin(a1),
                3 * math.cos(a0) + 1 * math.sin(a0), 4 * math.cos(a1) + 2 * math.sin(a1)]
        np.testing.assert_allclose(y, want, rtol=1e-14)
        rng = np.random.default_rng(0)
        q, k = rng.standard_normal((2, 1, 1, 16))
        cos, sin = ref.rope_cos_sin(40, 16, 10000.0)
        rq = ref.apply_rope(np.repeat(q, 40, axis=1), cos, sin)[0]
        rk = ref.apply_rope(np.repeat(k, 40, axis=1), cos, sin)[0]
        self.assertAlmostEqual(rq[5] @ rk[2], rq[35] @ rk[32], places=4)
        self.assertNotAlmostEqual(rq[5] @ rk[2], rq[5] @ rk[4], places=2)

    def test_gqa_head_mapping(self):
        """GQA == MHA with each kv head repeated for its consecutive query heads (h // g)."""
        config, tensors = tiny_model("dream", seed=15, layers=1, hidden=24, heads=6,
                                     kv_heads=2, ffn=16, vocab=12)
        mha_config = dict(config, num_key_value_heads=6)
        consecutive, interleaved = dict(tensors), dict(tensors)
        hd = 4
        for proj in ("k_proj", "v_proj"):
            for kind in ("weight", "bias"):
                name = f"model.layers.0.self_attn.{proj}.{kind}"
                heads = tensors[name].reshape((2, hd) + tensors[name].shape[1:])
                consecutive[name] = np.repeat(heads, 3, axis=0).reshape(
                    (6 * hd,) + tensors[name].shape[1:])
                interleaved[name] = np.concatenate([heads] * 3, axis=0).reshape(
                    (6 * hd,) + tensors[name].shape[1:])
        ids = [1, 5, 7, 2, 11, 0, 3]
        gqa = ref.forward(ref.build_model(config, tensors), ids, range(7))
        mha = ref.forward(ref.build_model(mha_config, consecutive), ids, range(7))
        wrong = ref.forward(ref.build_model(mha_config, interleaved), ids, range(7))
        self.assertLess(rel_err(gqa, mha), 1e-13)
        self.assertGreater(rel_err(wrong, mha), 1e-3)

    def test_requested_rows_and_dream_shift(self):
        """Rows are independent of which others are asked; Dream row p = hidden row p-1."""
        for family in ("llada", "dream"):
            with self.subTest(family):
                config, tensors = tiny_model(family, seed=16, hidden=32, heads=4,
                                             kv_heads=2)
                model = ref.build_model(config, tensors)
                ids = list(np.random.default_rng(1).integers(0, 64, 9))
                full = ref.forward(model, ids, range(9))
                some = ref.forward(model, ids, [8, 0, 4])
                np.testing.assert_allclose(some, full[[8, 0, 4]], rtol=1e-13, atol=1e-13)
                rows = unshifted_logits(model, ids)
                src = [0, 0, 1, 2, 3, 4, 5, 6, 7] if family == "dream" else list(range(9))
                np.testing.assert_allclose(full, rows[src], rtol=1e-13, atol=1e-13)

    def test_same_weights_both_families(self):
        """LLaDA and Dream name mappings (zero Dream biases) compute the same function."""
        lconf, ltens = tiny_model("llada", seed=17, hidden=16, heads=4, kv_heads=2, ffn=20)
        dconf = tiny_config("dream", hidden=16, heads=4, kv_heads=2, ffn=20)
        dconf["rms_norm_eps"] = lconf["rms_norm_eps"]
        lhp, dhp = ref.hparams_from_config(lconf), ref.hparams_from_config(dconf)
        dtens = {}
        for i in [None, 0, 1]:
            ln, dn = ref.tensor_names(lhp, i), ref.tensor_names(dhp, i)
            for role in ln:
                if ln[role] in ltens:
                    dtens[dn[role]] = ltens[ln[role]]
                elif role.startswith("b"):
                    dtens[dn[role]] = np.zeros(ltens[ln["w" + role[1:]]].shape[0], np.float32)
        ids = [4, 8, 15, 16, 23, 42]
        a = unshifted_logits(ref.build_model(lconf, ltens), ids)
        b = unshifted_logits(ref.build_model(dconf, dtens), ids)
        np.testing.assert_array_equal(a, b)

    def test_fp32_variant_close_to_fp64(self):
        """The same forward in float32 agrees with float64 to well under 1e-4."""
        config, tensors = tiny_model("dream", seed=18, layers=3, hidden=64, heads=8,
                                     kv_heads=2, ffn=96, vocab=100, rope_theta=1e6)
        ids = list(np.random.default_rng(2).integers(0, 100, 33))
        f64 = ref.forward(ref.build_model(config, tensors, np.float64), ids, range(33))
        f32 = ref.forward(ref.build_model(config, tensors, np.float32), ids, range(33))
        self.assertEqual(f32.dtype, np.float32)
        self.assertLess(rel_err(f32, f64), 1e-5)

    def test_tied_head_and_folder_load(self):
        """weight_tying without ff_out.weight reuses wte; folder load == in-memory build."""
        config, tensors = tiny_model("llada", seed=19, tied=True)
        self.assertNotIn("model.transformer.ff_out.weight", tensors)
        with tempfile.TemporaryDirectory() as d:
            st.save_model_dir(d, config, tensors, "F32", shards=2)
            loaded = ref.load_model(d)
        model = ref.build_model(config, tensors)
        self.assertIs(model.lm_head, model.embed)
        ids = [1, 2, 3, 4]
        np.testing.assert_array_equal(ref.forward(loaded, ids, [0, 3]),
                                      ref.forward(model, ids, [0, 3]))

    def test_bad_inputs_are_rejected(self):
        """Unknown family, wrong shape, missing tensor, bad ids/rows raise ValueError."""
        config, tensors = tiny_model("llada", seed=20)
        with self.assertRaises(ValueError):
            ref.build_model(dict(config, architectures=["LLaDAMoEModelLM"]), tensors)
        with self.assertRaises(ValueError):
            ref.build_model(dict(config, n_kv_heads=3), tensors)
        bad = dict(tensors)
        bad["model.transformer.blocks.1.up_proj.weight"] = np.zeros((3, 3), np.float32)
        with self.assertRaises(ValueError):
            ref.build_model(config, bad)
        del bad["model.transformer.blocks.1.up_proj.weight"]
        with self.assertRaises(ValueError):
            ref.build_model(config, bad)
        model = ref.build_model(config, tensors)
        with self.assertRaises(ValueError):
            ref.forward(model, [1, 64], [0])
        with self.assertRaises(ValueError):
            ref.forward(model, [1, 2], [2])

    def test_batch_is_per_sequence(self):
        """forward_batch concatenates independent per-sequence results in order."""
        config, tensors = tiny_model("dream", seed=21)
        model = ref.build_model(config, tensors)
        seqs = [([1, 2, 3], [2, 0]), ([5], [0]), ([7, 8], [1])]
        got = ref.forward_batch(model, seqs)
        want = np.concatenate([ref.forward(model, i, r) for i, r in seqs])
        np.testing.assert_array_equal(got, want)
        self.assertEqual(got.shape, (4, 64))


# ----------------------------------------------------------------------------------------
# check_forward.py plumbing, against fake_mosaic.py
# ----------------------------------------------------------------------------------------

class CheckForwardPlumbingTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.mosaic = os.path.join(self.tmp.name, "mosaic")
        fake = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_mosaic.py")
        with open(self.mosaic, "w") as f:
            f.write(f'#!/bin/sh\nexec {sys.executable} {fake} "$@"\n')
        os.chmod(self.mosaic, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def run_check(self, cases, bug=""):
        out = io.StringIO()
        with mock.patch.dict(os.environ, {"FAKE_MOSAIC_BUG": bug}), \
                contextlib.redirect_stdout(out):
            rc = check_forward.main(["--mosaic", self.mosaic, "--cases", cases,
                                     "--workdir", os.path.join(self.tmp.name, "w")])
        return rc, out.getvalue()

    def test_correct_cli_passes(self):
        """A CLI that follows the contract passes, one PASS line per case."""
        rc, out = self.run_check("dream_gqa2_fp16,llada_batch_mixed_lengths")
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.count("PASS "), 2, out)

    def test_bugs_are_reported(self):
        """A missing Dream shift or rows returned sorted make the check fail (status 1)."""
        for bug, case in [("no_dream_shift", "dream_gqa2_fp16"),
                          ("sorted_rows", "llada_batch_mixed_lengths")]:
            with self.subTest(bug):
                rc, out = self.run_check(case, bug)
                self.assertEqual(rc, 1, out)
                self.assertIn("FAIL " + case, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
