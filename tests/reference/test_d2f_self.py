#!/usr/bin/python3
"""Self-test of the NumPy D2F reference (d2f_np.py, docs/design/d2f-decoding.md; no Mosaic
needed): the step-count property, a step-by-step example worked by hand, the invariants of
the state machine on random fake models, the block cache against cache none on tiny random
models (with and without LoRA), validation, and the plumbing of check_d2f_generate.py.

Run: /usr/bin/python3 tests/reference/test_d2f_self.py
"""

import contextlib
import io
import itertools
import json
import os
import sys
import tempfile
import unittest
from dataclasses import replace
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_d2f_generate as cdg  # noqa: E402
import d2f_np  # noqa: E402
import generate_np as gen  # noqa: E402
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402
from tiny_checkpoint_np import tiny_model  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = 256
IDS = gen.SpecialIds(mask=VOCAB - 1, eos=VOCAB - 2)
OTHER = 7          # a token of the fake models that is not EOS


def fake_chooser(conf_of, token_of):
    """choose() of a fake model: conf_of(t, q) and token_of(t, q) per candidate position."""
    def choose(t, x, cand, rows):
        return (np.array([token_of(t, int(q)) for q in cand], dtype=np.int64),
                np.array([conf_of(t, int(q)) for q in cand], dtype=np.float64))
    return choose


def random_chooser(seed, eos_rate=0.0, ones=True):
    """Random confidences in [0, 1] (some exactly 1.0 and 0.0 when `ones`) and random tokens,
    EOS with probability eos_rate."""
    rng = np.random.default_rng(seed)

    def conf(t, q):
        u = rng.random()
        if ones and u < 0.05:
            return 1.0
        if ones and u > 0.95:
            return 0.0
        return float(rng.random())

    def token(t, q):
        return IDS.eos if rng.random() < eos_rate else int(rng.integers(0, VOCAB - 2))
    return fake_chooser(conf, token)


# ----------------------------------------------------------------------------------------
# (a) the property of d2f-decoding.md: 29 n + 4 steps
# ----------------------------------------------------------------------------------------

class PropertyTest(unittest.TestCase):
    CHAR = dict(block_length=32, block_add_threshold=0.5, decoded_token_threshold=0.9,
                skip_threshold=1.0)

    def run_n(self, n, G, eos_block, shift, seed):
        """Random confidences (1.0 included: never > 1.0); every token of block eos_block is
        EOS, so its first accepted token stops the adding of blocks."""
        P = 3 + n % 5
        B = 32
        rng = np.random.default_rng(seed)

        def conf(t, q):
            return 1.0 if rng.random() < 0.1 else float(rng.random())

        def token(t, q):
            j = (q - P) // B + 1
            return IDS.eos if j == eos_block else OTHER
        p = d2f_np.D2fParams(gen_length=G, **self.CHAR)
        return d2f_np.simulate(P, p, IDS, fake_chooser(conf, token), shift=shift)

    def test_eos_makes_n_blocks(self):
        """EOS in block n (n = 1..16, gen_length 512 = 16 blocks): 29 n + 4 steps."""
        for n in range(1, 17):
            for shift in (0, 1):
                with self.subTest(n=n, shift=shift):
                    r = self.run_n(n, 512, n, shift, seed=100 * n + shift)
                    self.assertEqual(r.blocks_created, n)
                    self.assertEqual(r.steps, 29 * n + 4)
                    self.assertEqual(r.forwards, 29 * n + 3)
                    self.assertTrue(r.stopped_at_eos)
                    self.assertEqual(r.tokens_per_step[-1], 0)
                    self.assertTrue(all(v == IDS.eos for v in r.output_ids[n * 32:]))
                    self.assertNotIn(IDS.mask, r.output_ids)

    def test_no_eos_reaches_n_max(self):
        """No EOS: gen_length / B blocks, n = 1..16, 29 n + 4 steps."""
        for n in range(1, 17):
            with self.subTest(n=n):
                r = self.run_n(n, 32 * n, None, n % 2, seed=n)
                self.assertEqual(r.blocks_created, n)
                self.assertEqual((r.steps, r.forwards), (29 * n + 4, 29 * n + 3))
                self.assertFalse(r.stopped_at_eos)
                # at most two blocks are fully activated and not done at once
                self.assertEqual(max(r.tokens_per_step), min(n, 2))

    def test_characterization_counts(self):
        """The characterization's 178 + 29 k steps are n = 6 + k blocks."""
        for k in range(0, 5):
            r = self.run_n(6 + k, 32 * 16, 6 + k, 0, seed=k)
            self.assertEqual(r.steps, 178 + 29 * k)

    def test_cap(self):
        """max_steps ends the loop where it is: steps = forwards = max_steps, masks remain."""
        p = d2f_np.D2fParams(gen_length=96, max_steps=40, **self.CHAR)
        r = d2f_np.simulate(4, p, IDS, random_chooser(1, ones=False))
        self.assertEqual((r.steps, r.forwards), (40, 40))
        self.assertIn(IDS.mask, r.output_ids)
        self.assertEqual(r.blocks_created, 2)
        self.assertEqual(r.output_ids[64:], [IDS.eos] * 32)   # block 3 never created


