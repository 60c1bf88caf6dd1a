#!/usr/bin/python3
"""Self-test of the NumPy generation reference (no Mosaic needed): Philox, schedules, rules,
confidences, the generation loops, and the plumbing of check_generate.py.

Run: /usr/bin/python3 tests/reference/test_generate_self.py
"""

import contextlib
import io
import math
import os
import sys
import tempfile
import unittest
from dataclasses import replace
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_generate  # noqa: E402
import generate_np as gen  # noqa: E402
import philox_np as rng  # noqa: E402
import reference_forward as ref  # noqa: E402
from tiny_checkpoint_np import tiny_model  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def philox_python(counter, key):
    """Philox4x32-10 on Python ints (a second, scalar implementation)."""
    c, k = list(counter), list(key)
    for rnd in range(10):
        if rnd:
            k = [(k[0] + 0x9E3779B9) & 0xFFFFFFFF, (k[1] + 0xBB67AE85) & 0xFFFFFFFF]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k[1],
             p0 & 0xFFFFFFFF]
    return tuple(c)


# ----------------------------------------------------------------------------------------
# Philox and the addressed numbers of rng.md
# ----------------------------------------------------------------------------------------

class PhiloxTest(unittest.TestCase):
    def test_known_answers(self):
        """The three Random123 known-answer vectors of Philox4x32-10."""
        for counter, key, want in rng.KNOWN_ANSWERS:
            got = tuple(int(w) for w in rng.philox4x32_10(*counter, *key))
            self.assertEqual(got, want)
            self.assertEqual(philox_python(counter, key), want)
        rng.check_known_answers()

    def test_vectorised_matches_scalar(self):
        r = np.random.default_rng(0)
        c = r.integers(0, 2 ** 32, size=(4, 50), dtype=np.uint64)
        k = r.integers(0, 2 ** 32, size=(2, 50), dtype=np.uint64)
        words = rng.philox4x32_10(c[0], c[1], c[2], c[3], k[0], k[1])
        for j in range(50):
            want = philox_python([int(v) for v in c[:, j]], [int(v) for v in k[:, j]])
            self.assertEqual(tuple(int(w[j]) for w in words), want)
        # broadcasting: a vocabulary row against a column of positions
        w0 = rng.philox4x32_10(np.arange(5)[None, :], np.arange(3)[:, None], 7, 1, 9, 0)[0]
        self.assertEqual(w0.shape, (3, 5))
        self.assertEqual(int(w0[2, 4]), philox_python([4, 2, 7, 1], [9, 0])[0])

    def test_key_from_seed(self):
        self.assertEqual(rng.key_from_seed(0x0123456789ABCDEF), (0x89ABCDEF, 0x01234567))
        self.assertEqual(rng.key_from_seed(5), (5, 0))
        for bad in (-1, 2 ** 64):
            with self.assertRaises(ValueError):
                rng.key_from_seed(bad)

    def test_uniform_bits(self):
        """bits = (w0 << 21) ^ (w1 >> 11) (53 bits); u = (bits + 0.5) * 2^-53."""
        self.assertEqual(float(rng.uniform_from_words(0, 0)), 0.5 * 2.0 ** -53)
        self.assertEqual(float(rng.uniform_from_words(0, 0x800)), 1.5 * 2.0 ** -53)
        self.assertEqual(float(rng.uniform_from_words(1, 0)), (2 ** 21 + 0.5) * 2.0 ** -53)
        w0, w1 = 0x12345678, 0x9ABCDEF0
        bits = ((w0 << 21) ^ (w1 >> 11)) & ((1 << 53) - 1)
        self.assertEqual(float(rng.uniform_from_words(w0, w1)), (bits + 0.5) / 2.0 ** 53)
        # bits >= 2^52: bits + 0.5 rounds to even in double; the largest bits give 1.0
        self.assertEqual(float(rng.uniform_from_words(0x80000000, 0)), 0.5)
        self.assertEqual(float(rng.uniform_from_words(0xFFFFFFFF, 0xFFFFFFFF)), 1.0)
        self.assertEqual(float(rng.gumbel_from_uniform(1.0)), math.inf)
        u = rng.uniform_from_words(np.arange(1000, dtype=np.uint32) * 4294967,
                                   np.arange(1000, dtype=np.uint32) * 7919)
        self.assertTrue(np.all((u > 0) & (u < 1)))

    def test_addressing(self):
        """u(index, position, step, stream) = Philox(counter = (index, position, step,
        stream), key = seed words)."""
        seed = 0xDEADBEEF00C0FFEE
        key = (seed & 0xFFFFFFFF, seed >> 32)
        w = philox_python([17, 5, 3, rng.STREAM_GUMBEL_TOKEN], key)
        bits = ((w[0] << 21) ^ (w[1] >> 11)) & ((1 << 53) - 1)
        u = (bits + 0.5) / 2.0 ** 53
        self.assertEqual(float(rng.uniform_at(seed, 17, 5, 3, 1)), u)
        self.assertEqual(float(rng.gumbel_at(seed, 17, 5, 3, 1)), -math.log(-math.log(u)))
        a = rng.uniform_at(seed, 0, np.arange(8), 3, rng.STREAM_RANDOM_CONFIDENCE)
        b = rng.uniform_at(seed, 0, np.arange(8), 3, rng.STREAM_TRANSFER)
        self.assertFalse(np.any(a == b))       # streams never share a counter

    def test_gumbel_max_samples_softmax(self):
        """argmax(l / T + g) over many positions is distributed as softmax(l / T)."""
        logits = np.array([1.0, 0.0, -0.5, 2.0, 0.3])
        T, n = 0.8, 40000
        g = rng.gumbel_at(123, np.arange(5)[None, :], np.arange(n)[:, None], 0,
                          rng.STREAM_GUMBEL_TOKEN)
        self.assertAlmostEqual(float(np.mean(g)), 0.5772156649, delta=0.02)
        x = np.argmax(logits / T + g, axis=1)
        freq = np.bincount(x, minlength=5) / n
        p = np.exp(logits / T) / np.sum(np.exp(logits / T))
        self.assertLess(np.max(np.abs(freq - p)), 0.01)


