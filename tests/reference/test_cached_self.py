#!/usr/bin/python3
"""Self-test of the NumPy reference's cached decoding (docs/design/cached-decoding.md; no
Mosaic needed): the block-causal masks' key ranges, the cached forward, decoding blocks,
Dream block decoding, cache modes and their errors, the rows each step computes, and the
plumbing of check_cached_generate.py.

Run: /usr/bin/python3 tests/reference/test_cached_self.py
"""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest
from dataclasses import replace
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_cached_generate as ccg  # noqa: E402
import generate_np as gen  # noqa: E402
import philox_np as rng  # noqa: E402
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402
import test_generate_self as tgs  # noqa: E402
from tiny_checkpoint_np import tiny_model  # noqa: E402

VOCAB = 256
IDS = gen.SpecialIds(mask=VOCAB - 1, eos=VOCAB - 2)
# Seeds whose random models commit varied tokens (small LLaDA models often repeat one).
MODEL_SEEDS = {"llada": 3, "dream": 2}


def tiny_config_tensors(family, kind=None):
    config, tensors = tiny_model(family, seed=MODEL_SEEDS[family], hidden=64, heads=4,
                                 kv_heads=2, ffn=96, vocab=VOCAB)
    if kind is not None:
        config["block_attention"] = kind
    return config, tensors


_MODELS = {}


def tiny(family, kind=None):
    """A small random model of `family` with block_attention `kind` (cached)."""
    if (family, kind) not in _MODELS:
        _MODELS[family, kind] = ref.build_model(*tiny_config_tensors(family, kind))
    return _MODELS[family, kind]


def prompt_of(n, seed=0):
    return [int(v) for v in np.random.default_rng(seed).integers(0, VOCAB - 2, size=n)]


def per_step_counts(res):
    """Committed generated positions per step t (0 where nothing was committed)."""
    counts = [0] * res.steps
    for t in res.commit_step:
        if t >= 0:
            counts[t] += 1
    return counts


def same_run(a, b):
    return (a.output_ids, a.commit_step, a.steps, a.forwards) == \
        (b.output_ids, b.commit_step, b.steps, b.forwards)


# ----------------------------------------------------------------------------------------
# §1 masks, §2 blocks: geometry by hand
# ----------------------------------------------------------------------------------------