# ----------------------------------------------------------------------------------------
# A trace worked by hand
# ----------------------------------------------------------------------------------------

class HandExampleTest(unittest.TestCase):
    """P = 2, B = 4, tau_add 0.5, tau_act 0.75, tau_conf 0.6; block 1 = [2, 6), block 2 =
    [6, 10). Confidences fixed per position:
        block 1: 2: 0.9, 3: 0.5, 4: 0.4, 5: 0.3;  block 2: 6: 0.7, 7: 0.65, 8: 0.1, 9: 0.2
    t0: add 1 (fully activated by the prompt), accept 2 (> 0.6).   rows [0, 6)
    t1: 1/4 < 0.5 no add; nothing > 0.6: fallback 3.               rows [2, 6)
    t2: 2/4 >= 0.5: add 2, semi (2/4 < 0.75); block 1 fallback 4; block 2 accepts 6, 7.
    t3: 3/4 >= 0.75: block 2 fully; block 1 fallback 5 (done -> to_cache); block 2: 9.
    t4: block 2 fallback 8 (done; block 1 in the cache: cached_until 6 -> to_cache).
    t5: nothing active: the end, no forward."""
    CONF = {2: 0.9, 3: 0.5, 4: 0.4, 5: 0.3, 6: 0.7, 7: 0.65, 8: 0.1, 9: 0.2}

    def decode(self, G, eos_at=None, shift=0):
        p = d2f_np.D2fParams(gen_length=G, block_length=4, block_add_threshold=0.5,
                             decoded_token_threshold=0.75, skip_threshold=0.6)
        return d2f_np.simulate(2, p, IDS, fake_chooser(
            lambda t, q: self.CONF.get(q, 0.0),
            lambda t, q: IDS.eos if q == eos_at else 10 + q), shift=shift)

    def test_trace(self):
        r = self.decode(8)
        self.assertEqual(r.steps, 6)
        self.assertEqual(r.forwards, 5)
        self.assertEqual(r.tokens_per_step, [1, 1, 3, 2, 1, 0])
        self.assertEqual(r.commit_step, [0, 1, 2, 3, 2, 2, 4, 3])
        self.assertEqual(r.output_ids, [12, 13, 14, 15, 16, 17, 18, 19])
        self.assertEqual([rec.rows for rec in r.trace], [(0, 6), (2, 6), (2, 10), (2, 10),
                                                          (2, 10), None])
        self.assertEqual([rec.added for rec in r.trace], [1, None, 2, None, None, None])
        self.assertEqual([rec.cached_until for rec in r.trace], [2, 2, 2, 2, 6, 6])
        self.assertEqual([s[0] for s in r.trace[3].states], ["to_cache", "active"])
        self.assertEqual([s[0] for s in r.trace[4].states], ["in_cache", "to_cache"])
        self.assertEqual(r.trace[2].fully_activated, {1: True, 2: False})
        self.assertEqual(r.trace[3].fully_activated, {1: True, 2: True})
        self.assertEqual(r.trace[2].accepted, {1: [4], 2: [6, 7]})
        self.assertFalse(r.stopped_at_eos)

    def test_dream_rows(self):
        """Dream computes row q - 1 of its first candidate too: the same steps here."""
        r = self.decode(8, shift=1)
        self.assertEqual([rec.rows for rec in r.trace][:5],
                         [(0, 6), (2, 6), (2, 10), (2, 10), (2, 10)])
        self.assertEqual(r.commit_step, self.decode(8).commit_step)

    def test_eos_in_a_semi_activated_block(self):
        """EOS accepted at t2 by semi-activated block 2: no block 3 (gen_length 12), the
        existing blocks are still decoded to the end, block 3's positions are EOS."""
        r = self.decode(12, eos_at=6)
        self.assertEqual(r.blocks_created, 2)
        self.assertTrue(r.stopped_at_eos)
        self.assertEqual(r.steps, 6)
        self.assertEqual(r.output_ids[4], IDS.eos)
        self.assertEqual(r.output_ids[8:], [IDS.eos] * 4)
        without = self.decode(12)
        self.assertEqual(without.blocks_created, 3)    # block 3 came at t3 otherwise
        self.assertEqual(without.trace[3].added, 3)

    def test_stop_at_eos(self):
        """stop_at_eos: ends after the step where EOS has no mask before it (t2 here: EOS at
        position 4, positions 2 and 3 accepted at t0, t1), masks after it become EOS."""
        p = d2f_np.D2fParams(gen_length=8, block_length=4, block_add_threshold=0.5,
                             decoded_token_threshold=0.75, skip_threshold=0.6,
                             stop_at_eos=True)
        r = d2f_np.simulate(2, p, IDS, fake_chooser(lambda t, q: self.CONF.get(q, 0.0),
                                                    lambda t, q: IDS.eos if q == 4 else 10 + q))
        self.assertEqual((r.steps, r.forwards), (3, 3))
        self.assertTrue(r.stopped_at_eos)
        self.assertEqual(r.output_ids, [12, 13, IDS.eos, IDS.eos, 16, 17, IDS.eos, IDS.eos])