# ----------------------------------------------------------------------------------------
# Schedules and selection rules
# ----------------------------------------------------------------------------------------

def dream_counts(G, S, eps=1e-3):
    """Tokens committed per step by a non-origin alg (each step commits exactly n)."""
    ts = gen.dream_timesteps(S, eps)
    masked, out = G, []
    for i in range(S):
        n = gen.dream_transfer_count(masked, ts, i, S)
        out.append(n)
        masked -= n
    return out


class ScheduleTest(unittest.TestCase):
    def test_dream_counts_match_measurements(self):
        """shared/reference/sampling.md §2, measured with torch 2.11 on an H200."""
        self.assertEqual(dream_counts(64, 8), [7, 8, 8, 8, 8, 8, 8, 9])
        for G, S in ((512, 512), (256, 256)):
            c = dream_counts(G, S)
            self.assertEqual(c, [0] + [1] * (S - 2) + [2], (G, S))
        for G, S in ((256, 128), (128, 64)):
            c = dream_counts(G, S)
            self.assertEqual(c[:2], [1, 2])
            self.assertEqual(c[-1], 3)
            self.assertEqual(set(c[1:-1]), {2})
            self.assertEqual(sum(c), G)

    # torch.linspace(1, eps, S + 1, device="cuda") in float32, torch 2.11 on an H200
    CUDA_LINSPACE = {
        (6, 0.1): "1p+0 1.b33334p-1 1.666668p-1 1.199998p-1 1.999998p-2 1p-2 1.99999ap-4",
        (10, 0.2): "1p+0 1.d70a3ep-1 1.ae147cp-1 1.851eb8p-1 1.5c28f6p-1 1.333334p-1 "
                   "1.0a3d7p-1 1.c28f5cp-2 1.70a3d8p-2 1.1eb852p-2 1.99999ap-3",
        (12, 0.2): "1p+0 1.dddddep-1 1.bbbbbcp-1 1.99999ap-1 1.777778p-1 1.555554p-1 "
                   "1.333334p-1 1.111112p-1 1.dddde0p-2 1.99999ap-2 1.555556p-2 "
                   "1.111112p-2 1.99999ap-3",
    }

    def test_dream_timesteps_match_cuda(self):
        """Fused multiply-adds, as nvcc compiles the kernel (a product rounded before the
        sum gives different points for each of these)."""
        for (S, eps), text in self.CUDA_LINSPACE.items():
            want = np.array([float.fromhex("0x" + v) for v in text.split()], np.float32)
            got = gen.dream_timesteps(S, eps)
            self.assertEqual(got.dtype, np.float32)
            np.testing.assert_array_equal(got, want, err_msg=f"S={S} eps={eps}")
            f = np.float32
            step = f((f(eps) - f(1)) / f(S))
            unfused = [f(1) + f(step * f(k)) if k < (S + 1) // 2 else
                       f(f(eps) - f(step * f(S - k))) for k in range(S + 1)]
            self.assertFalse(np.array_equal(np.array(unfused, np.float32), want))

    def test_fma_f32(self):
        f = np.float32
        a, b, c = f(1 + 2 ** -12), f(1 + 2 ** -12), f(-1)
        self.assertEqual(gen.fma_f32(a, b, c), f(2 ** -11 + 2 ** -24))    # one rounding
        self.assertEqual(gen.fma_f32(f(3), 5, f(0.5)), f(15.5))
        self.assertEqual(gen.fma_f32(f(-0.25), 2, f(1)), f(0.5))

    def test_dream_fraction_and_count(self):
        """1 - s/t and |M| * (1 - s/t) are float32 operations, truncated; last step |M|."""
        f = np.float32
        ts = gen.dream_timesteps(6, 0.1)
        self.assertEqual(ts[0], f(1))
        self.assertEqual(ts[-1], f(0.1))
        frac = gen.dream_fraction(ts, 3)
        self.assertEqual(frac, f(f(1) - f(ts[4] / ts[3])))
        self.assertEqual(gen.dream_transfer_count(11, ts, 3, 6), int(f(f(11) * frac)))
        self.assertEqual(gen.dream_transfer_count(11, ts, 5, 6), 11)
        # measured on CUDA (torch 2.11, the reference loop; unfused points would give
        # 2, 2, 2, 3, 2, 6 and 0 x 13, 1, 1, 0, 1, 1, 3)
        self.assertEqual(dream_counts(17, 6, 0.1), [2, 2, 2, 2, 3, 6])
        self.assertEqual(dream_counts(7, 19, 0.05), [0] * 14 + [1, 1, 1, 1, 3])
        self.assertEqual(dream_counts(24, 19, 0.05), [1] * 16 + [2, 2, 4])

    def test_llada_quota(self):
        self.assertEqual(gen.llada_quota(10, 4), [3, 3, 2, 2])
        self.assertEqual(gen.llada_quota(16, 16), [1] * 16)
        self.assertEqual(gen.llada_quota(12, 5), [3, 3, 2, 2, 2])
        self.assertEqual(gen.llada_quota(8, 16), [1] * 8 + [0] * 8)
        self.assertEqual(gen.llada_quota(32, 4), [8] * 4)