class GeometryTest(unittest.TestCase):
    def test_key_end_prompt(self):
        """"prompt": end = P in the prompt, then P + (floor((q - P)/B) + 1) B, capped."""
        P, B, L = 5, 4, 15
        end = [int(e) for e in ref.key_end("prompt", range(L), P, B, L)]
        self.assertEqual(end, [5] * 5 + [9] * 4 + [13] * 4 + [15] * 2)
        self.assertEqual(int(ref.key_end("prompt", 4, P, B, L)), 5)
        self.assertEqual(int(ref.key_end("prompt", 5, P, B, L)), 9)

    def test_key_end_absolute(self):
        """"absolute": end = (floor(q/B) + 1) B from position 0, prompt included, capped."""
        P, B, L = 5, 4, 14
        end = [int(e) for e in ref.key_end("absolute", range(L), P, B, L)]
        self.assertEqual(end, [4] * 4 + [8] * 4 + [12] * 4 + [14] * 2)

    def test_key_end_full(self):
        self.assertEqual(list(ref.key_end(None, range(6), 2, 4, 6)), [6] * 6)
        r = ref.key_ranges("prompt", [0, 5, 9], 5, 4, 13)
        self.assertEqual(r.tolist(), [[0, 5], [0, 9], [0, 13]])
        with self.assertRaises(ValueError):
            ref.key_end("prompt", [1], 5, 0, 13)

    def test_blocks_full_and_prompt(self):
        for kind in (None, "prompt"):
            b = gen.decoding_blocks(kind, 5, 8, 4)
            self.assertEqual([(x.start, x.end, x.grid_start) for x in b],
                             [(5, 9, 5), (9, 13, 9)])
            for G, B in ((10, 4), (8, 16), (8, 0)):
                with self.subTest(kind=kind, G=G, B=B), \
                        self.assertRaises(gen.GenerationError):
                    gen.decoding_blocks(kind, 5, G, B)

    def test_blocks_absolute(self):
        """Grid blocks meeting [P, L), cut to it; n = ceil(L/B) - floor(P/B)."""
        b = gen.decoding_blocks("absolute", 5, 9, 4)               # L = 14
        self.assertEqual([(x.start, x.end, x.grid_start) for x in b],
                         [(5, 8, 4), (8, 12, 8), (12, 14, 12)])
        b = gen.decoding_blocks("absolute", 8, 8, 4)               # P a multiple of B
        self.assertEqual([(x.start, x.end, x.grid_start) for x in b],
                         [(8, 12, 8), (12, 16, 12)])
        b = gen.decoding_blocks("absolute", 2, 3, 8)               # B > G: one block
        self.assertEqual([(x.start, x.end, x.grid_start) for x in b], [(2, 5, 0)])
        b = gen.decoding_blocks("absolute", 7, 5, 4)               # a first block of one
        self.assertEqual([(x.start, x.end) for x in b], [(7, 8), (8, 12)])
        for P, G, B in ((5, 9, 4), (8, 8, 4), (2, 3, 8), (7, 5, 4), (3, 30, 7)):
            L = P + G
            self.assertEqual(len(gen.decoding_blocks("absolute", P, G, B)),
                             -(-L // B) - P // B)

    def test_config_field(self):
        for kind in (None, "prompt", "absolute"):
            config, tensors = tiny_config_tensors("dream", kind)
            self.assertEqual(ref.build_model(config, tensors).block_attention, kind)
        config, tensors = tiny_config_tensors("llada")
        self.assertNotIn("block_attention", config)
        self.assertIsNone(ref.build_model(config, tensors).block_attention)
        config["block_attention"] = "causal"
        with self.assertRaisesRegex(ValueError, "block_attention"):
            ref.hparams_from_config(config)


# ----------------------------------------------------------------------------------------
# The cached forward
# ----------------------------------------------------------------------------------------

class CachedForwardTest(unittest.TestCase):
    P, B = 5, 4

    def canvas(self, G=8, seed=1):
        return np.array(prompt_of(self.P, seed) + [IDS.mask] * G, dtype=np.int64)

    def test_full_forward_equals_forward(self):
        """c0 = 0, c1 = L, every key range [0, L), an empty cache: forward()."""
        for family in ("llada", "dream"):
            model = tiny(family)
            x = self.canvas()
            x[7] = 17
            L = x.size
            got = ref.forward_rows(model, x, 0, L, ref.key_ranges(None, range(L), 5, 4, L),
                                   ref.new_cache(model, L), range(L))
            np.testing.assert_allclose(got, ref.forward(model, x, range(L)), rtol=0,
                                       atol=1e-12)

    def test_some_rows_from_a_full_cache(self):
        """Full attention: a cache filled by a full forward, then only [a, b) recomputed on
        the same canvas, gives the full forward's logits for those rows."""
        for family in ("llada", "dream"):
            model = tiny(family)
            x = self.canvas()
            x[6], x[10] = 17, 42
            L = x.size
            full = ref.forward(model, x, range(L))
            cache = ref.new_cache(model, L)
            ref.forward_rows(model, x, 0, L, ref.key_ranges(None, range(L), 5, 4, L), cache,
                             [])
            for a, b in ((5, 9), (9, 13), (0, 3), (12, 13)):
                rows = list(range(a, b)) if family == "llada" else list(range(a + 1, b + 1))
                rows = [q for q in rows if q < L]
                got = ref.forward_rows(model, x, a, b, ref.key_ranges(None, range(a, b),
                                                                      5, 4, L),
                                       cache, rows)
                np.testing.assert_allclose(got, full[rows], rtol=0, atol=1e-12,
                                           err_msg=f"{family} [{a}, {b})")

    def test_cache_holds_fresh_kv(self):
        """After a call the cache rows [c0, c1) are that call's K/V: recomputing [c0, c1)
        of a changed canvas rewrites exactly those rows."""
        model = tiny("llada")
        x = self.canvas()
        L = x.size
        rng_all = ref.key_ranges(None, range(L), 5, 4, L)
        a = ref.new_cache(model, L)
        ref.forward_rows(model, x, 0, L, rng_all, a, [])
        before = [k.copy() for k in a.k]
        y = x.copy()
        y[6] = 17
        ref.forward_rows(model, y, 5, 9, rng_all[5:9], a, [])
        for li in range(model.n_layers):
            np.testing.assert_array_equal(a.k[li][:5], before[li][:5])
            np.testing.assert_array_equal(a.k[li][9:], before[li][9:])
            self.assertFalse(np.allclose(a.k[li][6], before[li][6]))

    def test_prompt_mask_is_block_causal(self):
        """"prompt": prompt rows never see generated tokens; block j sees earlier blocks
        and itself, not later ones."""
        model = tiny("llada", "prompt")
        x = self.canvas()
        y = x.copy()
        y[10] = 17                       # in block [9, 13)
        fx = ref.forward_masked(model, x, range(13), 5, 4)
        fy = ref.forward_masked(model, y, range(13), 5, 4)
        np.testing.assert_array_equal(fx[:9], fy[:9])
        self.assertFalse(np.allclose(fx[9:], fy[9:]))
        z = x.copy()
        z[6] = 17                        # in block [5, 9): changes both blocks
        fz = ref.forward_masked(model, z, range(13), 5, 4)
        np.testing.assert_array_equal(fx[:5], fz[:5])
        self.assertFalse(np.allclose(fx[9:], fz[9:]))

    def test_recomputed_block_is_exact(self):
        """Block-causal: recompute a block and what follows it after a change in the
        block; the cache's earlier rows are still exact (no earlier row reads the block)."""
        model = tiny("dream", "prompt")
        x = self.canvas()
        L = x.size
        cache = ref.new_cache(model, L)
        ref.forward_rows(model, x, 0, L, ref.key_ranges("prompt", range(L), 5, 4, L), cache,
                         [])
        y = x.copy()
        y[9], y[11] = 17, 42
        got = ref.forward_rows(model, y, 9, 13, ref.key_ranges("prompt", range(9, 13), 5, 4,
                                                               L),
                               cache, [10, 11, 12])
        want = ref.forward_masked(model, y, [10, 11, 12], 5, 4)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)

    def test_absolute_first_block_needs_its_prompt_tail(self):
        """"absolute", P % B != 0: the prompt rows [4, 5) share the attention block [4, 8)
        with the first decoding block [5, 8), so recomputing [5, 8) alone after a change
        there is NOT exact, and [4, 8) is (the reading of f in generate_np)."""
        model = tiny("llada", "absolute")
        x = self.canvas()
        L = x.size
        ranges = ref.key_ranges("absolute", range(L), 5, 4, L)
        cache = ref.new_cache(model, L)
        ref.forward_rows(model, x, 0, L, ranges, cache, [])
        y = x.copy()
        y[6] = 17
        want = ref.forward_masked(model, y, [5, 7], 5, 4)
        naive = ref.forward_rows(model, y, 5, 8, ranges[5:8],
                                 ref.KVCache([k.copy() for k in cache.k],
                                             [v.copy() for v in cache.v]), [5, 7])
        self.assertFalse(np.allclose(naive, want, rtol=0, atol=1e-9))
        got = ref.forward_rows(model, y, 4, 8, ranges[4:8], cache, [5, 7])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)

    def test_errors(self):
        model = tiny("dream")
        x = self.canvas()
        L = x.size
        full = ref.key_ranges(None, range(L), 5, 4, L)
        with self.assertRaisesRegex(ValueError, "no forward has computed"):
            ref.forward_rows(model, x, 5, 9, full[5:9], ref.new_cache(model, L), [6])
        cache = ref.new_cache(model, L)
        ref.forward_rows(model, x, 0, L, full, cache, [])
        with self.assertRaisesRegex(ValueError, "outside the computed"):
            ref.forward_rows(model, x, 5, 9, full[5:9], cache, [5])   # Dream: row 4
        for c0, c1, r in ((3, 3, full[:0]), (0, L + 1, full), (5, 9, full[5:8])):
            with self.subTest(c0=c0, c1=c1), self.assertRaises(ValueError):
                ref.forward_rows(model, x, c0, c1, r, cache, [])


