#!/usr/bin/python3
"""Independent NumPy reference of D2F pipelined block decoding (docs/design/d2f-decoding.md).

Written from docs/design/d2f-decoding.md and shared/reference/caches-and-d2f.md §1.3 / §1.5
(with sampling.md and cached-decoding.md for what they leave to those), not from Mosaic's C++
code. The model, its LoRA adapter and the block-causal forward are reference_forward's and
lora_np's; the token choice (Gumbel-max with Mosaic's counter-based noise, the mask-id ban)
is generate_np's dream_sample_tokens, used for both families; only D2F's state machine and
its loop are here.

    model = reference_forward.load_model(folder)
    ids = generate_np.special_ids_from_folder(folder)
    res = generate(model, [5, 17, 42], D2fParams(gen_length=64, block_length=32), ids)
    res.output_ids       # the gen_length positions after the prompt (eos where no block)
    res.steps            # steps run, the final one without a forward included
    res.forwards         # steps that ran a forward
    res.cache            # "block" (cache auto) or "none"
    res.stopped_at_eos   # eos_seen
    res.tokens_per_step  # tokens accepted at every step (0 for the final one)

    simulate(P, D2fParams(...), ids, choose)   # the state machine alone: choose(t, x,
                                               # candidates, (c0, c1)) -> (tokens, confs)

Block cache (cache auto, reported "block"): one KVCache per request (reference_forward's,
NaN where never written, so a read of a row no forward computed raises); each forward
computes the rows [c0, c1) = [cached_until, end) (Dream: c0 lowered to q - 1 of its first
candidate) under the "prompt" block-causal mask and reads every other key from that cache,
i.e. from the K/V kept from earlier forwards. Cache none computes every row [0, L) of the
canvas from an empty cache every step. The two must agree exactly (test_d2f_self.py).

Readings of d2f-decoding.md where it leaves room (the C++ side should do the same):
- the step index t addressing the noise is the 0-based index of the step over the request
  (the steps of the loop, each one running a forward but the final one); the Gumbel noise is
  sampling.md's stream 1 at (vocab id, absolute position, t);
- the confidence is p(x0) under softmax(l) (T = 0) or softmax(l / T) (T > 0) over the whole
  vocabulary (the mask id included in the softmax, excluded only from the choice), for LLaDA
  too (D2F's sample_tokens; not LLaDA's low_confidence, which uses softmax(l) at any T);
- block_length None or 0: 32, or gen_length when gen_length < 32; it must divide gen_length;
- decoded fractions are (B - masks_left) / B in double against the thresholds (a fraction
  exactly equal to a non-dyadic threshold, e.g. 7/10 against 0.7, is noted as a near tie);
- the fully-activated fallback takes the most confident candidate, ties to the lowest
  position; it applies only when no candidate of the block passes (> tau_conf);
- step 9: the loop runs at most max_steps steps (the final no-forward step is one of them);
  when the cap cuts it, steps = forwards and masks may remain (they stay the mask id);
- positions of blocks never created hold eos_id in the output;
- stop_at_eos (off by default): after a step's commits, sampling.md's rule over the canvas
  (an end token with no mask before it): the request ends there without the final step
  (steps = forwards), masks after it become eos; stopped_at_eos is then true as well;
- refused (GenerationError): threshold, factor, remasking "random", cfg_scale > 0,
  logits_eos_inf, confidence_eos_eot_inf, any Dream alg / alg_temp / top_p / top_k given, a
  suffix, cache prefix / dual (or unknown), block_attention "absolute", thresholds outside
  [0, 1], block_length not dividing gen_length, max_steps < 1, and the common ones
  (gen_length < 1, temperature < 0, an empty prompt, ids out of range, the mask id in the
  prompt, a seed outside uint64).
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_np as gen  # noqa: E402
import lora_np  # noqa: E402
import reference_forward as ref  # noqa: E402

GenerationError = gen.GenerationError
TieLog = gen.TieLog
NEAR_TIE = gen.NEAR_TIE
DEFAULT_BLOCK = 32
ACTIVE, TO_CACHE, IN_CACHE = "active", "to_cache", "in_cache"
CACHE_MODES = ("auto", "none")


@dataclass
class D2fParams:
    """One D2F request's options (GenerationOptions::d2f and the ones it shares)."""
    gen_length: int = 128
    block_length: int = None            # None / 0: 32, or gen_length when shorter
    block_add_threshold: float = 0.5    # tau_add
    decoded_token_threshold: float = 0.9  # tau_act
    skip_threshold: float = 1.0         # tau_conf (strict >)
    max_steps: int = 10000              # the CLI's --steps
    temperature: float = 0.0
    seed: int = 0
    cache: str = "auto"
    stop_at_eos: bool = False
    # Options D2F refuses by name (None / False = not given)
    threshold: float = None
    factor: float = None
    remasking: str = None
    cfg_scale: float = None
    logits_eos_inf: bool = False
    confidence_eos_eot_inf: bool = False
    alg: str = None
    alg_temp: float = None
    top_p: float = None
    top_k: int = None


