#!/usr/bin/python3
"""Independent NumPy reference of Mosaic's text generation (docs/design/sampling.md,
docs/design/cached-decoding.md).

Written from docs/design/sampling.md, docs/design/cached-decoding.md, docs/design/rng.md and
shared/reference/sampling.md (with shared/reference/caches-and-d2f.md and moe-models.md
§2.3-2.4 for the caches' background), not from Mosaic's C++ code. Logits come from
reference_forward (float64, Dream's shift included): forward() for a step that computes
every position of a full-attention model, forward_rows() for the cached forms and the
block-causal masks (a model may bring its own forward() / forward_rows() through its
`forward_module` attribute: llada_moe_np.GenerationModel, LLaDA-MoE under LLaDA's
sampler); every statistic (softmax, confidences, entropies, cumulative sums) is float64;
the Dream schedule (linspace, 1 - s/t, the transfer count) is float32 exactly as
sampling.md states, each linspace point one fused multiply-add as CUDA computes it (measured
on an H200 with torch 2.11). Random numbers: philox_np (rng.md), addressed by (index,
position, step, stream), so a batch of prompts is each prompt generated on its own.

    model = reference_forward.load_model(folder)
    ids = special_ids_from_folder(folder, eot_id=None)
    result = generate(model, [5, 17, 42], Params(gen_length=16, steps=8, block_length=8),
                      ids)
    result.output_ids   # the G positions after the prompt (mask id where not committed)
    result.steps        # denoising steps run
    result.forwards     # steps that ran a forward (refreshes included)
    result.cache        # the effective cache mode: "none", "prefix", "dual" or "block"

Readings of the specification where it leaves room (the C++ side must do the same):
- steps <= G unless a rule decides (Mosaic refuses more: they could only commit nothing);
- step numbers t count steps from 0 over the whole generation; a step that commits
  nothing (LLaDA quota 0 when a partial grid block holds fewer masks than S, Dream n = 0, no
  origin draw below p) is still a step (it needs no forward);
- LLaDA runs exactly S = steps / blocks steps per block (without a rule); Dream ends as
  soon as the canvas holds no mask (before step S only with alg=origin or a rule); `steps`
  in the result counts the steps run;
- with a Fast-dLLM rule (threshold / factor) a block (Dream: the canvas) is decoded until no
  mask is left (>= 1 token a step), and `steps` bounds the total: generation ends after
  `steps` steps even with masks left (with steps >= G this never binds);
- x0 is never the mask id (it is banned from the choice; the statistics keep it), so every
  committed position is decoded (mask_commits stays 0);
- the factor rule keeps at least one token even when the first rank fails (Fast-dLLM's
  `top_i == 0 -> 1`; unreachable while confidences are probabilities >= 0 > tau_1);
- top-p sorts with ties by lowest id first; top-k keeps every id >= the k-th largest;
- top-p / top-k also apply when T = 0 (they change the confidence, not x0);
- Dream with a rule ranks by the chosen token's probability whatever alg says (Fast-dLLM's
  Dream has only that confidence; alg=origin then decodes like maskgit_plus) and ignores
  alg_temp (as Mosaic's C++ does);
- rejected: threshold with factor, a rule with LLaDA remasking="random", a prompt holding
  the mask id, confidence_eos_eot_inf without an EoT id.

Readings of cached-decoding.md (blocks, caches):
- decoding blocks follow the model's mask kind for both families (§2): an "absolute" Dream
  model decodes the cut grid blocks too; the requirements are then those of the blocks:
  full / "prompt": G % B = 0 (so B <= G); "absolute": B >= 1 only (B > G allowed, G % B
  free); both: steps a positive multiple of the number of blocks n; Dream without a rule
  also S_b = steps / n >= 2. The same hold with a rule;
- Dream block decoding: a block ends as soon as it has no mask (as Fast-dLLM's loop, and as
  the whole-canvas Dream loop ends), else after its S_b steps; the next block's step i = 0
  then takes the next global t. Step i = 0 commits the block's first position bs whatever
  alg or rule (sample_tokens with temperature / top-p / top-k; stream 1 noise at (bs, t));
  a non-origin step whose n is 0 runs no forward;
- the refresh of prefix / dual is the block's first step that runs a forward (in practice
  always step 0 of the block: its quota / candidate count is >= 1);
- block mode's f: "bs" in "after any step of block b, f = bs" is read as the start of the
  attention block holding the decoding block (grid_start), which is bs except for an
  "absolute" first block when P % B != 0, where it is floor(P/B)*B: those prompt rows
  attend bidirectionally to the block's (changing) tokens, so their K/V are not final until
  the block is; with f = P the block mode would differ from none (the stated consequence of
  §4). f moves only after a step that ran a forward (the same, in practice);
- c0 = min(c0 of the table, smallest source row of a candidate); the table's rows always
  cover the candidates here, so this never moves c0;
- block mode with cfg_scale > 0 (LLaDA on a block-causal model, auto) is allowed: the
  unconditional canvas keeps its own cache with the same computed rows (exact, like the
  conditional one); cache none on a block-causal model recomputes both under the mask;
- unknown cache modes are a GenerationError; prefix / dual on a block-causal model is
  rejected before cfg_scale > 0 is looked at;
- `forwards` counts steps that ran a forward (a CFG step's two canvases are one forward).
"""

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import philox_np as rng  # noqa: E402
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402

NEAR_TIE = 1e-6      # two decisive scores closer than this: fp32 and float64 may disagree


class GenerationError(ValueError):
    """Parameters the specification rejects."""