# ----------------------------------------------------------------------------------------
# (c) invariants on random fake models
# ----------------------------------------------------------------------------------------

class InvariantTest(unittest.TestCase):
    def check_run(self, P, p, r, shift, mode):
        B = d2f_np.resolve_block_length(p.gen_length, p.block_length)
        n_max = p.gen_length // B
        L = P + p.gen_length
        taus = (p.block_add_threshold, p.decoded_token_threshold, p.skip_threshold)
        seen_eos = False
        blocks, cached, accepted_at, prev_full = 0, 0, {}, {}
        for rec in r.trace:
            # Add: at most one block a step, in order, none after EOS, none beyond n_max.
            if rec.added is not None:
                self.assertEqual(rec.added, blocks + 1)
                self.assertFalse(seen_eos)
                blocks += 1
            self.assertLessEqual(blocks, n_max)
            # fully_activated is sticky
            for j, f in prev_full.items():
                if j in rec.fully_activated:
                    self.assertTrue(f <= rec.fully_activated[j])
            prev_full.update(rec.fully_activated)
            if not rec.forward:
                self.assertIs(rec, r.trace[-1])
                self.assertTrue(all(s[2] == 0 for s in rec.states))
                continue
            # Candidates: every mask of the created blocks (active ones hold them all).
            end = P + blocks * B
            self.assertEqual(rec.end, end)
            masked = [q for q in range(P, end) if q not in accepted_at]
            self.assertEqual(rec.candidates, masked)
            # Rows: block cache [cached_until, end) (Dream: from q - 1), none [0, L).
            want = (0, L) if mode == "none" else (min(cached, rec.candidates[0] - shift), end)
            self.assertEqual(rec.rows, want)
            for j, acc in rec.accepted.items():
                lo = P + (j - 1) * B
                mine = [q for q in rec.candidates if lo <= q < lo + B]
                conf = {q: rec.confidences[q] for q in mine}
                passing = [q for q in mine if conf[q] > taus[2]]
                if rec.fully_activated[j] and not passing:
                    best = max(conf.values())
                    self.assertEqual(acc, [min(q for q in mine if conf[q] == best)])
                else:      # semi-activated blocks accept only > tau_conf (perhaps nothing)
                    self.assertEqual(acc, passing)
                for q in acc:
                    self.assertNotIn(q, accepted_at)
                    accepted_at[q] = rec.t
                    if r.output_ids[q - P] == IDS.eos:
                        seen_eos = True
            # Cache: grows, on block boundaries; blocks enter it in order (a prefix).
            self.assertGreaterEqual(rec.cached_until, cached)
            self.assertEqual((rec.cached_until - P) % B, 0)
            cached = rec.cached_until
            states = [s[0] for s in rec.states]
            k = sum(1 for s in states if s == "in_cache")
            self.assertEqual(states[:k], ["in_cache"] * k)
            self.assertEqual(cached, P + k * B)
            # to_cache only right after the cached prefix, with no mask; active ones after
            run = states[k:]
            tc = sum(1 for _ in itertools.takewhile(lambda s: s == "to_cache", run))
            self.assertNotIn("to_cache", run[tc:])
            self.assertTrue(all(rec.states[k + i][2] == 0 for i in range(tc)))
            if run[tc:]:
                self.assertGreater(rec.states[k + tc][2], 0)   # the first active holds a mask
        self.assertEqual(r.forwards, sum(1 for rec in r.trace if rec.forward))
        self.assertEqual(r.steps, len(r.trace))
        if r.steps < p.max_steps and not p.stop_at_eos:
            self.assertEqual(r.steps, r.forwards + 1)
        self.assertEqual(sum(r.tokens_per_step), len(accepted_at))
        self.assertEqual(r.commit_step, [accepted_at.get(q, -1) for q in range(P, L)])
        self.assertEqual(r.blocks_created, blocks)
        self.assertEqual(r.output_ids[blocks * B:], [IDS.eos] * (p.gen_length - blocks * B))
        self.assertEqual(r.eos_seen, seen_eos)

    def test_random_runs(self):
        rng = np.random.default_rng(7)
        for i in range(300):
            B = int(rng.choice([1, 2, 3, 4, 8]))
            G = B * int(rng.integers(1, 7))
            taus = [float(rng.choice([0.0, 0.25, 0.5, 1.0, rng.random()])) for _ in range(3)]
            p = d2f_np.D2fParams(gen_length=G, block_length=B, block_add_threshold=taus[0],
                                 decoded_token_threshold=taus[1], skip_threshold=taus[2],
                                 max_steps=int(rng.choice([10000, 5, 12])))
            P, shift = int(rng.integers(1, 6)), int(rng.integers(0, 2))
            mode = "none" if rng.random() < 0.3 else "auto"
            eos_rate = float(rng.choice([0, 0.05]))
            r = d2f_np.simulate(P, p, IDS, random_chooser(i, eos_rate), shift=shift, cache=mode)
            with self.subTest(i=i, P=P, p=p, shift=shift):
                self.check_run(P, p, r, shift, "none" if mode == "none" else "block")

    def test_tau_add_zero_adds_one_block_a_step(self):
        p = d2f_np.D2fParams(gen_length=40, block_length=8, block_add_threshold=0.0,
                             decoded_token_threshold=1.0, skip_threshold=1.0)
        r = d2f_np.simulate(3, p, IDS, random_chooser(3, ones=False))
        self.assertEqual([rec.added for rec in r.trace[:6]], [1, 2, 3, 4, 5, None])
        # tau_act 1.0, tau_conf 1.0: blocks strictly one after the other, one token a step
        self.assertEqual(r.forwards, 40)
        self.assertEqual(set(r.tokens_per_step[:-1]), {1})

    def test_block_default(self):
        self.assertEqual(d2f_np.resolve_block_length(128, None), 32)
        self.assertEqual(d2f_np.resolve_block_length(128, 0), 32)
        self.assertEqual(d2f_np.resolve_block_length(16, None), 16)
        self.assertEqual(d2f_np.resolve_block_length(64, 16), 16)
        for G, B in ((48, None), (24, 16), (8, 16)):
            with self.assertRaises(gen.GenerationError):
                d2f_np.resolve_block_length(G, B)

    def test_fraction_edge_is_a_near_tie(self):
        """7/10 against tau 0.7 (not dyadic) is noted; 16/32 against 0.5 is exact, not noted."""
        ties = d2f_np.TieLog()
        self.assertTrue(d2f_np._at_least(7, 10, 0.7, ties, 0, 0, "block_add"))
        self.assertEqual(len(ties.near), 1)
        ties = d2f_np.TieLog()
        self.assertTrue(d2f_np._at_least(16, 32, 0.5, ties, 0, 0, "block_add"))
        self.assertFalse(d2f_np._at_least(28, 32, 0.9, ties, 0, 0, "fully_activate"))
        self.assertEqual(ties.near, [])