@dataclass
class GenBlock:
    """Generation block j >= 1: [start, end), its masks left, state and the sticky flag."""
    index: int
    start: int
    end: int
    masks_left: int
    state: str = ACTIVE
    fully_activated: bool = False

    @property
    def size(self):
        return self.end - self.start

    def decoded(self):
        return self.size - self.masks_left


@dataclass
class StepRecord:
    """What one step did (for the tests)."""
    t: int
    added: int = None               # index of the block added by step 1, if any
    forward: bool = False
    rows: tuple = None              # (c0, c1) of the forward
    candidates: list = field(default_factory=list)
    accepted: dict = field(default_factory=dict)   # block index -> accepted positions
    fully_activated: dict = field(default_factory=dict)  # block index -> flag at step 6
    confidences: dict = field(default_factory=dict)  # position -> confidence
    states: list = field(default_factory=list)     # (state, fully_activated, masks_left) after
    cached_until: int = 0           # after step 7
    end: int = 0                    # P + created blocks * B at the forward


@dataclass
class D2fResult:
    prompt_ids: list
    output_ids: list                # gen_length ids after the prompt
    steps: int
    forwards: int
    cache: str                      # "block" or "none"
    stopped_at_eos: bool
    tokens_per_step: list
    commit_step: list               # per generated position: the step that accepted it, -1
    blocks_created: int
    eos_seen: bool
    ties: TieLog = field(default_factory=TieLog)
    trace: list = field(default_factory=list)
    mask_commits: int = 0           # always 0 (the mask id is never a choice); check_generate
                                    # reports it, so it is kept


# ----------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------

def resolve_block_length(gen_length, block_length):
    """B: block_length, or 32 when unset / 0 (gen_length if shorter); must divide gen_length."""
    B = block_length if block_length else min(DEFAULT_BLOCK, gen_length)
    if B < 1:
        raise GenerationError(f"block_length must be >= 1, got {B}")
    if gen_length % B:
        raise GenerationError(f"D2F: block_length {B} does not divide gen_length {gen_length}")
    return B


def resolve_cache(cache):
    """The effective mode: auto -> "block" (D2F's exact block cache), none -> "none"."""
    if cache == "auto":
        return "block"
    if cache == "none":
        return "none"
    if cache in ("prefix", "dual"):
        raise GenerationError(f"D2F: cache {cache} is refused (D2F uses its exact block cache; "
                              f"cache auto or none)")
    raise GenerationError(f"cache {cache!r} is not one of auto, none, prefix, dual")