@dataclass
class SpecialIds:
    mask: int
    eos: int
    eot: int = None


def special_ids_from_config(config, eot_id=None):
    """mask_token_id and eos_token_id of config.json; EoT is given by the caller."""
    for key in ("mask_token_id", "eos_token_id"):
        if config.get(key) is None:
            raise GenerationError(f"config.json: field '{key}' is missing")
    return SpecialIds(mask=int(config["mask_token_id"]), eos=int(config["eos_token_id"]),
                      eot=None if eot_id is None else int(eot_id))


def special_ids_from_folder(model_dir, eot_id=None):
    return special_ids_from_config(st.load_config(model_dir), eot_id)


@dataclass
class Params:
    """One generation request's options (the `mosaic generate` flags)."""
    gen_length: int
    steps: int
    block_length: int = None        # None = gen_length; Dream: set = decode in blocks
    temperature: float = 0.0
    # LLaDA
    remasking: str = "low_confidence"
    cfg_scale: float = 0.0
    logits_eos_inf: bool = False
    confidence_eos_eot_inf: bool = False
    # Dream
    alg: str = "origin"
    alg_temp: float = 0.0
    top_p: float = None
    top_k: int = None
    eps: float = 1e-3
    # both
    threshold: float = None
    factor: float = None
    stop_at_eos: bool = False
    seed: int = 0
    cache: str = "auto"             # auto | none | prefix | dual (cached-decoding.md §3)


@dataclass
class Decision:
    """The closest call of a run: what, its gap, at which step and position."""
    kind: str
    gap: float
    step: int
    position: int


class TieLog:
    """Keeps the smallest gap of every decision whose outcome a tiny error could flip."""

    def __init__(self):
        self.closest = None
        self.near = []       # decisions with gap < NEAR_TIE

    def note(self, kind, gap, step, position):
        gap = float(gap)
        if not math.isfinite(gap):
            return
        d = Decision(kind, gap, int(step), int(position))
        if self.closest is None or gap < self.closest.gap:
            self.closest = d
        if gap < NEAR_TIE:
            self.near.append(d)


@dataclass
class Result:
    prompt_ids: list
    output_ids: list          # G ids after the prompt; mask id where nothing was committed
    steps: int                # steps run
    commit_step: list = field(default_factory=list)   # per generated position; -1 if none
    ties: TieLog = field(default_factory=TieLog)
    stopped_at_eos: bool = False
    mask_commits: int = 0     # chosen positions whose x0 was the mask id (stay masked)
    cache: str = "none"       # the effective cache mode: none, prefix, dual or block
    forwards: int = 0         # steps that ran a forward (refreshes included)
    computed: list = field(default_factory=list)      # (t, c0, c1) of every forward


# ----------------------------------------------------------------------------------------
# Small rules (pure functions, unit-tested)
# ----------------------------------------------------------------------------------------

def top_positions(values, positions, k):
    """Indices (into values) of the k largest values; ties: lowest position first."""
    values = np.asarray(values, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.int64)
    order = np.lexsort((positions, -values))
    return order[:k]


def boundary_gap(values, k, zeros_exact=False):
    """values[k-1] - values[k] of the descending sort: how close the top-k cut is.

    zeros_exact: equal values that are both exactly 0 (LLaDA's confidence of a banned
    x0) are an exact tie that every implementation breaks the same way: not a near tie."""
    if k <= 0 or k >= len(values):
        return math.inf
    s = np.sort(np.asarray(values, dtype=np.float64))[::-1]
    if zeros_exact and s[k - 1] == 0.0 and s[k] == 0.0:
        return math.inf
    return s[k - 1] - s[k]


def llada_quota(masked, steps_per_block):
    """Tokens unmasked at each step of a block: M // S + (i < M % S)."""
    base, rem = divmod(int(masked), int(steps_per_block))
    return [base + (1 if i < rem else 0) for i in range(steps_per_block)]


def fma_f32(a, b, c):
    """float32 fma(a, b, c): a * b + c rounded once to float32 (nearest, ties to even)."""
    exact = Fraction(float(np.float32(a))) * Fraction(float(np.float32(b))) + \
        Fraction(float(np.float32(c)))
    near = np.float32(float(exact))                 # within one float32 ulp of the answer
    best = None
    for cand in (np.nextafter(near, np.float32(-np.inf)), near,
                 np.nextafter(near, np.float32(np.inf))):
        err = abs(Fraction(float(cand)) - exact)
        even = int(np.array(cand, dtype=np.float32).view(np.uint32)) % 2 == 0
        if best is None or err < best[0] or (err == best[0] and even):
            best = (err, cand)
    return np.float32(best[1])


def dream_timesteps(steps, eps):
    """float32 ts[0..S] exactly as PyTorch's CUDA linspace(1, eps, S + 1) (sampling.md).

    step = (float32(eps) - 1) / S; ts[k] = fma(step, k, 1) for k < (S + 1) div 2, else
    fma(-step, S - k, float32(eps)): nvcc contracts the kernel's `start + step * k` and
    `end - step * (S - k)` into one fused multiply-add each (measured: torch 2.11 on an
    H200 matches this, and differs from the twice-rounded product and sum)."""
    S = int(steps)
    one, end = np.float32(1.0), np.float32(eps)
    step = np.float32((end - one) / np.float32(S))
    half = (S + 1) // 2
    ts = np.empty(S + 1, dtype=np.float32)
    for k in range(S + 1):
        if k < half:
            ts[k] = fma_f32(step, k, one)
        else:
            ts[k] = fma_f32(-step, S - k, end)
    return ts