class RuleTest(unittest.TestCase):
    def test_threshold(self):
        """The most confident always; every other iff conf >= tau (equal passes)."""
        self.assertEqual(gen.threshold_count([0.9, 0.5, 0.5, 0.4], 0.5), 3)
        self.assertEqual(gen.threshold_count([0.1, 0.05], 0.5), 1)
        self.assertEqual(gen.threshold_count([0.3], 0.9), 1)
        self.assertEqual(gen.threshold_count([], 0.9), 0)

    def test_factor(self):
        f = 1.0
        self.assertEqual(gen.factor_thresholds(4, f), [-1.0, 1 - 1 / 3, 1 - 1 / 4, 1 - 1 / 5])
        self.assertEqual(gen.factor_count([0.01], f), 1)                      # n = 1
        self.assertEqual(gen.factor_count([0.99, 0.9, 0.8, 0.85], f), 4)      # none fails
        self.assertEqual(gen.factor_count([0.99, 0.9, 0.8, 0.1], f), 4)       # fails at n
        self.assertEqual(gen.factor_count([0.99, 0.9, 0.1, 0.05, 0.01], f), 2)   # rank 3
        self.assertEqual(gen.factor_count([0.99, 0.5, 0.1], f), 1)            # rank 2
        self.assertEqual(gen.factor_count([0.99, 0.5], f), 2)                 # rank 2 = n
        self.assertEqual(gen.factor_count([0.9, 0.75, 0.75, 0.1, 0.0], f), 3)  # 0.75 = tau_3
        self.assertEqual(gen.factor_count([-2.0, -3.0, -4.0], f), 1)          # rank 1 fails
        # tau_r = 1 - 4.5 / (r + 1): -0.5, -0.125, 0.1 -> tiny confidences stop at rank 4
        self.assertEqual(gen.factor_count([0.03] * 7, 4.5), 3)
        self.assertEqual(gen.factor_count([0.03] * 4, 4.5), 4)

    def test_top_positions_ties(self):
        """Highest value first; among equal values the lowest position first."""
        vals = [1.0, 3.0, 3.0, 2.0, 3.0]
        pos = [14, 12, 11, 13, 10]
        self.assertEqual([pos[i] for i in gen.top_positions(vals, pos, 2)], [10, 11])
        self.assertEqual([pos[i] for i in gen.top_positions(vals, pos, 4)], [10, 11, 12, 13])
        self.assertEqual(len(gen.top_positions(vals, pos, 0)), 0)
        pos0 = [7, 5, 6]
        self.assertEqual([pos0[i] for i in gen.top_positions([0.0] * 3, pos0, 2)], [5, 6])

    def test_stop_reached(self):
        M, E = 99, 7
        self.assertTrue(gen.stop_reached(np.array([1, 2, 3, E, M]), 2, {E}, M, E))
        self.assertFalse(gen.stop_reached(np.array([1, 2, M, E, 4]), 2, {E}, M, E))
        self.assertFalse(gen.stop_reached(np.array([1, E, 3, 4]), 2, {E}, M, E))     # E in the prompt
        self.assertTrue(gen.stop_reached(np.array([1, 2, 8, E]), 2, {E, 8}, M, E))
        self.assertFalse(gen.stop_reached(np.array([1, 2, 3, 4]), 2, {E}, M, E))
        x = np.array([1, 2, 3, E, M, 5, M])
        self.assertTrue(gen.stop_reached(x, 2, {E}, M, E))
        self.assertEqual(list(x), [1, 2, 3, E, E, 5, E])          # masks after e become EOS


# ----------------------------------------------------------------------------------------
# Token choice and confidences on hand-made logits
# ----------------------------------------------------------------------------------------

def softmax(v):
    e = np.exp(v - np.max(v))
    return e / np.sum(e)