def validate(prompt, p, ids, vocab, block_attention=None, suffix=()):
    """Raises GenerationError for what d2f-decoding.md refuses; returns (B, cache mode)."""
    refused = {"threshold": p.threshold is not None, "factor": p.factor is not None,
               "remasking random": p.remasking == "random",
               "cfg_scale > 0": p.cfg_scale is not None and p.cfg_scale > 0,
               "logits_eos_inf": p.logits_eos_inf,
               "confidence_eos_eot_inf": p.confidence_eos_eot_inf,
               "alg": p.alg is not None, "alg_temp": p.alg_temp is not None,
               "top_p": p.top_p is not None, "top_k": p.top_k is not None,
               "a suffix": len(suffix) > 0}
    given = [k for k, v in refused.items() if v]
    if given:
        raise GenerationError(f"D2F cannot be combined with {', '.join(given)}")
    if p.remasking not in (None, "low_confidence", "random"):
        raise GenerationError(f"remasking {p.remasking!r}")
    mode = resolve_cache(p.cache)
    if block_attention == "absolute":
        raise GenerationError("D2F: the model's block_attention is \"absolute\"; D2F's blocks "
                              "start at the prompt's end (\"prompt\")")
    for name in ("block_add_threshold", "decoded_token_threshold", "skip_threshold"):
        v = getattr(p, name)
        if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
            raise GenerationError(f"D2F: {name} must be in [0, 1], got {v!r}")
    if p.gen_length < 1:
        raise GenerationError("gen_length must be >= 1")
    B = resolve_block_length(p.gen_length, p.block_length)
    if p.max_steps < 1:
        raise GenerationError("D2F: max_steps (steps) must be >= 1")
    if not p.temperature >= 0:
        raise GenerationError("temperature must be >= 0")
    if len(prompt) < 1:
        raise GenerationError("the prompt must hold at least one token")
    if any(not 0 <= int(v) < vocab for v in prompt):
        raise GenerationError(f"prompt id out of range [0, {vocab})")
    if ids.mask in [int(v) for v in prompt]:
        raise GenerationError("the prompt holds the mask id")
    if not 0 <= p.seed < 2 ** 64:
        raise GenerationError("seed must be a uint64")
    return B, mode


# ----------------------------------------------------------------------------------------
# The state machine (steps 1-9 of d2f-decoding.md)
# ----------------------------------------------------------------------------------------

def _at_least(k, n, tau, ties, t, position, what):
    """k / n >= tau in double; an exact-looking equality with a non-dyadic tau is a near tie
    (another formula, e.g. k >= tau * n, could decide otherwise)."""
    frac = k / n
    if abs(frac - tau) < 1e-12 and Fraction(k, n) != Fraction(tau):
        ties.note(what, 0.0, t, position)
    return frac >= tau