def dream_fraction(ts, i):
    """float32 1 - s/t of step i (the origin probability; the others' fraction)."""
    return np.float32(np.float32(1.0) - np.float32(ts[i + 1] / ts[i]))


def dream_transfer_count(num_masked, ts, i, steps):
    """n = int(float32(|M|) * float32(1 - s/t)); n = |M| on the last step."""
    if i == steps - 1:
        return int(num_masked)
    return int(np.float32(np.float32(num_masked) * dream_fraction(ts, i)))


def threshold_count(sorted_conf, tau):
    """Fast-dLLM threshold: the first always, every other with conf >= tau (sorted desc)."""
    c = np.asarray(sorted_conf, dtype=np.float64)
    if c.size == 0:
        return 0
    return 1 + int(np.count_nonzero(c[1:] >= tau))


def factor_thresholds(n, factor):
    """tau_1 = -1, tau_r = 1 - f / (r + 1) for r = 2..n (float64)."""
    return [-1.0] + [1.0 - float(factor) / (r + 1) for r in range(2, n + 1)]


def factor_count(sorted_conf, factor):
    """Fast-dLLM factor rule on confidences sorted descending (get_transfer_index_dynamic).

    K = (first failing rank) - 1, K = n when none fails or the first failure is rank n,
    K = 1 when n = 1 or the first rank fails (negative confidences)."""
    c = np.asarray(sorted_conf, dtype=np.float64)
    n = c.size
    if n == 0:
        return 0
    taus = factor_thresholds(n, factor)
    fail = None
    for r in range(1, n + 1):
        if c[r - 1] < taus[r - 1]:
            fail = r
            break
    if fail is None or fail == n or fail == 1:
        return n if fail is None or fail == n else 1
    return fail - 1


def stop_reached(x, P, stop_ids, mask_id, eos_id):
    """EOS/EoT at a generated position e with every generated position before e unmasked;
    then the still-masked positions after e become EOS (sampling.md, "Stopping at EOS")."""
    for e in range(P, len(x)):
        if x[e] == mask_id:
            return False
        if x[e] in stop_ids:
            rest = x[e + 1:]
            rest[rest == mask_id] = eos_id
            return True
    return False


# ----------------------------------------------------------------------------------------
# Token choice and confidences (what the fused head computes), float64
# ----------------------------------------------------------------------------------------

def _top2_gap(scores):
    """Per row: best - second best of scores (-inf entries ignored; inf if < 2 finite)."""
    if scores.shape[1] < 2:
        return np.full(scores.shape[0], np.inf)
    part = -np.partition(-scores, 1, axis=1)[:, :2]
    gap = part[:, 0] - part[:, 1]
    gap[~np.isfinite(part[:, 1])] = np.inf
    return gap


def _gumbel_rows(seed, vocab, positions, step):
    """g(v, q, t) of stream 1 for every vocab id v and candidate position q: [R, V]."""
    return rng.gumbel_at(seed, np.arange(vocab, dtype=np.uint32)[None, :],
                         np.asarray(positions, dtype=np.uint32)[:, None], step,
                         rng.STREAM_GUMBEL_TOKEN)


def llada_choose(logits, positions, step, temperature, choice_bans, stats_bans, seed):
    """LLaDA token choice and low_confidence confidence for candidate rows.

    logits [R, V] float64. x0 = argmax over ids not in choice_bans of l (T = 0) or of
    l / T + g(v, q, t) (T > 0); confidence = softmax over ids not in stats_bans of l at x0,
    0 if x0 is in stats_bans. Returns (x0, confidence, token gap)."""
    logits = np.asarray(logits, dtype=np.float64)
    R, V = logits.shape
    if temperature > 0:
        scores = logits / temperature + _gumbel_rows(seed, V, positions, step)
    else:
        scores = logits.copy()
    bans = sorted(choice_bans)
    if bans:
        scores[:, bans] = -np.inf
    x0 = np.argmax(scores, axis=1)
    gap = _top2_gap(scores)
    stats = logits.copy()
    sb = sorted(stats_bans)
    if sb:
        stats[:, sb] = -np.inf
    m = np.max(stats, axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.sum(np.exp(stats - m), axis=1))
    chosen = logits[np.arange(R), x0]
    conf = np.exp(chosen - lse)
    if sb:
        conf[np.isin(x0, sb)] = 0.0
    return x0, conf, gap