# ----------------------------------------------------------------------------------------
# §3 cache modes and their errors
# ----------------------------------------------------------------------------------------

class CacheModeTest(unittest.TestCase):
    def test_resolution_table(self):
        want = {(None, "auto"): "none", (None, "none"): "none",
                (None, "prefix"): "prefix", (None, "dual"): "dual",
                ("prompt", "auto"): "block", ("prompt", "none"): "none",
                ("absolute", "auto"): "block", ("absolute", "none"): "none"}
        for (kind, cache), mode in want.items():
            self.assertEqual(gen.resolve_cache(cache, kind, 0.0), mode, (kind, cache))
        self.assertEqual(gen.resolve_cache("auto", "prompt", 1.5), "block")
        self.assertEqual(gen.resolve_cache("none", None, 1.5), "none")
        for kind, cache, cfg in ((None, "prefix", 1.5), (None, "dual", 0.5),
                                 ("prompt", "prefix", 0.0), ("absolute", "dual", 0.0),
                                 (None, "bogus", 0.0), (None, "block", 0.0)):
            with self.subTest(kind=kind, cache=cache, cfg=cfg), \
                    self.assertRaises(gen.GenerationError):
                gen.resolve_cache(cache, kind, cfg)

    def test_generate_errors(self):
        kw = dict(gen_length=8, block_length=4, steps=8)
        cases = [("llada", None, dict(cache="prefix", cfg_scale=1.5)),
                 ("llada", None, dict(cache="dual", cfg_scale=1.5)),
                 ("llada", "prompt", dict(cache="prefix")),
                 ("llada", "absolute", dict(cache="dual")),
                 ("dream", "prompt", dict(cache="dual", alg="entropy")),
                 ("dream", "absolute", dict(cache="prefix", alg="entropy")),
                 ("dream", None, dict(cache="unknown", alg="entropy"))]
        for family, kind, extra in cases:
            with self.subTest(family=family, kind=kind, **extra), \
                    self.assertRaises(gen.GenerationError):
                gen.generate(tiny(family, kind), prompt_of(5), gen.Params(**kw, **extra),
                             IDS)

    def test_reported_mode(self):
        kw = dict(gen_length=12, block_length=4, steps=12)    # 3 blocks, or 4 (absolute)
        for family, kind, cache, mode in (("llada", None, "auto", "none"),
                                          ("llada", None, "dual", "dual"),
                                          ("dream", None, "prefix", "prefix"),
                                          ("dream", None, "auto", "none"),
                                          ("llada", "absolute", "auto", "block"),
                                          ("dream", "prompt", "none", "none")):
            extra = dict(alg="maskgit_plus") if family == "dream" else {}
            r = gen.generate(tiny(family, kind), prompt_of(5), gen.Params(cache=cache, **kw,
                                                                           **extra), IDS)
            self.assertEqual(r.cache, mode, (family, kind, cache))