class LladaConfidenceTest(unittest.TestCase):
    L = np.array([[2.0, 1.0, 0.5, 2.0, -1.0, 1.5]])
    EOS, EOT = 5, 2

    def choose(self, T=0.0, choice=(), stats=(), logits=None, seed=0):
        logits = self.L if logits is None else logits
        return gen.llada_choose(logits, np.array([9]), 4, T, set(choice), set(stats), seed)

    def test_greedy_argmax_lowest_id_and_softmax(self):
        x0, conf, gap = self.choose()
        self.assertEqual(int(x0[0]), 0)                     # 0 and 3 tie: lowest id
        self.assertEqual(float(gap[0]), 0.0)
        self.assertAlmostEqual(float(conf[0]), softmax(self.L[0])[0], places=15)

    def test_logits_eos_inf(self):
        L = np.array([[0.0, 1.0, 0.5, 0.2, -1.0, 3.0]])   # EOS (5) is the argmax
        x0, conf, _ = self.choose(choice={5}, stats={5}, logits=L)
        self.assertEqual(int(x0[0]), 1)
        self.assertAlmostEqual(float(conf[0]), softmax(L[0, :5])[1], places=15)

    def test_confidence_eos_eot_inf_bans(self):
        ids = gen.SpecialIds(mask=99, eos=self.EOS, eot=self.EOT)
        p = gen.Params(gen_length=4, steps=4, confidence_eos_eot_inf=True)
        # The mask id (99) is never a choice; EoT / EOS leave only the statistics.
        self.assertEqual(gen.llada_bans(p, ids), ({99}, {self.EOS, self.EOT}))
        self.assertEqual(gen.llada_bans(replace(p, temperature=0.5), ids), ({99}, {self.EOT}))
        p2 = replace(p, logits_eos_inf=True, temperature=0.5)
        self.assertEqual(gen.llada_bans(p2, ids), ({self.EOS, 99}, {self.EOS, self.EOT}))
        self.assertEqual(gen.llada_bans(gen.Params(gen_length=4, steps=4), ids), ({99}, set()))
        with self.assertRaises(gen.GenerationError):
            gen.llada_bans(p, replace(ids, eot=None))

    def test_confidence_of_banned_x0_is_zero(self):
        L = np.array([[0.0, 1.0, 4.0, 0.2, -1.0, 3.0]])   # EoT (2) is the argmax
        x0, conf, _ = self.choose(stats={self.EOT, self.EOS}, logits=L)
        self.assertEqual((int(x0[0]), float(conf[0])), (2, 0.0))
        # T > 0 quirk: EOS stays in the softmax, EoT is out; others renormalise
        L2 = np.array([[0.0, 5.0, 4.0, 0.2, -1.0, 3.0]])
        x0, conf, _ = self.choose(T=1e-3, stats={self.EOT}, logits=L2)
        self.assertEqual(int(x0[0]), 1)
        keep = [0, 1, 3, 4, 5]
        self.assertAlmostEqual(float(conf[0]), softmax(L2[0, keep])[1], places=15)

    def test_temperature_is_gumbel_max(self):
        T, seed = 0.7, 42
        x0, conf, _ = self.choose(T=T, seed=seed)
        g = rng.gumbel_at(seed, np.arange(6), 9, 4, rng.STREAM_GUMBEL_TOKEN)
        want = int(np.argmax(self.L[0] / T + g))
        self.assertEqual(int(x0[0]), want)
        self.assertAlmostEqual(float(conf[0]), softmax(self.L[0])[want], places=15)