# ----------------------------------------------------------------------------------------
# (b) the block cache against cache none on tiny random models
# ----------------------------------------------------------------------------------------

_MODELS = {}


def tiny(family, lora=False, kind=None):
    key = (family, lora, kind)
    if key not in _MODELS:
        config, tensors = tiny_model(family, seed={"llada": 3, "dream": 2}[family], hidden=64,
                                     heads=4, kv_heads=2, ffn=96, vocab=VOCAB)
        config["block_attention"] = kind
        model = ref.build_model(config, tensors)
        if lora:
            rng = np.random.default_rng(5)
            for layer in model.layers:
                for name in ("wq", "wk", "wv", "wo"):
                    w = getattr(layer, name)
                    a = rng.normal(0, 1 / np.sqrt(w.shape[1]), (4, w.shape[1]))
                    b = rng.normal(0, 0.25, (w.shape[0], 4))
                    setattr(layer, name, ref.LoraWeight(w=w, a=a, b=b, scaling=2.0))
        _MODELS[key] = model
    return _MODELS[key]


def prompt_of(n, seed=0):
    return [int(v) for v in np.random.default_rng(seed).integers(0, VOCAB - 2, size=n)]


class CacheTest(unittest.TestCase):
    SETTINGS = [
        dict(gen_length=24, block_length=8, block_add_threshold=0.25,
             decoded_token_threshold=0.75, skip_threshold=0.035, temperature=0.0),
        dict(gen_length=24, block_length=6, block_add_threshold=0.5,
             decoded_token_threshold=0.9, skip_threshold=0.012, temperature=1.0, seed=3),
        dict(gen_length=16, block_length=4, block_add_threshold=0.0,
             decoded_token_threshold=0.5, skip_threshold=1.0, temperature=0.7, seed=9),
    ]

    def both(self, model, prompt, params):
        """(auto, none) results and every forward's confidences of each."""
        runs = []
        for cache in ("auto", "none"):
            p = d2f_np.D2fParams(cache=cache, **params)
            runs.append(d2f_np.generate(model, prompt, p, IDS))
        return runs

    def test_block_cache_equals_none(self):
        for family in ("llada", "dream"):
            for lora in (False, True):
                for k, params in enumerate(self.SETTINGS):
                    with self.subTest(family=family, lora=lora, k=k):
                        model = tiny(family, lora)
                        auto, none = self.both(model, prompt_of(5 + k, k), params)
                        self.assertEqual(auto.cache, "block")
                        self.assertEqual(none.cache, "none")
                        for key in ("output_ids", "commit_step", "steps", "forwards",
                                    "tokens_per_step", "blocks_created"):
                            self.assertEqual(getattr(auto, key), getattr(none, key), key)
                        # the same confidences to rounding: the cache is exact
                        for ra, rn in zip(auto.trace, none.trace):
                            self.assertEqual(ra.confidences.keys(), rn.confidences.keys())
                            for q in ra.confidences:
                                self.assertAlmostEqual(ra.confidences[q], rn.confidences[q],
                                                       delta=1e-12)
                        # and the block cache computes fewer rows once the prompt is in it
                        rows = [rec.rows for rec in auto.trace if rec.forward]
                        self.assertTrue(any(c0 > 0 for c0, _ in rows))
                        self.assertTrue(any(len(rec.accepted.get(j, [])) > 1
                                            for rec in auto.trace for j in rec.accepted)
                                        or params["skip_threshold"] == 1.0)

    def test_prompt_mask_whatever_the_config(self):
        """The "prompt" mask with block B on a full-attention config, on a "prompt" config,
        and the forward of reference_forward.forward_masked on that config agree."""
        for family in ("llada", "dream"):
            params = self.SETTINGS[0]
            a = d2f_np.generate(tiny(family), prompt_of(6, 1), d2f_np.D2fParams(**params), IDS)
            b = d2f_np.generate(tiny(family, kind="prompt"), prompt_of(6, 1),
                                d2f_np.D2fParams(**params), IDS)
            self.assertEqual(a.output_ids, b.output_ids)
            # the forward itself against forward_masked on a canvas with blocks written
            model = tiny(family, kind="prompt")
            P, B, G = 6, 8, 24
            x = np.array(prompt_of(P, 1) + prompt_of(G, 2), dtype=np.int64)
            x[P + 3] = IDS.mask
            fwd = d2f_np.D2fForward(model, "none", P, P + G, B)
            rows = list(range(P, P + G))
            want = ref.forward_masked(model, x, rows, P, B)
            np.testing.assert_allclose(fwd.logits(x, rows, 0, P + G), want, rtol=0, atol=1e-12)
            # and it is not full attention: block 1 does not see block 2
            full = ref.forward(tiny(family), x, rows)
            self.assertGreater(np.max(np.abs(full[:B] - want[:B])), 1e-3)

    def test_temperature_and_seed(self):
        """T > 0 samples with the seed (a different seed, different tokens); T = 0 ignores it."""
        model = tiny("llada")
        p = d2f_np.D2fParams(gen_length=16, block_length=8, skip_threshold=0.05,
                             block_add_threshold=0.25, decoded_token_threshold=0.75)
        g0 = [d2f_np.generate(model, prompt_of(4), replace(p, seed=s), IDS).output_ids
              for s in (1, 2)]
        self.assertEqual(g0[0], g0[1])
        g1 = [d2f_np.generate(model, prompt_of(4), replace(p, seed=s, temperature=1.0),
                              IDS).output_ids for s in (1, 2)]
        self.assertNotEqual(g1[0], g1[1])

    def test_confidence_is_the_tempered_probability(self):
        """conf = p(x0) under softmax(l / T), for LLaDA too; x0 never the mask id."""
        model = tiny("llada")
        P, G, B, T = 4, 8, 8, 0.5
        p = d2f_np.D2fParams(gen_length=G, block_length=B, skip_threshold=1.0, temperature=T,
                             seed=4)
        r = d2f_np.generate(model, prompt_of(P), p, IDS)
        rec = r.trace[0]
        x = np.array(prompt_of(P) + [IDS.mask] * G, dtype=np.int64)
        cand = np.arange(P, P + G)
        logits = ref.forward_masked(tiny("llada", kind="prompt"), x, cand, P, B)
        lp = logits / T
        g = gen._gumbel_rows(4, VOCAB, cand, 0)
        scores = lp + g
        scores[:, IDS.mask] = -np.inf
        x0 = np.argmax(scores, axis=1)
        prob = np.exp(lp - lp.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
        for i, q in enumerate(cand):
            self.assertAlmostEqual(rec.confidences[int(q)], prob[i, x0[i]], delta=1e-12)
        q = rec.accepted[1][0]
        self.assertEqual(r.output_ids[q - P], int(x0[q - P]))


# ----------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------

class ValidationTest(unittest.TestCase):
    def refused(self, model=None, prompt=(1, 2, 3), **kw):
        model = model or tiny("llada")
        with self.assertRaises(gen.GenerationError):
            d2f_np.generate(model, list(prompt), d2f_np.D2fParams(gen_length=16, **kw), IDS)

    def test_refused(self):
        for kw in (dict(threshold=0.5), dict(factor=1.0), dict(remasking="random"),
                   dict(cfg_scale=1.0), dict(logits_eos_inf=True),
                   dict(confidence_eos_eot_inf=True), dict(alg="entropy"), dict(alg_temp=0.5),
                   dict(top_p=0.9), dict(top_k=3), dict(cache="prefix"), dict(cache="dual"),
                   dict(cache="bogus"), dict(block_length=6), dict(skip_threshold=1.5),
                   dict(block_add_threshold=-0.1), dict(decoded_token_threshold=1.01),
                   dict(max_steps=0), dict(temperature=-1.0), dict(seed=-1)):
            with self.subTest(**kw):
                self.refused(**kw)
        self.refused(prompt=())
        self.refused(prompt=(IDS.mask,))
        self.refused(prompt=(VOCAB,))
        self.refused(model=tiny("llada", kind="absolute"))
        with self.assertRaises(gen.GenerationError):
            d2f_np.validate([1], d2f_np.D2fParams(gen_length=16), IDS, VOCAB, None, suffix=[3])

    def test_accepted(self):
        for kw in (dict(), dict(remasking="low_confidence"), dict(cfg_scale=0.0),
                   dict(cache="none"), dict(skip_threshold=0.0, block_add_threshold=1.0,
                                            decoded_token_threshold=0.0)):
            with self.subTest(**kw):
                r = d2f_np.generate(tiny("dream"), [1, 2], d2f_np.D2fParams(gen_length=8, **kw),
                                    IDS)
                self.assertEqual(len(r.output_ids), 8)
        r = d2f_np.generate(tiny("dream", kind="prompt"), [1, 2],
                            d2f_np.D2fParams(gen_length=8), IDS)
        self.assertEqual(r.cache, "block")


# ----------------------------------------------------------------------------------------
# check_d2f_generate.py's plumbing against a fake mosaic (the reference behind the CLI)
# ----------------------------------------------------------------------------------------

FAKE_CLI = r'''
import json, os, sys, io, contextlib
sys.path.insert(0, {here!r})
import d2f_np, safetensors_np
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
    rc = d2f_np.main(argv)
if rc:
    sys.exit(rc)
out = json.loads(buf.getvalue())
bug = os.environ.get("FAKE_D2F_BUG", "")
r = out["results"][-1]
if bug == "token":
    r["output_ids"][-1] += 1
elif bug in ("steps", "forwards"):
    r[bug] += 1
elif bug == "cache":
    r["cache"] = "none" if r["cache"] == "block" else "block"
elif bug == "stopped":
    r["stopped_at_eos"] = not r["stopped_at_eos"]
elif bug == "tokens_per_step":
    r["tokens_per_step"][0] += 1
elif bug == "ignore_adapter" and "--adapter" in argv:
    i = argv.index("--adapter")
    with contextlib.redirect_stdout(io.StringIO()) as b2:
        d2f_np.main(argv[:i] + argv[i + 2:])
    out = json.loads(b2.getvalue())
print(json.dumps(out))
'''


class CheckD2fPlumbingTest(unittest.TestCase):
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
        with mock.patch.dict(os.environ, {"FAKE_D2F_BUG": bug}), \
                contextlib.redirect_stdout(out):
            rc = cdg.main(["--mosaic", self.mosaic, "--cases", cases,
                           "--workdir", os.path.join(self.tmp.name, "w")])
        return rc, out.getvalue()

    def test_argv_round_trip(self):
        """Every case's command line parses back (d2f_np's parser) to its D2fParams."""
        family = {"llada": ref.FAMILY_LLADA, "dream": ref.FAMILY_DREAM}
        for case in cdg.ALL_CASES:
            base = cdg.VARIANTS[case.model].base if case.model in cdg.VARIANTS else case.model
            argv = cdg.mosaic_argv("mosaic", "DIR", "ADIR", [[1, 2], [3]], case)
            self.assertEqual(argv[:2], ["mosaic", "generate"])
            args = d2f_np.build_arg_parser().parse_args(argv[2:])
            self.assertEqual((args.ids, args.adapter), ([[1, 2], [3]], "ADIR"))
            try:
                back = d2f_np.params_from_args(args, family[base])
            except gen.GenerationError:
                self.assertIn(case.name, cdg.ERROR_NAMES)
                continue
            self.assertEqual(back, cdg.params_of(case), case.name)

    def test_cases_are_well_formed(self):
        names = [c.name for c in cdg.ALL_CASES]
        self.assertEqual(len(names), len(set(names)))
        for c in cdg.ALL_CASES:
            self.assertIn(c.model, cdg.MODEL_NAMES, c.name)
            cdg.params_of(c)
        kinds = {k for c in cdg.CASES for k in c.expect}
        self.assertTrue({"parallel", "early_eos", "capped", "property"} <= kinds)
        self.assertTrue(any(c.params.get("cache") == "none" for c in cdg.CASES))
        self.assertTrue(any(len(c.prompts) > 1 and len(set(c.prompts)) > 1 for c in cdg.CASES))

    def test_agreeing_cli_passes_and_bugs_fail(self):
        cases = "llada_tiny_batch3_t1,dream_lora_eos_early_t0,llada_tiny_none_t0,error_cfg"
        rc, out = self.run_check(cases)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.count("PASS "), 4, out)
        for bug, case, text in (("token", "llada_tiny_batch3_t1", "first difference"),
                                ("steps", "llada_tiny_batch3_t1", "steps mosaic"),
                                ("forwards", "dream_lora_eos_early_t0", "forwards mosaic"),
                                ("cache", "llada_tiny_none_t0", "cache mosaic"),
                                ("stopped", "dream_lora_eos_early_t0", "stopped_at_eos mosaic"),
                                ("tokens_per_step", "llada_tiny_none_t0",
                                 "tokens_per_step mosaic"),
                                ("ignore_adapter", "dream_lora_eos_early_t0", "mosaic")):
            with self.subTest(bug):
                rc, out = self.run_check(case, bug)
                self.assertEqual(rc, 1, out)
                self.assertIn("FAIL " + case, out)
                self.assertIn(text, out)

    def test_cli_main_errors(self):
        d = os.path.join(self.tmp.name, "m")
        config, tensors = tiny_model("llada", seed=1, hidden=32, heads=4, vocab=VOCAB)
        config["mask_token_id"], config["eos_token_id"] = IDS.mask, IDS.eos
        st.save_model_dir(d, config, tensors, "F32")
        base = ["--model", d, "--ids", "1,2,3", "--gen-length", "16", "--d2f", "--json"]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = d2f_np.main(base + ["--block-length", "8"])
        self.assertEqual(rc, 0)
        res = json.loads(out.getvalue())["results"][0]
        self.assertEqual((res["cache"], len(res["output_ids"])), ("block", 16))
        for extra in (["--threshold", "0.5"], ["--alg", "entropy"], ["--cache", "dual"]):
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                self.assertEqual(d2f_np.main(base + extra), 2)
            self.assertEqual(len(err.getvalue().strip().splitlines()), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