def dream_sample_tokens(logits, positions, step, temperature, top_p, top_k, alg, seed,
                        ties=None, mask_id=None):
    """Dream sample_tokens for candidate rows (sampling.md). Returns (x0, confidence, gap).

    l' = l / T (T > 0); top-p then top-k decide the kept ids; probs = softmax of l' over
    the kept ids; x0 = argmax of l' (+ g(v, q, t) when T > 0) over the kept ids;
    confidence: probs[x0] (origin, maskgit_plus), p(1st) - p(2nd) (topk_margin),
    sum p ln p (entropy, exact)."""
    l = np.asarray(logits, dtype=np.float64)
    R, V = l.shape
    lp = l / temperature if temperature > 0 else l.copy()
    kept = np.ones((R, V), dtype=bool)
    if top_p is not None and top_p < 1:
        order = np.argsort(-lp, axis=1, kind="stable")          # ties: lowest id first
        srt = np.take_along_axis(lp, order, axis=1)
        e = np.exp(srt - srt[:, :1])
        cum = np.cumsum(e / np.sum(e, axis=1, keepdims=True), axis=1)
        remove = np.zeros((R, V), dtype=bool)
        remove[:, 1:] = cum[:, :-1] > top_p
        np.put_along_axis(kept, order, ~remove, axis=1)
        if ties is not None and V > 1:
            d = np.abs(cum[:, :-1] - top_p).min(axis=1)
            for r in range(R):
                ties.note("top_p", d[r], step, positions[r])
    if top_k is not None and top_k > 0:
        k = min(int(top_k), V)
        vals = np.where(kept, lp, -np.inf)
        srt = -np.sort(-vals, axis=1)
        kth = srt[:, k - 1:k]
        kept &= ~(np.isfinite(kth) & (vals < kth))
        if ties is not None and k < V:
            for r in range(R):
                if np.isfinite(srt[r, k]):
                    ties.note("top_k", srt[r, k - 1] - srt[r, k], step, positions[r])
    masked_lp = np.where(kept, lp, -np.inf)
    m = np.max(masked_lp, axis=1, keepdims=True)
    e = np.where(kept, np.exp(masked_lp - m), 0.0)
    z = np.sum(e, axis=1)
    lse = m[:, 0] + np.log(z)
    probs = e / z[:, None]
    if temperature > 0:
        scores = np.where(kept, lp + _gumbel_rows(seed, V, positions, step), -np.inf)
    else:
        scores = masked_lp.copy()
    if mask_id is not None:
        scores[:, mask_id] = -np.inf     # the mask id is never a choice (sampling.md)
    x0 = np.argmax(scores, axis=1)
    gap = _top2_gap(scores)
    if alg in ("origin", "maskgit_plus"):
        conf = np.exp(lp[np.arange(R), x0] - lse)
    elif alg == "topk_margin":
        top2 = -np.partition(-probs, 1, axis=1)[:, :2] if V > 1 else \
            np.concatenate([probs, np.zeros((R, 1))], axis=1)
        conf = top2[:, 0] - top2[:, 1]
    elif alg == "entropy":
        conf = np.sum(np.where(kept, probs * lp, 0.0), axis=1) - lse
    else:
        raise GenerationError(f"unknown alg {alg!r}")
    return x0, conf, gap


# ----------------------------------------------------------------------------------------
# Decoding blocks, cache modes and the rows a step computes (cached-decoding.md)
# ----------------------------------------------------------------------------------------

CACHE_MODES = ("auto", "none", "prefix", "dual")


@dataclass
class Block:
    """A decoding block [start, end) and the start of the attention block that holds it.

    grid_start differs from start only for an "absolute" first block cut at the prompt's end
    (its attention block [grid_start, ...) also holds the prompt's tail)."""
    start: int
    end: int
    grid_start: int