# ----------------------------------------------------------------------------------------
# §4 what each step computes
# ----------------------------------------------------------------------------------------

class ComputedRowsTest(unittest.TestCase):
    def rows(self, family, kind, cache, P=5, **kw):
        if family == "dream":
            kw.setdefault("alg", "maskgit_plus")
        r = gen.generate(tiny(family, kind), prompt_of(P), gen.Params(cache=cache, **kw),
                         IDS)
        return r.computed, r

    def test_prefix_and_dual_rows(self):
        kw = dict(gen_length=8, block_length=4, steps=4)
        self.assertEqual(self.rows("llada", None, "none", **kw)[0],
                         [(0, 0, 13), (1, 0, 13), (2, 0, 13), (3, 0, 13)])
        self.assertEqual(self.rows("llada", None, "prefix", **kw)[0],
                         [(0, 0, 13), (1, 5, 13), (2, 0, 13), (3, 9, 13)])
        self.assertEqual(self.rows("llada", None, "dual", **kw)[0],
                         [(0, 0, 13), (1, 5, 9), (2, 0, 13), (3, 9, 13)])
        # Dream: the block's step 0 is the refresh; bs is predicted from row bs - 1
        self.assertEqual(self.rows("dream", None, "dual", **kw)[0],
                         [(0, 0, 13), (1, 5, 9), (2, 0, 13), (3, 9, 13)])

    def test_block_rows(self):
        kw = dict(gen_length=8, block_length=4, steps=4)
        self.assertEqual(self.rows("llada", "prompt", "auto", **kw)[0],
                         [(0, 0, 9), (1, 5, 9), (2, 5, 13), (3, 9, 13)])
        self.assertEqual(self.rows("dream", "prompt", "auto", **kw)[0],
                         [(0, 0, 9), (1, 5, 9), (2, 5, 13), (3, 9, 13)])
        # absolute, P = 5, B = 4, L = 13: blocks [5, 8) (grid 4), [8, 12), [12, 13); the
        # last block's second step has quota 0 and computes nothing
        rows, r = self.rows("llada", "absolute", "auto", gen_length=8, block_length=4,
                            steps=6)
        self.assertEqual(rows, [(0, 0, 8), (1, 4, 8), (2, 4, 12), (3, 8, 12), (4, 8, 13)])
        self.assertEqual((r.steps, r.forwards), (6, 5))

    def test_steps_without_a_forward(self):
        """A step of count 0 computes nothing; forwards counts the others. (LLaDA's quota-0
        steps of S > B are refused since issue 29.)"""
        # Dream, S_b = 4 over blocks of 4: counts 1, 0, 1, 2 -> step 1 of a block is empty
        rows, r = self.rows("dream", None, "prefix", gen_length=8, block_length=4, steps=8,
                            alg="entropy")
        self.assertEqual([t for t, _, _ in rows], [0, 2, 3, 4, 6, 7])
        self.assertEqual([c0 for _, c0, _ in rows], [0, 5, 5, 0, 9, 9])

    def test_refresh_logits_equal_a_full_forward(self):
        """Every forward over [0, L) (a refresh) gives forward()'s logits of its canvas."""
        seen = []
        real = ref.forward_rows

        def spy(model, ids, c0, c1, ranges, cache, rows):
            out = real(model, ids, c0, c1, ranges, cache, rows)
            seen.append((model, np.array(ids), c0, c1, list(rows), out))
            return out
        with mock.patch.object(gen.ref, "forward_rows", spy):
            for family, cache in (("llada", "prefix"), ("llada", "dual"),
                                  ("dream", "prefix"), ("dream", "dual")):
                self.rows(family, None, cache, gen_length=12, block_length=4, steps=12,
                          temperature=1.0, seed=3)
        refreshes = [s for s in seen if s[2] == 0 and s[3] == len(s[1])]
        self.assertEqual(len(refreshes), 4 * 3)      # one per block
        for model, ids, _, _, rows, out in refreshes:
            np.testing.assert_allclose(out, ref.forward(model, ids, rows), rtol=0,
                                       atol=1e-12)

    def test_prefix_dual_approximate_but_agree_on_the_refresh(self):
        """The first step (a refresh) commits as none does; later steps read stale K/V, so
        the answers differ from none for some request (these are approximations)."""
        differ = {"prefix": 0, "dual": 0}
        for family in ("llada", "dream"):
            for seed in range(4):
                kw = dict(gen_length=12, block_length=4, steps=12, temperature=1.0,
                          seed=seed)
                if family == "dream":
                    kw["alg"] = "entropy"
                base = gen.generate(tiny(family), prompt_of(5, seed), gen.Params(**kw), IDS)
                for cache in differ:
                    r = gen.generate(tiny(family), prompt_of(5, seed),
                                     gen.Params(cache=cache, **kw), IDS)
                    first = [j for j, t in enumerate(base.commit_step) if t == 0]
                    self.assertEqual([j for j, t in enumerate(r.commit_step) if t == 0],
                                     first)
                    self.assertEqual([r.output_ids[j] for j in first],
                                     [base.output_ids[j] for j in first])
                    differ[cache] += r.output_ids != base.output_ids
        self.assertGreater(differ["prefix"], 0)
        self.assertGreater(differ["dual"], 0)

    def test_block_mode_equals_none(self):
        """The exact block cache gives what every-position steps give under the mask, for
        both alignments and families, top-k / origin schedules and threshold, T = 0 and
        T > 0, prompt lengths that are multiples of B and not."""
        n = 0
        for family in ("llada", "dream"):
            for kind in ("prompt", "absolute"):
                model = tiny(family, kind)
                for P in (3, 4, 5, 8):
                    for seed, T, extra in ((1, 0.0, {}), (2, 1.0, {}),
                                           (3, 0.0, dict(threshold=0.02)),
                                           (4, 0.7, dict(threshold=0.01))):
                        G = 10 if kind == "absolute" else 12
                        nblocks = len(gen.decoding_blocks(kind, P, G, 4))
                        kw = dict(gen_length=G, block_length=4, steps=2 * nblocks,
                                  temperature=T, seed=seed, **extra)
                        if family == "dream":
                            kw["alg"] = "origin" if seed == 2 else "maskgit_plus"
                        prompt = prompt_of(P, seed)
                        a = gen.generate(model, prompt, gen.Params(cache="auto", **kw), IDS)
                        b = gen.generate(model, prompt, gen.Params(cache="none", **kw), IDS)
                        with self.subTest(family=family, kind=kind, P=P, **kw):
                            self.assertEqual((a.cache, b.cache), ("block", "none"))
                            self.assertTrue(same_run(a, b))
                            self.assertTrue(any(c0 > 0 for _, c0, _ in a.computed))
                        n += 1
        self.assertEqual(n, 64)

    def test_block_mode_cfg_and_batches(self):
        model = tiny("llada", "prompt")
        kw = dict(gen_length=8, block_length=4, steps=8, cfg_scale=1.5)
        a = gen.generate(model, prompt_of(5), gen.Params(cache="auto", **kw), IDS)
        b = gen.generate(model, prompt_of(5), gen.Params(cache="none", **kw), IDS)
        self.assertTrue(same_run(a, b))
        prompts = [prompt_of(1), prompt_of(6, 1), prompt_of(9, 2)]
        p = gen.Params(gen_length=8, block_length=4, steps=8, cache="auto")
        for pr, r in zip(prompts, gen.generate_batch(model, prompts, p, IDS)):
            self.assertTrue(same_run(r, gen.generate(model, pr, p, IDS)))