def run_d2f(prompt, p, ids, B, mode, choose, shift=0, ties=None):
    """D2F's loop over one request. choose(t, x, candidates, (c0, c1)) -> (x0, conf) gives
    the chosen token and confidence of every candidate position (numpy arrays) from the
    step's forward over rows [c0, c1) of canvas x; shift = 1 for Dream (q reads row q - 1).
    Returns a D2fResult."""
    P, G = len(prompt), p.gen_length
    L, n_max = P + G, G // B
    ties = ties if ties is not None else TieLog()
    x = np.array([int(v) for v in prompt] + [ids.mask] * G, dtype=np.int64)
    blocks = []
    eos_seen = False
    stopped = False
    cached_until = 0
    t = forwards = 0
    tokens_per_step, commit_step, trace = [], [-1] * G, []
    stop_ids = {ids.eos} | ({ids.eot} if getattr(ids, "eot", None) is not None else set())
    tau_add, tau_act, tau_conf = (float(p.block_add_threshold),
                                  float(p.decoded_token_threshold), float(p.skip_threshold))
    while t < p.max_steps:                                    # 9. cap
        rec = StepRecord(t=t)
        # 1. Add: at most one block a step, while no EOS and fewer than n_max blocks.
        if len(blocks) < n_max and not eos_seen:
            last_ok = True if not blocks else _at_least(
                blocks[-1].decoded(), B, tau_add, ties, t, blocks[-1].start, "block_add")
            if last_ok:
                j = len(blocks) + 1
                blocks.append(GenBlock(j, P + (j - 1) * B, P + j * B, B))
                rec.added = j
        # 2. Promote: block i (the prompt, i = 0, at fraction 1.0) lets block i + 1 go.
        for i, b in enumerate(blocks):
            if i == 0:
                b.fully_activated = True      # the prompt's fraction 1.0 >= any tau_act
            elif _at_least(blocks[i - 1].decoded(), B, tau_act, ties, t,
                           blocks[i - 1].start, "fully_activate"):
                b.fully_activated = True
        # 3. End: no active block (so no mask left): a step without a forward.
        active = [b for b in blocks if b.state == ACTIVE]
        if not active:
            assert all(b.masks_left == 0 for b in blocks)
            rec.states = [(b.state, b.fully_activated, b.masks_left) for b in blocks]
            rec.cached_until = cached_until
            trace.append(rec)
            tokens_per_step.append(0)
            t += 1
            break
        # 4. Computed rows; 5. candidates (masked positions of active blocks, in order).
        end = P + len(blocks) * B
        cand = np.array([q for b in active for q in range(b.start, b.end) if x[q] == ids.mask],
                        dtype=np.int64)
        assert cand.size, "an active block holds a mask (step 8 keeps only such first)"
        c0, c1 = (0, L) if mode == "none" else (cached_until, end)
        if shift:
            c0 = min(c0, int(cand.min()) - shift)
        rec.forward, rec.rows, rec.end = True, (c0, c1), end
        rec.candidates = [int(q) for q in cand]
        done_before = [b.masks_left == 0 for b in blocks]
        to_cache_before = [b.state == TO_CACHE for b in blocks]
        # 6. Forward; per active block in block order: accept > tau_conf, else the fallback.
        x0, conf = choose(t, x.copy(), cand, (c0, c1))
        x0, conf = np.asarray(x0, dtype=np.int64), np.asarray(conf, dtype=np.float64)
        forwards += 1
        accepted_now = 0
        for b in active:
            sel = np.flatnonzero((cand >= b.start) & (cand < b.end))
            if sel.size == 0:
                continue
            for r in sel:
                ties.note("skip_threshold", abs(conf[r] - tau_conf), t, cand[r])
                rec.confidences[int(cand[r])] = float(conf[r])
            take = sel[conf[sel] > tau_conf]
            if take.size == 0 and b.fully_activated:
                order = sel[np.lexsort((cand[sel], -conf[sel]))]   # best first, low position
                take = order[:1]
                if order.size > 1:
                    ties.note("fallback", conf[order[0]] - conf[order[1]], t, cand[order[0]])
            rec.fully_activated[b.index] = b.fully_activated
            rec.accepted[b.index] = [int(cand[r]) for r in take]
            for r in take:
                q = int(cand[r])
                assert x0[r] != ids.mask, "the mask id is never a choice"
                x[q] = int(x0[r])
                commit_step[q - P] = t
                if x0[r] == ids.eos:
                    eos_seen = True
            b.masks_left -= take.size
            accepted_now += int(take.size)
        tokens_per_step.append(accepted_now)
        # 7. Cache: the run of blocks from the prompt fully decoded before this forward.
        run_end = P
        for b, done in zip(blocks, done_before):
            if not done:
                break
            run_end = b.end
        assert run_end >= cached_until, "cached_until only grows"
        cached_until = run_end
        # 8. Deactivate: in order; blocks to_cache before the forward are in the cache now.
        for b, was in zip(blocks, to_cache_before):
            if was:
                b.state = IN_CACHE
        for i, b in enumerate(blocks):
            if b.state == ACTIVE and b.masks_left == 0 and \
                    all(a.state in (TO_CACHE, IN_CACHE) for a in blocks[:i]):
                b.state = TO_CACHE
        # The states and cached_until are one fact said twice (d2f-decoding.md steps 7-8).
        assert [b.state == IN_CACHE for b in blocks] == \
            [b.end <= cached_until for b in blocks], (t, cached_until, blocks)
        rec.states = [(b.state, b.fully_activated, b.masks_left) for b in blocks]
        rec.cached_until = cached_until
        trace.append(rec)
        t += 1
        if p.stop_at_eos and gen.stop_reached(x, P, stop_ids, ids.mask, ids.eos):
            stopped = True
            break
    out = x[P:].copy()
    created_end = len(blocks) * B
    out[created_end:] = ids.eos                    # blocks never created
    return D2fResult(prompt_ids=[int(v) for v in prompt], output_ids=[int(v) for v in out],
                     steps=t, forwards=forwards, cache=mode, stopped_at_eos=eos_seen or stopped,
                     tokens_per_step=tokens_per_step, commit_step=commit_step,
                     blocks_created=len(blocks), eos_seen=eos_seen, ties=ties, trace=trace)