def decoding_blocks(kind, P, G, B):
    """The decoding blocks of cached-decoding.md §2 for the mask kind of the model.

    full (None) and "prompt": [P + bB, P + (b+1)B) for b < G/B (G % B = 0, so B <= G);
    "absolute": the grid blocks [kB, (k+1)B) that meet [P, L), cut to [P, L): their number
    is ceil(L/B) - floor(P/B) and G % B need not be 0."""
    if B < 1:
        raise GenerationError(f"block_length must be >= 1, got {B}")
    L = P + G
    if kind == "absolute":
        return [Block(max(k * B, P), min((k + 1) * B, L), k * B)
                for k in range(P // B, -(-L // B))]
    if B > G or G % B:
        raise GenerationError(f"gen_length {G} is not a multiple of block_length {B} "
                              f"(or block_length > gen_length)")
    return [Block(P + b * B, P + (b + 1) * B, P + b * B) for b in range(G // B)]


def steps_per_block(steps, nblocks):
    """steps / blocks; steps must be a positive multiple of the number of blocks."""
    if steps % nblocks or steps < nblocks:
        raise GenerationError(f"steps {steps} is not a positive multiple of the "
                              f"{nblocks} blocks")
    return steps // nblocks


def resolve_cache(cache, block_attention, cfg_scale):
    """The effective cache mode of cached-decoding.md §3: "none", "prefix", "dual" or
    "block" (auto on a block-causal model); raises for the errors of §3."""
    if cache not in CACHE_MODES:
        raise GenerationError(f"cache {cache!r} is not one of {', '.join(CACHE_MODES)}")
    if cache == "auto":
        return "block" if block_attention is not None else "none"
    if cache == "none":
        return "none"
    if block_attention is not None:
        raise GenerationError(f"cache {cache} on a block-causal model (block_attention "
                              f"{block_attention!r}): it uses its exact block cache "
                              f"(cache auto)")
    if cfg_scale > 0:
        raise GenerationError(f"cache {cache} with cfg_scale > 0: the unconditional canvas "
                              f"has no cache")
    return cache


def computed_rows(mode, L, block, refresh, f):
    """[c0, c1) of a step's forward by the table of §4, before the candidates' own source
    rows are added (c0 = min(that, smallest row a candidate reads)).

    refresh: no step of the block has run a forward yet; f: the block mode's start of the
    region not yet computed from final tokens."""
    if mode == "none":
        return 0, L
    if mode == "prefix":
        return (0, L) if refresh else (block.start, L)
    if mode == "dual":
        return (0, L) if refresh else (block.start, block.end)
    if mode == "block":
        return f, block.end
    raise ValueError(f"unknown cache mode {mode!r}")


class StepForward:
    """One sequence's forwards under its effective cache mode (cached-decoding.md §4).

    It keeps the sequence's caches (the conditional canvas's and, under CFG, the
    unconditional canvas's, which has the same computed rows), f of the block mode, whether
    the active block has had its refresh, the count of forwards and the rows every forward
    computed ((t, c0, c1), for the tests)."""

    def __init__(self, model, mode, P, L, B, cfg_scale, mask_id):
        self.model, self.mode, self.P, self.L, self.B = model, mode, P, L, B
        self.cfg_scale, self.mask_id = cfg_scale, mask_id
        self.kind = model.block_attention
        ncanvas = 2 if cfg_scale > 0 else 1
        self.caches = [ref.new_cache(model, L) for _ in range(ncanvas)]
        self.block = Block(P, L, P)
        self.refresh = True
        self.f = 0
        self.forwards = 0
        self.rows = []

    def begin_block(self, block):
        self.block = block
        self.refresh = True

    def logits(self, x, rows, t):
        """float64 logits of candidate rows `rows` at step t (the step's one forward)."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.mode == "none" and self.kind is None:
            # today's exact step, through the unchanged full forward
            out = _logits(self.model, x, rows, self.cfg_scale, self.P, self.mask_id)
            c0, c1 = 0, self.L
        else:
            c0, c1 = computed_rows(self.mode, self.L, self.block, self.refresh, self.f)
            c0 = min(c0, int(ref.source_rows(self.model, rows, self.L).min()))
            ranges = ref.key_ranges(self.kind, range(c0, c1), self.P, self.B, self.L)
            if self.mode == "none":      # every position under the mask: nothing is kept
                self.caches = [ref.new_cache(self.model, self.L) for _ in self.caches]
            fm = forward_module(self.model)
            out = fm.forward_rows(self.model, x, c0, c1, ranges, self.caches[0], rows)
            if self.cfg_scale > 0:
                un_x = np.array(x)
                un_x[:self.P] = self.mask_id
                un = fm.forward_rows(self.model, un_x, c0, c1, ranges, self.caches[1],
                                     rows)
                out = un + (self.cfg_scale + 1.0) * (out - un)
            out = np.asarray(out, dtype=np.float64)
        self.forwards += 1
        self.refresh = False
        if self.mode == "block":
            # Everything before the active attention block is final now: its start, not
            # the decoding block's (an "absolute" first block's prompt tail reads it).
            self.f = self.block.grid_start
        self.rows.append((int(t), int(c0), int(c1)))
        return out


# ----------------------------------------------------------------------------------------
# The loops
# ----------------------------------------------------------------------------------------

def forward_module(model):
    """Where a model's forward lives: reference_forward for the dense LLaDA / Dream models,
    or the model's own `forward_module` attribute, an object with the same
    forward(model, ids, rows) and forward_rows(model, ids, c0, c1, ranges, cache, rows)
    (llada_moe_np.GenerationModel: LLaDA-MoE under LLaDA's sampler). Looked up at every
    call, so a patched reference_forward.forward is seen."""
    return getattr(model, "forward_module", None) or ref


def _logits(model, x, rows, cfg_scale, P, mask_id):
    """float64 logits of canvas rows; CFG combines with the prompt-masked canvas."""
    fm = forward_module(model)
    cond = np.asarray(fm.forward(model, x, rows), dtype=np.float64)
    if cfg_scale > 0:
        un_x = np.array(x)
        un_x[:P] = mask_id
        un = np.asarray(fm.forward(model, un_x, rows), dtype=np.float64)
        return un + (cfg_scale + 1.0) * (cond - un)
    return cond


def _rule_count(sorted_conf, p):
    if p.threshold is not None:
        return threshold_count(sorted_conf, p.threshold)
    return factor_count(sorted_conf, p.factor)


def _note_rule(ties, sorted_conf, k, p, step, position, zeros_exact=False):
    """Gaps of a rule decision: each rank vs its threshold, and the top-k cut."""
    c = np.asarray(sorted_conf)
    if p.threshold is not None:
        for v in c[1:]:
            ties.note("threshold", abs(v - p.threshold), step, position)
    else:
        taus = factor_thresholds(c.size, p.factor)
        for r in range(1, min(k + 1, c.size) + 1):
            ties.note("factor", abs(c[r - 1] - taus[r - 1]), step, position)
    ties.note("select", boundary_gap(c, k, zeros_exact), step, position)


def _commit(x, cand, chosen, x0, t, P, mask_id, res):
    """x[cand[r]] = x0[r] for the chosen rows; x0 = mask id leaves the position masked."""
    for r in chosen:
        x[cand[r]] = x0[r]
        if x0[r] == mask_id:
            res.mask_commits += 1
        else:
            res.commit_step[cand[r] - P] = t


def _validate_common(prompt, p, ids, vocab):
    if p.gen_length < 1:
        raise GenerationError("gen_length must be >= 1")
    if p.steps < 1:
        raise GenerationError("steps must be >= 1")
    if p.steps > p.gen_length and p.threshold is None and p.factor is None:
        # Mosaic's bound (issue 29): a step unmasks at least one position, so more steps than
        # positions are forwards that change nothing; a rule's steps is only a cap.
        raise GenerationError("steps must be <= gen_length without a rule")
    if p.temperature < 0:
        raise GenerationError("temperature must be >= 0")
    if len(prompt) < 1:
        raise GenerationError("the prompt must hold at least one token")
    if any(not 0 <= int(v) < vocab for v in prompt):
        raise GenerationError(f"prompt id out of range [0, {vocab})")
    if ids.mask in [int(v) for v in prompt]:
        raise GenerationError("the prompt holds the mask id")
    if p.threshold is not None and p.factor is not None:
        raise GenerationError("threshold and factor are exclusive")
    if p.seed < 0 or p.seed >= 2 ** 64:
        raise GenerationError("seed must be a uint64")


def llada_bans(p, ids):
    """(choice_bans, stats_bans) of LLaDA: {EOS} if logits_eos_inf; the stats add EoT, and
    EOS when T = 0 (the reference's chained assignment), if confidence_eos_eot_inf."""
    choice_bans = {ids.eos} if p.logits_eos_inf else set()
    stats_bans = set(choice_bans)
    choice_bans |= {ids.mask}            # the mask id is never a choice (sampling.md)
    if p.confidence_eos_eot_inf:
        if ids.eot is None:
            raise GenerationError("confidence_eos_eot_inf needs an EoT id")
        stats_bans |= {ids.eot}
        if p.temperature == 0:
            stats_bans |= {ids.eos}
    return choice_bans, stats_bans


def _finish(res, x, P, fwd, G):
    res.output_ids = [int(v) for v in x[P:P + G]]
    res.forwards = fwd.forwards
    res.computed = fwd.rows
    return res


def _validate_suffix(suffix, mode, model, p, ids):
    """Infilling (docs/design/infilling.md): full attention, no cache, no CFG; ids in the
    vocabulary."""
    if not len(suffix):
        return
    if model.block_attention is not None:
        raise GenerationError("a suffix needs full attention")
    if mode != "none":
        raise GenerationError("a suffix decodes without a KV cache")
    if p.cfg_scale:
        raise GenerationError("a suffix cannot be combined with cfg_scale")
    if any(not 0 <= int(v) < model.vocab for v in suffix):
        raise GenerationError(f"suffix id out of range [0, {model.vocab})")


def _canvas(prompt, G, suffix, mask_id):
    """prompt + G masks + suffix: the suffix is context, never a candidate."""
    return np.array(list(prompt) + [mask_id] * G + list(suffix), dtype=np.int64)


def generate_llada(model, prompt, p, ids, suffix=()):
    """LLaDA generate() of sampling.md for one prompt, blocks and caches of
    cached-decoding.md; with a suffix, the G positions between prompt and suffix."""
    _validate_common(prompt, p, ids, model.vocab)
    G, P = p.gen_length, len(prompt)
    B = G if p.block_length is None else p.block_length
    blocks = decoding_blocks(model.block_attention, P, G, B)
    S = steps_per_block(p.steps, len(blocks))
    if p.remasking not in ("low_confidence", "random"):
        raise GenerationError(f"remasking {p.remasking!r}")
    rule = p.threshold is not None or p.factor is not None
    if rule and p.remasking == "random":
        raise GenerationError("threshold / factor rank by confidence: not with "
                              "remasking=random")
    mode = resolve_cache(p.cache, model.block_attention, p.cfg_scale)
    _validate_suffix(suffix, mode, model, p, ids)
    x = _canvas(prompt, G, suffix, ids.mask)
    choice_bans, stats_bans = llada_bans(p, ids)
    stop_ids = {ids.eos} | ({ids.eot} if ids.eot is not None else set())
    res = Result(prompt_ids=[int(v) for v in prompt], output_ids=[], steps=0,
                 commit_step=[-1] * G, cache=mode)
    fwd = StepForward(model, mode, P, len(x), B, p.cfg_scale, ids.mask)
    t = 0
    for block in blocks:
        lo, hi = block.start, block.end
        fwd.begin_block(block)
        quota = llada_quota(np.count_nonzero(x[lo:hi] == ids.mask), S)
        i = 0
        while True:
            masked = lo + np.flatnonzero(x[lo:hi] == ids.mask)
            if rule:                     # until the block has no mask; steps bounds the total
                if masked.size == 0 or t >= p.steps:
                    break
            elif i >= S:                 # exactly S steps, those with quota 0 included
                break
            k = None if rule else quota[i]
            if k == 0 or masked.size == 0:
                pass                     # a step that commits nothing needs no forward
            elif p.remasking == "random":
                u = rng.uniform_at(p.seed, 0, masked.astype(np.uint32), t,
                                   rng.STREAM_RANDOM_CONFIDENCE)
                res.ties.note("select", boundary_gap(u, k), t, masked[0])
                cand = masked[np.sort(top_positions(u, masked, k))]
                logits = fwd.logits(x, cand, t)
                x0, _, gap = llada_choose(logits, cand, t, p.temperature, choice_bans,
                                          stats_bans, p.seed)
                for r, q in enumerate(cand):
                    res.ties.note("token", gap[r], t, q)
                _commit(x, cand, np.arange(cand.size), x0, t, P, ids.mask, res)
            else:
                cand = masked
                logits = fwd.logits(x, cand, t)
                x0, conf, gap = llada_choose(logits, cand, t, p.temperature, choice_bans,
                                             stats_bans, p.seed)
                for r, q in enumerate(cand):
                    res.ties.note("token", gap[r], t, q)
                if rule:
                    srt = np.sort(conf)[::-1]
                    k = _rule_count(srt, p)
                    _note_rule(res.ties, srt, k, p, t, cand[0], bool(stats_bans))
                else:
                    res.ties.note("select", boundary_gap(conf, k, bool(stats_bans)), t,
                                  cand[0])
                _commit(x, cand, top_positions(conf, cand, k), x0, t, P, ids.mask, res)
            t += 1
            i += 1
            if p.stop_at_eos and stop_reached(x[:P + G], P, stop_ids, ids.mask, ids.eos):
                res.stopped_at_eos = True
                break
        if res.stopped_at_eos:
            break
    res.steps = t
    return _finish(res, x, P, fwd, G)


def _dream_sampler(fwd, x, p, rule, res, ids):
    """sample(rows, t) -> (x0, confidence): the step's forward and Dream's sample_tokens."""
    alg = "maskgit_plus" if rule else p.alg     # rules rank by p(x0)

    def sample(rows, t):
        logits = fwd.logits(x, rows, t)
        x0, conf, gap = dream_sample_tokens(logits, rows, t, p.temperature, p.top_p,
                                            p.top_k, alg, p.seed, res.ties, ids.mask)
        for r, q in enumerate(rows):
            res.ties.note("token", gap[r], t, q)
        return x0, conf
    return sample


def _dream_select(masked, n, conf, t, p, res):
    """Indices (into masked) of the n best by confidence, or by conf / alg_temp + Gumbel
    (stream 4) when alg_temp > 0."""
    if p.alg_temp and p.alg_temp > 0:
        key = conf / p.alg_temp + rng.gumbel_at(p.seed, 0, masked.astype(np.uint32), t,
                                                rng.STREAM_POSITION_GUMBEL)
    else:
        key = conf
    res.ties.note("select", boundary_gap(key, n), t, masked[0])
    return top_positions(key, masked, n)


def generate_dream(model, prompt, p, ids, suffix=()):
    """Dream diffusion_generate() of sampling.md for one prompt (a batch of one); in blocks
    (Fast-dLLM's generation_utils_block, cached-decoding.md §2) when block_length is set, a
    cache is used or the model is block-causal."""
    _validate_common(prompt, p, ids, model.vocab)
    if p.alg not in ("origin", "maskgit_plus", "topk_margin", "entropy"):
        raise GenerationError(f"alg {p.alg!r}")
    rule = p.threshold is not None or p.factor is not None
    if p.top_k is not None and p.top_k < 0:
        raise GenerationError("top_k must be >= 0")
    mode = resolve_cache(p.cache, model.block_attention, 0.0)    # Dream has no CFG
    _validate_suffix(suffix, mode, model, p, ids)
    if p.block_length is not None or mode != "none" or model.block_attention is not None:
        return _generate_dream_blocks(model, prompt, p, ids, mode, rule, suffix)
    S, G, P = p.steps, p.gen_length, len(prompt)
    x = _canvas(prompt, G, suffix, ids.mask)
    ts = dream_timesteps(S, p.eps)
    stop_ids = {ids.eos} | ({ids.eot} if ids.eot is not None else set())
    res = Result(prompt_ids=[int(v) for v in prompt], output_ids=[], steps=0,
                 commit_step=[-1] * G, cache=mode)
    fwd = StepForward(model, mode, P, len(x), G, 0.0, ids.mask)
    sample = _dream_sampler(fwd, x, p, rule, res, ids)
    t = 0
    while True:
        masked = P + np.flatnonzero(x[P:P + G] == ids.mask)
        if masked.size == 0 or t >= S:
            break
        cand, x0, chosen = _dream_step(masked, t, t, S, ts, rule, p, sample, res)
        _commit(x, cand, chosen, x0, t, P, ids.mask, res)
        t += 1
        if p.stop_at_eos and stop_reached(x[:P + G], P, stop_ids, ids.mask, ids.eos):
            res.stopped_at_eos = True
            break
    res.steps = t
    return _finish(res, x, P, fwd, G)


def _dream_step(masked, t, i, S, ts, rule, p, sample, res):
    """(candidates, their tokens, indices committed) of one Dream step over `masked`: the rule,
    or step i of a schedule `ts` of S steps (the whole canvas's, or a block's); the noise is
    addressed by the generation's step t."""
    if rule:
        cand = masked
        x0, conf = sample(cand, t)
        srt = np.sort(conf)[::-1]
        k = _rule_count(srt, p)
        _note_rule(res.ties, srt, k, p, t, cand[0])
        return cand, x0, top_positions(conf, cand, k)
    if p.alg == "origin":
        prob = 1.0 if i == S - 1 else float(dream_fraction(ts, i))
        u = rng.uniform_at(p.seed, 0, masked.astype(np.uint32), t, rng.STREAM_TRANSFER)
        cand = masked[u < prob]
        x0 = sample(cand, t)[0] if cand.size else np.zeros(0, dtype=np.int64)
        return cand, x0, np.arange(cand.size)
    n = dream_transfer_count(masked.size, ts, i, S)
    if n == 0:                           # a step that commits nothing needs no forward
        return masked, np.zeros(0, dtype=np.int64), []
    x0, conf = sample(masked, t)
    return masked, x0, _dream_select(masked, n, conf, t, p, res)


def _generate_dream_blocks(model, prompt, p, ids, mode, rule, suffix=()):
    """Dream block decoding (cached-decoding.md §2): per block, step i = 0 commits the
    block's first position; later steps follow the block-local schedule or the rule."""
    G, P = p.gen_length, len(prompt)
    B = G if p.block_length is None else p.block_length
    blocks = decoding_blocks(model.block_attention, P, G, B)
    Sb = steps_per_block(p.steps, len(blocks))
    if not rule and Sb < 2:
        raise GenerationError(f"Dream block decoding needs >= 2 steps per block without a "
                              f"rule (steps {p.steps} over {len(blocks)} blocks)")
    ts = dream_timesteps(Sb, p.eps)
    x = _canvas(prompt, G, suffix, ids.mask)
    stop_ids = {ids.eos} | ({ids.eot} if ids.eot is not None else set())
    res = Result(prompt_ids=[int(v) for v in prompt], output_ids=[], steps=0,
                 commit_step=[-1] * G, cache=mode)
    fwd = StepForward(model, mode, P, len(x), B, 0.0, ids.mask)
    sample = _dream_sampler(fwd, x, p, rule, res, ids)
    t = 0
    for block in blocks:
        lo, hi = block.start, block.end
        fwd.begin_block(block)
        i = 0
        while True:
            masked = lo + np.flatnonzero(x[lo:hi] == ids.mask)
            # A block ends as soon as it has no mask (Fast-dLLM's loop; Dream's whole-canvas
            # loop ends the same way); without a rule after its Sb steps; steps bounds all.
            if masked.size == 0 or t >= p.steps or (not rule and i >= Sb):
                break
            if i == 0:
                # the block's first position alone, its token from hidden row lo - 1
                assert masked[0] == lo, "a block starts with its first position masked"
                cand = masked[:1]
                x0, _ = sample(cand, t)
                chosen = [0]
            else:
                cand, x0, chosen = _dream_step(masked, t, i, Sb, ts, rule, p, sample, res)
            _commit(x, cand, chosen, x0, t, P, ids.mask, res)
            t += 1
            i += 1
            if p.stop_at_eos and stop_reached(x[:P + G], P, stop_ids, ids.mask, ids.eos):
                res.stopped_at_eos = True
                break
        if res.stopped_at_eos or t >= p.steps:
            break
    res.steps = t
    return _finish(res, x, P, fwd, G)


def generate(model, prompt, params, ids, suffix=()):
    """One prompt, either family; `suffix`: ids after the generated span (infilling)."""
    if model.family == ref.FAMILY_LLADA:
        return generate_llada(model, prompt, params, ids, suffix)
    if model.family == ref.FAMILY_DREAM:
        return generate_dream(model, prompt, params, ids, suffix)
    raise GenerationError(f"unknown family {model.family!r}")


def generate_batch(model, prompts, params, ids, suffix=()):
    """A batch = every prompt generated on its own with the same parameters and seed."""
    return [generate(model, prompt, params, ids, suffix) for prompt in prompts]


# ----------------------------------------------------------------------------------------
# Command line: the `mosaic generate` flags, so this file can stand in for the CLI
# ----------------------------------------------------------------------------------------

def _int_list(text):
    return [int(v) for v in text.split(",") if v != ""]


def build_arg_parser():
    ap = argparse.ArgumentParser(description="NumPy reference of `mosaic generate`")
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", type=_int_list, action="append", required=True)
    ap.add_argument("--gen-length", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--block-length", type=int)
    ap.add_argument("--cache", default="auto")      # checked by generate (GenerationError)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--remasking", choices=["low_confidence", "random"])
    ap.add_argument("--cfg-scale", type=float)
    ap.add_argument("--logits-eos-inf", action="store_true")
    ap.add_argument("--confidence-eos-eot-inf", action="store_true")
    ap.add_argument("--eot-id", type=int)
    ap.add_argument("--alg", choices=["origin", "maskgit_plus", "topk_margin", "entropy"])
    ap.add_argument("--alg-temp", type=float)
    ap.add_argument("--top-p", type=float)
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--eps", type=float)
    ap.add_argument("--threshold", type=float)
    ap.add_argument("--factor", type=float)
    ap.add_argument("--stop-at-eos", action="store_true")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--suffix-ids", type=_int_list, default=[])
    ap.add_argument("--json", action="store_true")
    return ap


def params_from_args(args, family):
    """Params from parsed flags; the other family's options are rejected like the CLI."""
    llada_only = {"--remasking": args.remasking, "--cfg-scale": args.cfg_scale,
                  "--logits-eos-inf": args.logits_eos_inf or None,
                  "--confidence-eos-eot-inf": args.confidence_eos_eot_inf or None}
    dream_only = {"--alg": args.alg, "--alg-temp": args.alg_temp, "--top-p": args.top_p,
                  "--top-k": args.top_k, "--eps": args.eps}
    other = dream_only if family == ref.FAMILY_LLADA else llada_only
    given = [k for k, v in other.items() if v is not None]
    if given:
        raise GenerationError(f"{', '.join(given)} not allowed for family {family}")
    p = Params(gen_length=args.gen_length, steps=args.steps, block_length=args.block_length,
               temperature=args.temperature, threshold=args.threshold, factor=args.factor,
               stop_at_eos=args.stop_at_eos, seed=args.seed, cache=args.cache)
    if family == ref.FAMILY_LLADA:
        p.remasking = args.remasking or "low_confidence"
        p.cfg_scale = args.cfg_scale or 0.0
        p.logits_eos_inf = args.logits_eos_inf
        p.confidence_eos_eot_inf = args.confidence_eos_eot_inf
    else:
        p.alg = args.alg or "origin"
        p.alg_temp = args.alg_temp or 0.0
        p.top_p, p.top_k = args.top_p, args.top_k
        p.eps = 1e-3 if args.eps is None else args.eps
    return p


def result_json(results):
    return {"results": [{"prompt_ids": r.prompt_ids, "output_ids": r.output_ids,
                         "steps": r.steps, "forwards": r.forwards, "cache": r.cache}
                        for r in results]}


def main(argv=None):
    args = build_arg_parser().parse_args(argv)
    dtype = np.float32 if os.environ.get("GENERATE_NP_FP32") else np.float64
    model = ref.load_model(args.model, dtype=dtype)
    try:
        params = params_from_args(args, model.family)
        ids = special_ids_from_folder(args.model, args.eot_id)
        results = generate_batch(model, args.ids, params, ids, args.suffix_ids)
    except GenerationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result_json(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