# ----------------------------------------------------------------------------------------
# §2 Dream block decoding
# ----------------------------------------------------------------------------------------

def dream_block_counts(G, B, steps, eps=1e-3):
    """Tokens per step of a non-origin alg in blocks: 1 at i = 0, then n_i of the
    block-local schedule over the B - 1 left."""
    nb = G // B
    Sb = steps // nb
    ts = gen.dream_timesteps(Sb, eps)
    per_block, masked = [1], B - 1
    for i in range(1, Sb):
        n = gen.dream_transfer_count(masked, ts, i, Sb)
        per_block.append(n)
        masked -= n
    return per_block * nb


class DreamBlockTest(unittest.TestCase):
    def gen(self, kind=None, P=5, **kw):
        r = gen.generate(tiny("dream", kind), prompt_of(P), gen.Params(**kw), IDS)
        self.assertEqual(r.mask_commits, 0)
        return r

    def test_counts_by_hand(self):
        """S_b = 4: ts = 1, .75025, .5005, .25075, .001; after bs, 7 masks: int(7 * .3329)
        = 2, int(5 * .4990) = 2, then 3."""
        self.assertEqual(dream_block_counts(16, 8, 8), [1, 2, 2, 3] * 2)
        self.assertEqual(dream_block_counts(16, 16, 6), [1, 2, 3, 3, 3, 4])
        self.assertEqual(dream_block_counts(12, 4, 12), [1, 0, 1, 2] * 3)

    def test_schedule(self):
        for alg in ("maskgit_plus", "topk_margin", "entropy"):
            for G, B, S in ((16, 8, 8), (12, 4, 12), (16, 16, 6), (24, 8, 9)):
                with self.subTest(alg=alg, G=G, B=B, S=S):
                    r = self.gen(gen_length=G, block_length=B, steps=S, alg=alg,
                                 cache="none")
                    self.assertEqual(per_step_counts(r), dream_block_counts(G, B, S))
                    self.assertNotIn(IDS.mask, r.output_ids)
                    Sb = S // (G // B)
                    for b in range(G // B):          # step 0 of a block commits bs alone
                        self.assertEqual(r.commit_step[b * B], b * Sb)
                    self.assertEqual(r.forwards,
                                     sum(1 for c in dream_block_counts(G, B, S) if c))

    def test_block_length_unset_with_a_cache_is_one_block(self):
        a = self.gen(gen_length=12, steps=6, alg="entropy", cache="prefix")
        self.assertEqual(per_step_counts(a), dream_block_counts(12, 12, 6))
        b = self.gen(gen_length=12, steps=6, alg="entropy", cache="none")
        self.assertEqual(per_step_counts(b), tgs.dream_counts(12, 6))   # no blocks

    def test_origin_uses_block_local_p_and_global_t(self):
        seed, G, B, S = 9, 12, 4, 9
        r = self.gen(gen_length=G, block_length=B, steps=S, alg="origin", seed=seed,
                     temperature=0.7, cache="dual")
        Sb = S // (G // B)
        ts = gen.dream_timesteps(Sb, 1e-3)
        t = 0
        for b in range(G // B):
            lo = 5 + b * B
            self.assertEqual(r.commit_step[b * B], t)         # i = 0: bs
            masked = list(range(lo + 1, lo + B))
            t += 1
            for i in range(1, Sb):
                if not masked:
                    break
                prob = 1.0 if i == Sb - 1 else float(gen.dream_fraction(ts, i))
                u = rng.uniform_at(seed, 0, np.array(masked), t, rng.STREAM_TRANSFER)
                want = [q for q, v in zip(masked, u) if v < prob]
                got = [q for q in masked if r.commit_step[q - 5] == t]
                self.assertEqual(got, want, (b, i))
                masked = [q for q in masked if q not in want]
                t += 1
            self.assertEqual(masked, [])
        self.assertEqual(r.steps, t)                  # an empty block ends early

    def test_rules(self):
        """Step 0 of a block commits bs alone; later steps commit >= 1 until the block is
        done; steps bounds the total."""
        r = self.gen(gen_length=12, block_length=4, steps=12, alg="entropy",
                     threshold=0.0, cache="prefix")
        self.assertEqual(per_step_counts(r), [1, 3] * 3)
        one = self.gen(gen_length=12, block_length=4, steps=12, alg="maskgit_plus",
                       threshold=1.1, cache="dual")
        self.assertEqual(per_step_counts(one), [1] * 12)
        capped = self.gen(gen_length=12, block_length=4, steps=6, alg="maskgit_plus",
                          threshold=1.1, cache="none")
        self.assertEqual(capped.steps, 6)
        self.assertEqual(capped.output_ids[6:], [IDS.mask] * 6)
        self.gen(gen_length=12, block_length=4, steps=3, alg="maskgit_plus",
                 factor=1.0)                          # S_b = 1 is fine with a rule

    def test_errors(self):
        for kw in (dict(gen_length=16, block_length=6, steps=8),     # G % B
                   dict(gen_length=16, block_length=4, steps=6),     # steps % blocks
                   dict(gen_length=16, block_length=4, steps=4),     # S_b = 1, no rule
                   dict(gen_length=8, block_length=16, steps=8),     # B > G
                   dict(gen_length=8, steps=1, cache="prefix")):     # S_b = 1, B = G
            with self.subTest(**kw), self.assertRaises(gen.GenerationError):
                self.gen(alg="entropy", **kw)
        with self.assertRaises(gen.GenerationError):                 # absolute: 5 blocks
            self.gen(kind="absolute", gen_length=16, block_length=4, steps=16,
                     alg="entropy")
        r = self.gen(kind="absolute", gen_length=16, block_length=4, steps=10,
                     alg="entropy")
        self.assertEqual(r.cache, "block")


# ----------------------------------------------------------------------------------------
# Command line and check_cached_generate.py plumbing
# ----------------------------------------------------------------------------------------

class CommandLineTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def folder(self, family, kind=None):
        config, tensors = tiny_config_tensors(family, kind)
        config["mask_token_id"], config["eos_token_id"] = IDS.mask, IDS.eos
        d = os.path.join(self.tmp.name, f"{family}_{kind}")
        st.save_model_dir(d, config, tensors, "F32")
        return d

    def main(self, argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = gen.main(argv)
        return rc, out.getvalue(), err.getvalue()

    def test_cache_flag_and_json(self):
        d = self.folder("dream")
        base = ["--model", d, "--ids", "1,2,3", "--ids", "4,5", "--gen-length", "8",
                "--steps", "4", "--seed", "1", "--alg", "entropy"]
        rc, out, _ = self.main(base + ["--cache", "dual", "--block-length", "4"])
        self.assertEqual(rc, 0)
        res = json.loads(out)["results"]
        self.assertEqual([r["cache"] for r in res], ["dual", "dual"])
        self.assertTrue(all(1 <= r["forwards"] <= r["steps"] for r in res))
        rc, out, _ = self.main(base)
        self.assertEqual(json.loads(out)["results"][0]["cache"], "none")
        rc, _, err = self.main(base + ["--cache", "bogus"])
        self.assertEqual(rc, 2)
        self.assertIn("cache", err)
        dl = self.folder("llada", "absolute")
        rc, out, _ = self.main(["--model", dl, "--ids", "1,2,3,4,5", "--gen-length", "8",
                                "--steps", "6", "--block-length", "4", "--seed", "1"])
        self.assertEqual(rc, 0)
        self.assertEqual(json.loads(out)["results"][0]["cache"], "block")


class CheckCachedPlumbingTest(tgs.FakeMosaicCase):
    check = ccg

    def test_argv_round_trip(self):
        """Every case's command line parses back (generate_np's parser) to its Params."""
        families = {n: s.family for n, s in ccg.cg.MODELS.items()}
        families.update({n: families[v.base] for n, v in ccg.VARIANTS.items()})
        for case in ccg.ALL_CASES:
            p = ccg.cg.params_of(case)
            family = families[case.model]
            argv = ccg.mosaic_argv("mosaic", "DIR", family, [[1, 2], [3]], p, None)
            self.assertEqual(argv[argv.index("--cache") + 1], p.cache)
            back = gen.params_from_args(gen.build_arg_parser().parse_args(argv[2:]), family)
            if family == ref.FAMILY_LLADA and p.block_length is None:
                p = replace(p, block_length=p.gen_length)
            self.assertEqual(back, p, case.name)

    def test_agreeing_cli_passes_and_bugs_fail(self):
        cases = "llada_dual_batch3_t1,dream_absolute_auto_p5,error_llada_prefix_cfg"
        rc, out = self.run_check(cases)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.count("PASS "), 3, out)
        for bug, case, text in (("forwards", "llada_dual_batch3_t1", "forwards mosaic"),
                                ("cache", "dream_absolute_auto_p5", "cache mosaic"),
                                ("token", "dream_absolute_auto_p5", "first difference")):
            with self.subTest(bug):
                rc, out = self.run_check(case, bug)
                self.assertEqual(rc, 1, out)
                self.assertIn("FAIL " + case, out)
                self.assertIn(text, out)

    def test_cases_have_unique_names_and_known_models(self):
        names = [c.name for c in ccg.ALL_CASES]
        self.assertEqual(len(names), len(set(names)))
        for c in ccg.ALL_CASES:
            self.assertIn(c.model, ccg.MODEL_NAMES, c.name)
            self.assertIn("cache", c.params, c.name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