def simulate(P, p, ids, choose, shift=0, cache="auto"):
    """The state machine with no model: choose(t, x, candidates, (c0, c1)) -> (tokens,
    confidences) per candidate; P the prompt length (the prompt is tokens 0)."""
    B = resolve_block_length(p.gen_length, p.block_length)
    return run_d2f([0] * P, p, ids, B, resolve_cache(cache), choose, shift)


# ----------------------------------------------------------------------------------------
# The model: the block-causal forward and D2F's token choice
# ----------------------------------------------------------------------------------------

class D2fForward:
    """One request's forwards under the "prompt" mask with block B (whatever the model's
    config says). Mode "block": one KVCache for the request, kept across steps, so rows
    outside [c0, c1) are read from earlier forwards; "none": every row from an empty cache."""

    def __init__(self, model, mode, P, L, B):
        self.model, self.mode, self.P, self.L, self.B = model, mode, P, L, B
        self.cache = ref.new_cache(model, L)

    def logits(self, x, rows, c0, c1):
        ranges = ref.key_ranges("prompt", range(c0, c1), self.P, self.B, self.L)
        if self.mode == "none":
            assert (c0, c1) == (0, self.L)
            self.cache = ref.new_cache(self.model, self.L)
        return np.asarray(ref.forward_rows(self.model, x, c0, c1, ranges, self.cache, rows),
                          dtype=np.float64)


def model_chooser(model, p, ids, mode, P, B, ties):
    """choose(t, x, candidates, rows) for run_d2f: the step's forward and D2F's
    sample_tokens (argmax / Gumbel-max of l / T, mask id banned; confidence p(x0) under
    softmax(l) or softmax(l / T))."""
    fwd = D2fForward(model, mode, P, P + p.gen_length, B)

    def choose(t, x, cand, rows):
        logits = fwd.logits(x, cand, rows[0], rows[1])
        x0, conf, gap = gen.dream_sample_tokens(logits, cand, t, p.temperature, None, None,
                                                "maskgit_plus", p.seed, ties, ids.mask)
        for r, q in enumerate(cand):
            ties.note("token", gap[r], t, q)
        return x0, conf
    return choose


def generate(model, prompt, p, ids, suffix=()):
    """D2F decoding of one prompt with `model` (LoRA applied or not)."""
    B, mode = validate(prompt, p, ids, model.vocab, model.block_attention, suffix)
    ties = TieLog()
    choose = model_chooser(model, p, ids, mode, len(prompt), B, ties)
    shift = 1 if model.family == ref.FAMILY_DREAM else 0
    return run_d2f(prompt, p, ids, B, mode, choose, shift, ties)


def generate_batch(model, prompts, p, ids):
    """A batch = every prompt decoded on its own with the same options and seed."""
    return [generate(model, prompt, p, ids) for prompt in prompts]