class DreamConfidenceTest(unittest.TestCase):
    P = np.array([0.5, 0.3, 0.15, 0.05])
    L = np.log(P)[None, :] + 1.0

    def sample(self, alg, T=0.0, top_p=None, top_k=None, logits=None, seed=0):
        logits = self.L if logits is None else logits
        return gen.dream_sample_tokens(logits, np.array([3]), 2, T, top_p, top_k, alg, seed)

    def test_maskgit_plus(self):
        x0, conf, _ = self.sample("maskgit_plus")
        self.assertEqual(int(x0[0]), 0)
        self.assertAlmostEqual(float(conf[0]), 0.5, places=14)

    def test_topk_margin(self):
        _, conf, _ = self.sample("topk_margin")
        self.assertAlmostEqual(float(conf[0]), 0.2, places=14)

    def test_entropy_exact(self):
        _, conf, _ = self.sample("entropy")
        self.assertAlmostEqual(float(conf[0]), float(np.sum(self.P * np.log(self.P))),
                               places=14)
        _, conf, _ = self.sample("entropy", logits=np.zeros((1, 8)))
        self.assertAlmostEqual(float(conf[0]), -math.log(8), places=14)

    def test_top_p(self):
        """cum = .5, .8, .95, 1: keep j iff j = 0 or cum[j-1] <= p."""
        _, conf, _ = self.sample("maskgit_plus", top_p=0.7)
        self.assertAlmostEqual(float(conf[0]), 0.5 / 0.8, places=14)
        _, conf, _ = self.sample("maskgit_plus", top_p=0.8)     # cum 0.8 is not > 0.8
        self.assertAlmostEqual(float(conf[0]), 0.5 / 0.95, places=14)
        _, conf, _ = self.sample("maskgit_plus", top_p=0.1)     # the top is always kept
        self.assertAlmostEqual(float(conf[0]), 1.0, places=14)
        _, conf, _ = self.sample("topk_margin", top_p=0.1)      # one kept: p(2nd) = 0
        self.assertAlmostEqual(float(conf[0]), 1.0, places=14)
        _, conf, _ = self.sample("maskgit_plus", top_p=1.0)     # p >= 1: off
        self.assertAlmostEqual(float(conf[0]), 0.5, places=14)

    def test_top_k_keeps_ties(self):
        L = np.array([[3.0, 2.0, 2.0, 1.0]])
        _, conf, _ = self.sample("maskgit_plus", top_k=2, logits=L)
        self.assertAlmostEqual(float(conf[0]), softmax(L[0, :3])[0], places=14)
        _, conf, _ = self.sample("maskgit_plus", top_k=1, logits=L)
        self.assertAlmostEqual(float(conf[0]), 1.0, places=14)
        _, conf, _ = self.sample("maskgit_plus", top_k=10, logits=L)    # k > V: all
        self.assertAlmostEqual(float(conf[0]), softmax(L[0])[0], places=14)

    def test_top_p_then_top_k(self):
        """top-p first; then top-k over what is kept (k larger than kept: no change)."""
        _, conf, _ = self.sample("maskgit_plus", top_p=0.9, top_k=2)
        self.assertAlmostEqual(float(conf[0]), 0.5 / 0.8, places=14)
        _, conf, _ = self.sample("maskgit_plus", top_p=0.7, top_k=3)
        self.assertAlmostEqual(float(conf[0]), 0.5 / 0.8, places=14)

    def test_temperature(self):
        """T > 0: l' = l / T; x0 = argmax(l' + g) over kept ids; conf = probs'[x0]."""
        T, seed = 0.5, 7
        x0, conf, _ = self.sample("maskgit_plus", T=T, seed=seed)
        g = rng.gumbel_at(seed, np.arange(4), 3, 2, rng.STREAM_GUMBEL_TOKEN)
        want = int(np.argmax(self.L[0] / T + g))
        self.assertEqual(int(x0[0]), want)
        self.assertAlmostEqual(float(conf[0]), softmax(self.L[0] / T)[want], places=14)
        _, conf, _ = self.sample("entropy", T=T)
        q = softmax(self.L[0] / T)
        self.assertAlmostEqual(float(conf[0]), float(np.sum(q * np.log(q))), places=14)

    def test_argmax_lowest_id(self):
        L = np.array([[0.0, 2.0, 1.0, 2.0]])
        x0, _, gap = self.sample("maskgit_plus", logits=L)
        self.assertEqual((int(x0[0]), float(gap[0])), (1, 0.0))


# ----------------------------------------------------------------------------------------
# The loops on tiny in-memory models
# ----------------------------------------------------------------------------------------

def tiny(family, vocab=64, seed=4):
    config, tensors = tiny_model(family, seed=seed, hidden=32, heads=4, kv_heads=2, ffn=48,
                                 vocab=vocab)
    model = ref.build_model(config, tensors)
    return model, gen.SpecialIds(mask=vocab - 1, eos=vocab - 2)


PROMPT = [3, 14, 15, 9, 2]


def steps_of(res):
    """Committed generated positions per step (from commit_step)."""
    out = {}
    for j, t in enumerate(res.commit_step):
        if t >= 0:
            out.setdefault(t, []).append(j)
    return out


class LladaLoopTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model, cls.ids = tiny("llada")

    def run_gen(self, prompt=PROMPT, **kw):
        r = gen.generate(self.model, prompt, gen.Params(**kw), self.ids)
        self.assertEqual(r.mask_commits, 0)     # the model and seeds were chosen so
        return r

    def test_semi_autoregressive_quota(self):
        r = self.run_gen(gen_length=12, block_length=4, steps=6)
        self.assertEqual(r.steps, 6)
        self.assertNotIn(self.ids.mask, r.output_ids)
        per = steps_of(r)
        for t in range(6):
            self.assertEqual(len(per[t]), 2)
            self.assertTrue(all(j // 4 == t // 2 for j in per[t]))   # block t // 2 only

    def test_more_steps_than_tokens(self):
        """More steps than positions could only add steps of quota 0: refused without a rule
        (whose steps is a cap, and may exceed G)."""
        with self.assertRaises(gen.GenerationError):
            self.run_gen(gen_length=8, block_length=4, steps=12)
        r = self.run_gen(gen_length=8, block_length=4, steps=12, threshold=0.0)
        self.assertNotIn(self.ids.mask, r.output_ids)

    def test_uneven_quota(self):
        r = self.run_gen(gen_length=12, block_length=12, steps=5)
        self.assertEqual([len(steps_of(r)[t]) for t in range(5)], [3, 3, 2, 2, 2])

    def test_errors(self):
        for kw in (dict(gen_length=10, block_length=4, steps=4),     # G % B
                   dict(gen_length=8, block_length=4, steps=3),      # steps % blocks
                   dict(gen_length=8, block_length=16, steps=4),     # B > G
                   dict(gen_length=8, block_length=2, steps=2),      # steps < blocks
                   dict(gen_length=8, steps=4, remasking="other"),
                   dict(gen_length=8, steps=4, threshold=0.5, factor=1.0),
                   dict(gen_length=8, steps=4, remasking="random", threshold=0.5)):
            with self.subTest(kw), self.assertRaises(gen.GenerationError):
                self.run_gen(**kw)
        with self.assertRaises(gen.GenerationError):
            self.run_gen(prompt=[1, self.ids.mask], gen_length=4, steps=4)

    def test_seeds_and_batch_independence(self):
        kw = dict(gen_length=8, block_length=4, steps=8, temperature=1.0, seed=5)
        a = self.run_gen(**kw)
        self.assertEqual(a.output_ids, self.run_gen(**kw).output_ids)
        self.assertNotEqual(a.output_ids, self.run_gen(**dict(kw, seed=6)).output_ids)
        prompts = [[1], PROMPT, list(range(13))]
        batch = gen.generate_batch(self.model, prompts, gen.Params(**kw), self.ids)
        for p, b in zip(prompts, batch):
            self.assertEqual(b.output_ids, self.run_gen(prompt=p, **kw).output_ids)
            self.assertEqual(b.prompt_ids, p)

    def test_greedy_ignores_seed(self):
        kw = dict(gen_length=8, block_length=8, steps=4)
        self.assertEqual(self.run_gen(seed=1, **kw).output_ids,
                         self.run_gen(seed=2, **kw).output_ids)

    def test_random_remasking_follows_stream_2(self):
        seed = 77
        r = self.run_gen(gen_length=8, block_length=8, steps=4, remasking="random", seed=seed)
        P, masked = len(PROMPT), list(range(8))
        for t in range(4):
            u = rng.uniform_at(seed, 0, np.array([P + j for j in masked]), t,
                               rng.STREAM_RANDOM_CONFIDENCE)
            top = sorted(masked[i] for i in np.argsort(-u, kind="stable")[:2])
            self.assertEqual(sorted(steps_of(r)[t]), top)
            masked = [j for j in masked if j not in top]

    def test_cfg_combines_logits(self):
        x = np.array(PROMPT + [self.ids.mask] * 4)
        rows = [5, 7]
        un_x = x.copy()
        un_x[:5] = self.ids.mask
        cond, un = ref.forward(self.model, x, rows), ref.forward(self.model, un_x, rows)
        got = gen._logits(self.model, x, rows, 1.5, 5, self.ids.mask)
        np.testing.assert_allclose(got, un + 2.5 * (cond - un), rtol=0, atol=1e-12)
        np.testing.assert_array_equal(gen._logits(self.model, x, rows, 0.0, 5, 0), cond)
        a = self.run_gen(gen_length=8, block_length=8, steps=8, cfg_scale=1.5)
        self.assertNotIn(self.ids.mask, a.output_ids)

    def test_threshold_and_factor(self):
        one = self.run_gen(gen_length=8, block_length=4, steps=8, threshold=1.1)
        self.assertEqual(one.steps, 8)                               # one token a step
        allb = self.run_gen(gen_length=8, block_length=4, steps=8, threshold=0.0)
        self.assertEqual(allb.steps, 2)                              # a block a step
        self.assertEqual(set(allb.commit_step[:4]), {0})
        many = self.run_gen(gen_length=8, block_length=4, steps=2, factor=100.0)
        self.assertEqual(many.steps, 2)                              # steps is no bound
        f1 = self.run_gen(gen_length=8, block_length=8, steps=8, factor=1.0)
        self.assertNotIn(self.ids.mask, f1.output_ids)
        self.assertLessEqual(f1.steps, 8)

    def test_stop_at_eos(self):
        kw = dict(gen_length=12, block_length=4, steps=12)
        full = self.run_gen(**kw)
        eot = full.output_ids[5]
        ids = replace(self.ids, eot=eot)
        stop = gen.generate(self.model, PROMPT, gen.Params(stop_at_eos=True, **kw), ids)
        self.assertTrue(stop.stopped_at_eos)
        self.assertLess(stop.steps, full.steps)
        e = stop.output_ids.index(eot)
        for j, t in enumerate(full.commit_step):
            # decoded before the stop: as in the full run; still masked then: EOS after e
            want = full.output_ids[j] if t < stop.steps else self.ids.eos
            self.assertEqual(stop.output_ids[j], want)
        self.assertNotIn(self.ids.mask, stop.output_ids[:e])
        plain = gen.generate(self.model, PROMPT, gen.Params(**kw), ids)
        self.assertEqual(plain.output_ids, full.output_ids)   # EoT alone changes nothing


class DreamLoopTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model, cls.ids = tiny("dream")

    def run_gen(self, prompt=PROMPT, **kw):
        r = gen.generate(self.model, prompt, gen.Params(**kw), self.ids)
        self.assertEqual(r.mask_commits, 0)
        return r

    def test_counts_follow_schedule(self):
        for alg in ("maskgit_plus", "topk_margin", "entropy"):
            for G, S in ((16, 8), (8, 8), (17, 6)):
                with self.subTest(alg=alg, G=G, S=S):
                    r = self.run_gen(gen_length=G, steps=S, alg=alg)
                    per = steps_of(r)
                    self.assertEqual([len(per.get(t, [])) for t in range(S)],
                                     dream_counts(G, S))
                    self.assertEqual(r.steps, S)
                    self.assertNotIn(self.ids.mask, r.output_ids)

    def test_origin_follows_stream_3(self):
        seed, G, S = 9, 12, 6
        r = self.run_gen(gen_length=G, steps=S, alg="origin", seed=seed)
        ts = gen.dream_timesteps(S, 1e-3)
        masked = list(range(G))
        for t in range(r.steps):
            prob = 1.0 if t == S - 1 else float(gen.dream_fraction(ts, t))
            u = rng.uniform_at(seed, 0, np.array([5 + j for j in masked]), t,
                               rng.STREAM_TRANSFER)
            want = [j for j, v in zip(masked, u) if v < prob]
            self.assertEqual(sorted(steps_of(r).get(t, [])), want)
            masked = [j for j in masked if j not in want]
        self.assertEqual(masked, [])
        self.assertLessEqual(r.steps, S)

    def test_alg_temp_follows_stream_4(self):
        seed = 4
        a = self.run_gen(gen_length=8, steps=4, alg="maskgit_plus", alg_temp=0.5, seed=seed)
        b = self.run_gen(gen_length=8, steps=4, alg="maskgit_plus", seed=seed)
        self.assertEqual([len(steps_of(a)[t]) for t in range(4)], dream_counts(8, 4))
        self.assertNotEqual(a.commit_step, b.commit_step)

    def test_rules_and_errors(self):
        one = self.run_gen(gen_length=8, steps=8, alg="maskgit_plus", threshold=1.1)
        self.assertEqual(one.steps, 8)
        allc = self.run_gen(gen_length=8, steps=8, alg="topk_margin", threshold=0.0)
        self.assertEqual(allc.steps, 1)
        capped = self.run_gen(gen_length=8, steps=3, alg="maskgit_plus", threshold=1.1)
        self.assertEqual(capped.steps, 3)                # steps bounds the total
        self.assertEqual(capped.output_ids.count(self.ids.mask), 5)
        for kw in (dict(alg="bogus"), dict(alg="maskgit_plus", top_k=-1),
                   dict(alg="maskgit_plus", threshold=0.5, factor=1.0)):
            with self.subTest(kw), self.assertRaises(gen.GenerationError):
                self.run_gen(gen_length=8, steps=8, **kw)

    def test_rules_rank_by_chosen_probability(self):
        """With a rule every alg ranks by p(x0) (origin too) and alg_temp is ignored."""
        for rule in (dict(threshold=0.03), dict(factor=3.0)):
            for T in (0.0, 0.7):
                base = self.run_gen(gen_length=10, steps=10, alg="maskgit_plus",
                                    temperature=T, seed=3, **rule)
                self.assertLess(base.steps, 10)
                for kw in (dict(alg="entropy"), dict(alg="topk_margin"), dict(alg="origin"),
                           dict(alg="maskgit_plus", alg_temp=0.5)):
                    with self.subTest(rule=rule, T=T, **kw):
                        r = self.run_gen(gen_length=10, steps=10, temperature=T, seed=3,
                                         **rule, **kw)
                        self.assertEqual((r.output_ids, r.steps, r.commit_step),
                                         (base.output_ids, base.steps, base.commit_step))

    def test_filters_apply_at_t0(self):
        a = self.run_gen(gen_length=8, steps=4, alg="maskgit_plus", top_k=1)
        b = self.run_gen(gen_length=8, steps=4, alg="maskgit_plus")
        # top_k = 1 makes every confidence 1: positions go in order, lowest first
        want = [t for t, n in enumerate(dream_counts(8, 4)) for _ in range(n)]
        self.assertEqual(a.commit_step, want)
        self.assertEqual(want, [0, 1, 1, 2, 2, 3, 3, 3])
        self.assertNotEqual(a.commit_step, b.commit_step)


class MaskCommitTest(unittest.TestCase):
    """A model that prefers the mask id still decodes every position: the mask id is never a
    choice (sampling.md), so neither the quota loop nor a rule's loop can stall."""

    def setUp(self):
        self.model, self.ids = tiny("llada")

    def fake_forward(self, model, ids, rows):
        logits = np.zeros((len(rows), model.vocab))
        logits[:, self.ids.mask] = 5.0
        return logits

    def test_mask_commits(self):
        with mock.patch.object(gen.ref, "forward", self.fake_forward):
            for kw, steps in ((dict(block_length=4, steps=4), 4),
                              (dict(block_length=4, steps=6, threshold=0.5), 6)):
                r = gen.generate(self.model, PROMPT, gen.Params(gen_length=8, **kw),
                                 self.ids)
                self.assertEqual(r.mask_commits, 0)
                self.assertEqual(r.steps, steps)
                # The quota loop decodes all 8; the threshold loop accepts one low-confidence
                # token a step and stops at its 6-step bound with 2 positions still masked.
                decoded = 8 if "threshold" not in kw else 6
                self.assertNotIn(self.ids.mask, r.output_ids[:decoded])
                self.assertEqual(r.output_ids[decoded:], [self.ids.mask] * (8 - decoded))
            model, ids = tiny("dream")
            r = gen.generate(model, PROMPT, gen.Params(gen_length=8, steps=5,
                                                       alg="maskgit_plus", factor=1.0), ids)
            # Dream with the factor rule: one token a step (uniform confidences), 5-step bound.
            self.assertEqual(r.steps, 5)
            self.assertNotIn(ids.mask, r.output_ids[:5])
            self.assertEqual(r.output_ids[5:], [ids.mask] * 3)


# ----------------------------------------------------------------------------------------
# check_generate.py plumbing with a stand-in CLI
# ----------------------------------------------------------------------------------------

FAKE_CLI = r'''
import json, os, sys, io, contextlib
sys.path.insert(0, {here!r})
import generate_np, safetensors_np
from tiny_checkpoint_np import tiny_model
cmd, argv = sys.argv[1], sys.argv[2:]
if cmd == "make-test-model":
    a = dict(zip(argv[0::2], argv[1::2]))
    config, tensors = tiny_model(a["--family"], seed=int(a["--seed"]),
        layers=int(a["--layers"]), hidden=int(a["--hidden"]), heads=int(a["--heads"]),
        kv_heads=int(a["--kv-heads"]), ffn=int(a["--ffn"]), vocab=int(a["--vocab"]))
    config["mask_token_id"], config["eos_token_id"] = 1000, 1001
    dtype = {{"bf16": "BF16", "fp16": "F16", "fp32": "F32"}}[a["--dtype"]]
    safetensors_np.save_model_dir(a["--out"], config, tensors, dtype)
    sys.exit(0)
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    rc = generate_np.main(argv)
if rc:
    sys.exit(rc)
out = json.loads(buf.getvalue())
bug = os.environ.get("FAKE_GENERATE_BUG", "")
if bug == "token":
    out["results"][-1]["output_ids"][-1] += 1
elif bug == "steps":
    out["results"][0]["steps"] += 1
elif bug == "forwards":
    out["results"][-1]["forwards"] += 1
elif bug == "cache":
    out["results"][0]["cache"] = "none"
print(json.dumps(out))
sys.exit(rc)
'''


class FakeMosaicCase(unittest.TestCase):
    """A fake `mosaic` (FAKE_CLI: the reference behind the CLI's interface, with bugs to order)
    in a temporary folder; run_check runs the cross-check module `check`'s main against it."""
    check = None

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        script = os.path.join(self.tmp.name, "fake_cli.py")
        with open(script, "w") as f:
            f.write(FAKE_CLI.format(here=HERE))
        self.mosaic = os.path.join(self.tmp.name, "mosaic")
        with open(self.mosaic, "w") as f:
            f.write(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
        os.chmod(self.mosaic, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def run_check(self, cases, bug=""):
        out = io.StringIO()
        with mock.patch.dict(os.environ, {"FAKE_GENERATE_BUG": bug}), \
                contextlib.redirect_stdout(out):
            rc = self.check.main(["--mosaic", self.mosaic, "--cases", cases,
                                  "--workdir", os.path.join(self.tmp.name, "w")])
        return rc, out.getvalue()


class CheckGeneratePlumbingTest(FakeMosaicCase):
    check = check_generate

    def test_argv_round_trip(self):
        """Every case's command line parses back (generate_np's parser) to its Params."""
        families = {n: s.family for n, s in check_generate.MODELS.items()}
        for case in check_generate.CASES:
            p = check_generate.params_of(case)
            family = families[case.model]
            argv = check_generate.mosaic_argv("mosaic", "DIR", family, [[1, 2], [3]], p, None)
            self.assertEqual(argv[:2], ["mosaic", "generate"])
            args = gen.build_arg_parser().parse_args(argv[2:])
            self.assertEqual(args.ids, [[1, 2], [3]])
            back = gen.params_from_args(args, family)
            if family == ref.FAMILY_LLADA and p.block_length is None:
                p = replace(p, block_length=p.gen_length)
            self.assertEqual(back, p, case.name)

    def test_cli_rejects_other_family_options(self):
        args = gen.build_arg_parser().parse_args(
            ["--model", "D", "--ids", "1", "--gen-length", "4", "--steps", "4", "--seed", "0",
             "--alg", "entropy"])
        with self.assertRaises(gen.GenerationError):
            gen.params_from_args(args, ref.FAMILY_LLADA)

    def test_agreeing_cli_passes_and_bugs_fail(self):
        cases = "llada_batch3_t1,dream_stop_eos"
        rc, out = self.run_check(cases)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.count("PASS "), 2, out)
        for bug, case, text in (("token", "llada_batch3_t1", "first difference"),
                                ("steps", "dream_stop_eos", "steps mosaic")):
            with self.subTest(bug):
                rc, out = self.run_check(case, bug)
                self.assertEqual(rc, 1, out)
                self.assertIn("FAIL " + case, out)
                self.assertIn(text, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