def load(model_dir, adapter_dir=None, dtype=np.float64):
    """The reference model of a folder, with a PEFT adapter applied unmerged when given."""
    model = ref.load_model(model_dir, dtype=dtype)
    if adapter_dir:
        lora_np.apply_adapter(model, lora_np.read_adapter(adapter_dir))
    return model


# ----------------------------------------------------------------------------------------
# Command line: `mosaic generate --d2f` flags, so this file can stand in for the CLI
# ----------------------------------------------------------------------------------------

def build_arg_parser():
    ap = argparse.ArgumentParser(description="NumPy reference of `mosaic generate --d2f`")
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter")
    ap.add_argument("--ids", type=gen._int_list, action="append", required=True)
    ap.add_argument("--gen-length", type=int, default=128)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--block-length", type=int)
    ap.add_argument("--cache", default="auto")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--d2f", action="store_true", required=True)
    ap.add_argument("--block-add-threshold", type=float, default=0.5)
    ap.add_argument("--decoded-token-threshold", type=float, default=0.9)
    ap.add_argument("--skip-threshold", type=float, default=1.0)
    ap.add_argument("--stop-at-eos", action="store_true")
    ap.add_argument("--eot-id", type=int)
    for flag in ("--threshold", "--factor", "--cfg-scale", "--alg-temp", "--top-p"):
        ap.add_argument(flag, type=float)
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--remasking")
    ap.add_argument("--alg")
    ap.add_argument("--logits-eos-inf", action="store_true")
    ap.add_argument("--confidence-eos-eot-inf", action="store_true")
    ap.add_argument("--json", action="store_true")
    return ap


def params_from_args(args, family):
    llada_only = {"--remasking": args.remasking, "--cfg-scale": args.cfg_scale,
                  "--logits-eos-inf": args.logits_eos_inf or None,
                  "--confidence-eos-eot-inf": args.confidence_eos_eot_inf or None}
    dream_only = {"--alg": args.alg, "--alg-temp": args.alg_temp, "--top-p": args.top_p,
                  "--top-k": args.top_k}
    other = dream_only if family == ref.FAMILY_LLADA else llada_only
    given = [k for k, v in other.items() if v is not None]
    if given:
        raise GenerationError(f"{', '.join(given)} not allowed for family {family}")
    return D2fParams(gen_length=args.gen_length, block_length=args.block_length,
                     block_add_threshold=args.block_add_threshold,
                     decoded_token_threshold=args.decoded_token_threshold,
                     skip_threshold=args.skip_threshold,
                     max_steps=10000 if args.steps is None else args.steps,
                     temperature=args.temperature, seed=args.seed, cache=args.cache,
                     stop_at_eos=args.stop_at_eos, threshold=args.threshold,
                     factor=args.factor, remasking=args.remasking, cfg_scale=args.cfg_scale,
                     logits_eos_inf=args.logits_eos_inf,
                     confidence_eos_eot_inf=args.confidence_eos_eot_inf, alg=args.alg,
                     alg_temp=args.alg_temp, top_p=args.top_p, top_k=args.top_k)


def result_json(results):
    return {"results": [{"prompt_ids": r.prompt_ids, "output_ids": r.output_ids,
                         "steps": r.steps, "forwards": r.forwards, "cache": r.cache,
                         "stopped_at_eos": r.stopped_at_eos,
                         "tokens_per_step": r.tokens_per_step} for r in results]}


def main(argv=None):
    args = build_arg_parser().parse_args(argv)
    dtype = np.float32 if os.environ.get("GENERATE_NP_FP32") else np.float64
    try:
        model = load(args.model, args.adapter, dtype)
        params = params_from_args(args, model.family)
        ids = gen.special_ids_from_folder(args.model, args.eot_id)
        results = generate_batch(model, args.ids, params, ids)
    except (GenerationError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result_json(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
