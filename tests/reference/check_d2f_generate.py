#!/usr/bin/python3
"""Cross-implementation test of D2F decoding: `mosaic generate --d2f` vs the NumPy reference
(d2f_np.py, docs/design/d2f-decoding.md).

    /usr/bin/python3 tests/reference/check_d2f_generate.py --mosaic build/src/cli/mosaic \
        --workdir /tmp/check_d2f_generate [--cases NAME,...] [--reference-only] [--list]

The machinery is check_generate.py's (its tiny models from `mosaic make-test-model`, its
prompts, its first-difference report and command line). Models: the LLaDA and Dream tiny
models, each also with a random PEFT LoRA adapter on its attention projections (LLaDA
q/k/v/attn_out, Dream q/k/v/o; make_lora_adapter.py, passed as --adapter, applied unmerged
by the reference), a copy whose config.json says block_attention "prompt" (D2F's own mask:
the same result as the base) and one saying "absolute" (refused). Every case runs ONE
`mosaic generate --d2f ... --json` call (one --ids per prompt: a batch) and the reference on
each prompt on its own, and compares every generated id, "steps", "forwards", "cache"
("block" with cache auto, "none"), "stopped_at_eos" and "tokens_per_step".

Settings: the characterization's (B = 32, tau_add 0.5, tau_act 0.9, tau_conf 1.0: one token a
step per fully activated block; the reference asserts steps = 29 n + 4 there) and settings
for the tiny models, whose confidences are about 0.01 over ~1000 ids: tau_conf around 0.02
(T = 0) or 0.005 (T = 1), so that blocks accept several tokens in one step (cases marked
parallel assert that the reference did). EOS cases copy the model folder with
config.json's eos_token_id set to a token the model first accepts at a chosen step of a
probe run (the same case with the folder's own EOS), so that EOS is accepted early and fewer
than gen_length / B blocks are created (asserted).

ERROR_CASES are requests d2f-decoding.md refuses: the reference must raise GenerationError
and mosaic must exit with a non-zero status of its own (not a signal) and a one-line error.

Seeds and prompts were chosen so that no case has a NEAR TIE in the reference (token argmax
gap, confidence vs tau_conf, the fallback's top-2 gap; --reference-only fails on one).

Exit status 0 when every case passes, 1 otherwise.
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass, replace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_cached_generate as ccg  # noqa: E402
import check_generate as cg  # noqa: E402
from cli_runner import COMMAND_TIMEOUT_S, CheckFailure, run_command  # noqa: E402
import d2f_np  # noqa: E402
import generate_np as gen  # noqa: E402
import make_lora_adapter  # noqa: E402
import reference_forward as ref  # noqa: E402

# The adapter must move the reference's logits at least this much (relative), as
# check_lora_forward.py asks, or the LoRA cases prove nothing beyond the base.
MIN_ADAPTER_EFFECT = 1e-2


@dataclass
class Variant:
    """A model of this check built from one of check_generate's: an adapter (its target
    projections) or a config.json block_attention."""
    base: str
    targets: tuple = None
    block_attention: str = None
    rank: int = 4
    alpha: float = 8.0
    seed: int = 0


VARIANTS = {
    "llada_lora": Variant("llada", targets=("q_proj", "k_proj", "v_proj", "attn_out"), seed=31),
    "dream_lora": Variant("dream", targets=("q_proj", "k_proj", "v_proj", "o_proj"), seed=32),
    "llada_prompt": Variant("llada", block_attention="prompt"),
    "llada_absolute": Variant("llada", block_attention="absolute"),
}
MODEL_NAMES = ("llada", "dream") + tuple(VARIANTS)


@dataclass
class Case:
    """One `mosaic generate --d2f` call. params: d2f_np.D2fParams fields; a field given here
    is passed as its flag (absent: the CLI's default, which must be the spec's). expect:
    "parallel" (some block accepts >= 2 tokens in one step by tau_conf), "early_eos" (fewer
    than gen_length / B blocks), "capped" (steps = forwards = max_steps), "property" (steps
    = 29 n + 4), "stopped" (stop_at_eos ended it). eos_step: EOS = the first token the
    probe accepts at a step >= this one."""
    name: str
    model: str
    prompts: list
    params: dict
    notes: str = ""
    expect: tuple = ()
    eos_step: int = None
    prompt_seed: int = None


def C(name, model, prompts=(5,), notes="", expect=(), eos_step=None, prompt_seed=None, **kw):
    return Case(name, model, list(prompts), kw, notes, tuple(expect), eos_step, prompt_seed)


CHAR = dict(block_add_threshold=0.5, decoded_token_threshold=0.9, skip_threshold=1.0)
TINY0 = dict(block_add_threshold=0.25, decoded_token_threshold=0.75, skip_threshold=0.02)
TINY0_DREAM = dict(TINY0, skip_threshold=0.016)
TINY1 = dict(block_add_threshold=0.25, decoded_token_threshold=0.75, skip_threshold=0.005,
             temperature=1.0)
CASES = [
    # LLaDA: the characterization settings (one token a step per fully activated block)
    C("llada_char_defaults_t0", "llada", gen_length=64, block_length=32, seed=1, prompt_seed=1,
      expect=("property",), notes="no threshold flags: the CLI's defaults 0.5 / 0.9 / 1.0"),
    C("llada_char_t1_g96", "llada", gen_length=96, block_length=32, temperature=1.0, seed=3,
      expect=("property",), **CHAR),
    C("llada_char_none_t0", "llada", gen_length=64, block_length=32, seed=1, cache="none",
      prompt_seed=1,
      expect=("property",), **CHAR),
    C("llada_paper_gsm8k_b64", "llada", gen_length=128, block_length=64,
      block_add_threshold=0.7, decoded_token_threshold=0.95, skip_threshold=0.9, seed=1,
      notes="the D2F paper's GSM8K setting (only the fallback decodes on a tiny model)"),
    # LLaDA: thresholds for the tiny model's confidences (parallel acceptance)
    C("llada_tiny_t0", "llada", gen_length=32, block_length=8, seed=1, prompt_seed=2,
      expect=("parallel",),
      **TINY0),
    C("llada_tiny_none_t0", "llada", gen_length=32, block_length=8, seed=1, cache="none",
      prompt_seed=2,
      expect=("parallel",), **TINY0),
    C("llada_tiny_t1", "llada", gen_length=32, block_length=8, seed=2, prompt_seed=3,
      expect=("parallel",),
      **TINY1),
    C("llada_tiny_none_t1", "llada", gen_length=32, block_length=8, seed=2, cache="none",
      prompt_seed=3,
      expect=("parallel",), **TINY1),
    C("llada_tiny_batch3_t0", "llada", prompts=(1, 5, 13), gen_length=32, block_length=8,
      seed=1, expect=("parallel",), **TINY0),
    C("llada_tiny_batch3_t1", "llada", prompts=(13, 2, 7), gen_length=32, block_length=8,
      seed=4, expect=("parallel",), **TINY1),
    C("llada_add0_act0", "llada", gen_length=32, block_length=8, block_add_threshold=0.0,
      decoded_token_threshold=0.0, skip_threshold=0.02, seed=1,
      notes="a block added every step, each fully activated at once"),
    C("llada_add1_act1", "llada", gen_length=24, block_length=8, block_add_threshold=1.0,
      decoded_token_threshold=1.0, skip_threshold=0.02, temperature=0.5, seed=5,
      notes="blocks one after the other"),
    C("llada_default_block", "llada", gen_length=16, seed=1, skip_threshold=0.02,
      notes="no --block-length: B = gen_length when shorter than 32"),
    C("llada_cap", "llada", gen_length=32, block_length=16, max_steps=10, seed=1,
      expect=("capped",), notes="--steps 10 caps the loop: masks remain"),
    C("llada_cap_at_the_end", "llada", gen_length=64, block_length=32, max_steps=61, seed=1,
      prompt_seed=1, expect=("capped", "property"),
      notes="29 n + 3 = 61 steps: every token decoded, the final no-forward step cut"),
    C("llada_eos_early_t1", "llada", gen_length=48, block_length=8, eos_step=6,
      expect=("early_eos", "parallel"), seed=6, **TINY1),
    C("llada_eos_early_char", "llada", gen_length=128, block_length=32, eos_step=20,
      temperature=1.0, expect=("early_eos", "property"), seed=7, **CHAR),
    C("llada_stop_at_eos_t1", "llada", gen_length=48, block_length=8, eos_step=3, seed=6,
      stop_at_eos=True, expect=("stopped",), **TINY1),
    C("llada_prompt_config_t1", "llada_prompt", gen_length=32, block_length=8, seed=2,
      expect=("parallel",), **TINY1,
      notes="config block_attention \"prompt\": the base's result"),
    # LLaDA with a LoRA adapter
    C("llada_lora_char_t0", "llada_lora", gen_length=64, block_length=32, seed=1, prompt_seed=5,
      expect=("property",), **CHAR),
    C("llada_lora_tiny_t1", "llada_lora", gen_length=32, block_length=8, seed=2,
      expect=("parallel",), **TINY1),
    C("llada_lora_tiny_none_t0", "llada_lora", prompts=(3, 9), gen_length=32, block_length=8,
      seed=1, prompt_seed=6, cache="none", expect=("parallel",), **TINY0),
    C("llada_lora_eos_early_t1", "llada_lora", gen_length=48, block_length=8, eos_step=2,
      expect=("early_eos",), seed=8, **TINY1),
    # Dream (row q - 1): the same grid
    C("dream_char_defaults_t0", "dream", gen_length=64, block_length=32, seed=1,
      expect=("property",)),
    C("dream_char_none_t1", "dream", gen_length=64, block_length=32, temperature=1.0, seed=3,
      cache="none", expect=("property",), **CHAR),
    C("dream_tiny_t0", "dream", gen_length=32, block_length=8, seed=1, prompt_seed=4,
      expect=("parallel",), **TINY0_DREAM),
    C("dream_tiny_none_t0", "dream", gen_length=32, block_length=8, seed=1, cache="none",
      prompt_seed=4, expect=("parallel",), **TINY0_DREAM),
    C("dream_tiny_t1", "dream", gen_length=32, block_length=8, seed=2, expect=("parallel",),
      **TINY1),
    C("dream_tiny_batch3_t1", "dream", prompts=(1, 5, 13), gen_length=32, block_length=8,
      seed=4, expect=("parallel",), **TINY1),
    C("dream_cap", "dream", gen_length=32, block_length=8, max_steps=7, seed=1,
      expect=("capped",), **TINY0),
    C("dream_eos_early_t1", "dream", gen_length=48, block_length=8, eos_step=6,
      expect=("early_eos",), seed=6, **TINY1),
    C("dream_stop_at_eos_t1", "dream", gen_length=48, block_length=8, eos_step=6, seed=6,
      stop_at_eos=True, expect=("stopped",), **TINY1,
      notes="--stop-at-eos: ends after the step that decodes EOS with no mask before it"),
    # Dream with a LoRA adapter
    C("dream_lora_char_t1", "dream_lora", gen_length=64, block_length=32, temperature=1.0,
      seed=2, expect=("property",), **CHAR),
    C("dream_lora_tiny_t0", "dream_lora", gen_length=32, block_length=8, seed=1,
      expect=("parallel",), **TINY0),
    C("dream_lora_tiny_none_t1", "dream_lora", prompts=(4, 11), gen_length=32,
      block_length=8, seed=2, cache="none", expect=("parallel",), **TINY1),
    C("dream_lora_eos_early_t0", "dream_lora", gen_length=40, block_length=8, eos_step=4,
      expect=("early_eos",), seed=1, **TINY0),
]

G64 = dict(gen_length=64, block_length=32, seed=1)
ERROR_CASES = [
    C("error_threshold", "llada", **G64, threshold=0.5, notes="a Fast-dLLM rule"),
    C("error_factor", "dream", **G64, factor=2.0, notes="a Fast-dLLM rule"),
    C("error_cache_prefix", "llada", **G64, cache="prefix"),
    C("error_cache_dual", "dream", **G64, cache="dual"),
    C("error_cfg", "llada", **G64, cfg_scale=1.0),
    C("error_remasking_random", "llada", **G64, remasking="random"),
    C("error_logits_eos_inf", "llada", **G64, logits_eos_inf=True),
    C("error_dream_alg", "dream", **G64, alg="entropy"),
    C("error_dream_top_k", "dream", **G64, top_k=5),
    C("error_block_not_dividing", "llada", gen_length=24, block_length=16, seed=1),
    C("error_default_block_not_dividing", "dream", gen_length=48, seed=1,
      notes="no --block-length: B = 32 does not divide 48"),
    C("error_skip_above_1", "llada", **G64, skip_threshold=1.5),
    C("error_add_below_0", "dream", **G64, block_add_threshold=-0.1),
    C("error_act_above_1", "llada", **G64, decoded_token_threshold=1.01),
    C("error_absolute_model", "llada_absolute", **G64,
      notes="block_attention \"absolute\": D2F's blocks start at the prompt's end"),
]
ALL_CASES = CASES + ERROR_CASES
ERROR_NAMES = {c.name for c in ERROR_CASES}

FLAGS = [  # D2fParams field -> flag (value flags); booleans below
    ("gen_length", "--gen-length"), ("block_length", "--block-length"),
    ("block_add_threshold", "--block-add-threshold"),
    ("decoded_token_threshold", "--decoded-token-threshold"),
    ("skip_threshold", "--skip-threshold"), ("max_steps", "--steps"), ("cache", "--cache"),
    ("threshold", "--threshold"), ("factor", "--factor"), ("remasking", "--remasking"),
    ("cfg_scale", "--cfg-scale"), ("alg", "--alg"), ("alg_temp", "--alg-temp"),
    ("top_p", "--top-p"), ("top_k", "--top-k"),
]
BOOL_FLAGS = [("logits_eos_inf", "--logits-eos-inf"),
              ("confidence_eos_eot_inf", "--confidence-eos-eot-inf"),
              ("stop_at_eos", "--stop-at-eos")]


def params_of(case):
    return d2f_np.D2fParams(**case.params)


def mosaic_argv(mosaic, model_dir, adapter_dir, prompts, case):
    """The command line: the flags of the fields the case sets, --temperature and --seed."""
    p = params_of(case)
    argv = [mosaic, "generate", "--model", model_dir]
    if adapter_dir:
        argv += ["--adapter", adapter_dir]
    for ids in prompts:
        argv += ["--ids", ",".join(map(str, ids))]
    argv.append("--d2f")
    for name, flag in FLAGS:
        if name in case.params:
            v = getattr(p, name)
            argv += [flag, repr(float(v)) if isinstance(v, float) else str(v)]
    for name, flag in BOOL_FLAGS:
        if case.params.get(name):
            argv.append(flag)
    argv += ["--temperature", repr(float(p.temperature)), "--seed", str(p.seed), "--json"]
    return argv


# ----------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------

def adapter_effect(base_dir, adapter_dir):
    """max |adapted - base| / max |base| of the reference's logits on one sequence."""
    base, adapted = d2f_np.load(base_dir), d2f_np.load(base_dir, adapter_dir)
    ids, rows = list(range(3, 40, 3)), list(range(13))
    a, b = ref.forward(base, ids, rows), ref.forward(adapted, ids, rows)
    return float(np.max(np.abs(b - a)) / np.max(np.abs(a)))


def build_models(mosaic, workdir, names):
    """{name: (reference model, folder, adapter folder or None)}, and the names that failed."""
    bases, failed = cg.build_models(mosaic, workdir,
                                    {VARIANTS[n].base if n in VARIANTS else n for n in names})
    models = {n: (m, d, None) for n, (m, d) in bases.items() if n in names}
    for name in sorted(n for n in names if n in VARIANTS):
        v = VARIANTS[name]
        if v.base not in bases:
            continue
        base_dir = bases[v.base][1]
        try:
            if v.targets:
                adapter_dir = os.path.join(workdir, f"adapter_{name}")
                make_lora_adapter.write_adapter(base_dir, adapter_dir, v.rank, v.alpha,
                                                list(v.targets), seed=v.seed)
                effect = adapter_effect(base_dir, adapter_dir)
                if effect < MIN_ADAPTER_EFFECT:
                    raise CheckFailure(f"adapter {name} moves the logits by only {effect:.1e}")
                models[name] = (d2f_np.load(base_dir, adapter_dir), base_dir, adapter_dir)
            else:
                model_dir = os.path.join(workdir, f"model_{name}")
                ccg.copy_with_block_attention(base_dir, model_dir, v.block_attention)
                model = ref.load_model(model_dir)
                if model.block_attention != v.block_attention:
                    raise CheckFailure(f"{model_dir}: block_attention not read back")
                models[name] = (model, model_dir, None)
        except (CheckFailure, ValueError) as e:
            print(f"FAIL model {name}:\n  " + "\n  ".join(str(e).splitlines()))
            failed.append(f"model {name}")
    return models, failed


# ----------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------

def pick_eos(probe, step):
    """The first token (in position order) accepted at the earliest step >= `step` that no
    earlier step accepted: with it as EOS, eos_seen first becomes true at that step."""
    by_step = {}
    for j, t in enumerate(probe.commit_step):
        if t >= 0:
            by_step.setdefault(t, []).append(probe.output_ids[j])
    seen = set()
    for t in sorted(by_step):
        if t >= step:
            for v in by_step[t]:
                if v not in seen:
                    return v
        seen.update(by_step[t])
    raise CheckFailure(f"the probe accepts no new token at a step >= {step}")


def resolve_case(case, model, model_dir, workdir, prompts):
    """(model folder, special ids) with the EOS pick applied (a copy of the folder)."""
    ids = gen.special_ids_from_folder(model_dir)
    if case.eos_step is None:
        return model_dir, ids
    probe = d2f_np.generate(model, prompts[0], replace(params_of(case), stop_at_eos=False), ids)
    eos = pick_eos(probe, case.eos_step)
    case_dir = os.path.join(workdir, f"{case.name}_model")
    cg.copy_with_eos(model_dir, case_dir, eos)
    return case_dir, gen.special_ids_from_folder(case_dir)


def check_expectations(case, results):
    """The case's claims about the reference's runs (so it tests what it says)."""
    lines = []
    for i, r in enumerate(results):
        G = len(r.output_ids)
        n_max = G // d2f_np.resolve_block_length(G, case.params.get("block_length"))
        per_block = [len(v) for rec in r.trace for v in rec.accepted.values()]
        if "parallel" in case.expect and i == 0 and max(per_block, default=0) < 2:
            lines.append("  EXPECT parallel: no block of the first prompt accepted >= 2 tokens "
                         "in one step")
        if "early_eos" in case.expect and not (r.eos_seen and r.blocks_created < n_max):
            lines.append(f"  EXPECT early_eos: prompt {i} created {r.blocks_created} of "
                         f"{n_max} blocks, eos_seen {r.eos_seen}")
        if "capped" in case.expect and not (r.steps == r.forwards == params_of(case).max_steps):
            lines.append(f"  EXPECT capped: prompt {i} steps {r.steps}, forwards {r.forwards}")
        capped = "capped" in case.expect
        if "property" in case.expect and r.steps != 29 * r.blocks_created + 4 - capped:
            lines.append(f"  EXPECT property: prompt {i}: {r.blocks_created} blocks in "
                         f"{r.steps} steps, not 29 n + 4")
        if "stopped" in case.expect and not (r.stopped_at_eos and r.steps == r.forwards):
            lines.append(f"  EXPECT stopped: prompt {i} did not stop at EOS")
        stopped = params_of(case).stop_at_eos and r.steps == r.forwards
        if r.steps < params_of(case).max_steps and not stopped and r.steps != r.forwards + 1:
            lines.append(f"  prompt {i}: steps {r.steps} != forwards {r.forwards} + 1")
    return lines


def compare(results, got_json, prompts):
    """Report lines of every disagreement (empty when all agree)."""
    lines, rows = cg.matched_results(results, got_json, prompts)
    for who, r, g, out in rows:
        d = cg.first_difference(r, out)
        if d:
            lines.append(f"{who}: {d}")
        for key in ("steps", "forwards", "cache", "stopped_at_eos", "tokens_per_step"):
            if g.get(key) != getattr(r, key):
                lines.append(f"{who}: {key} mosaic {g.get(key)}, reference {getattr(r, key)}")
        if len(lines):
            lines.append(f"    mosaic    {out}")
            lines.append(f"    reference {r.output_ids}")
            lines.append(f"    ref accept steps {r.commit_step}")
            lines.append(f"    ref tokens_per_step {r.tokens_per_step}")
    return lines


def describe(results):
    return (f"cache {','.join(sorted({r.cache for r in results}))}, blocks "
            f"{','.join(str(r.blocks_created) for r in results)}, steps "
            f"{','.join(str(r.steps) for r in results)}, max/step "
            f"{max(max(r.tokens_per_step) for r in results)}")


def run_case(mosaic, workdir, case, models, reference_only):
    model, model_dir, adapter_dir = models[case.model]
    prompts = cg.case_prompts(case)
    model_dir, ids = resolve_case(case, model, model_dir, workdir, prompts)
    p = params_of(case)
    results = d2f_np.generate_batch(model, prompts, p, ids)
    closest, near = cg.tie_summary(results)
    summary = describe(results)
    if closest is not None:
        summary += f", closest {closest.kind} gap {closest.gap:.1e}"
    if case.eos_step is not None:
        summary += f", eos {ids.eos}"
    warnings = check_expectations(case, results)
    if near:
        warnings.append(f"  NEAR TIE: {near} decision(s) of the reference within "
                        f"{gen.NEAR_TIE:g} (closest: {closest}); change the case's seed")
    if reference_only:
        return not warnings, summary, warnings
    argv = mosaic_argv(mosaic, model_dir, adapter_dir, prompts, case)
    out = run_command(argv)
    try:
        got = json.loads(out)
    except json.JSONDecodeError as e:
        raise CheckFailure(f"mosaic generate printed no JSON ({e}): {out[:500]}")
    lines = ["  " + line for line in compare(results, got, prompts)]
    if lines:
        lines.append("  command: " + " ".join(argv))
    # Expectation failures are the case's own (fix the case); disagreements fail it too.
    return not (lines or warnings), summary, warnings + lines


def run_error_case(mosaic, case, models, reference_only):
    """The reference must raise GenerationError; mosaic must exit non-zero (no signal) with
    a one-line error on stderr."""
    model, model_dir, adapter_dir = models[case.model]
    prompts = cg.case_prompts(case)
    ids = gen.special_ids_from_folder(model_dir)
    try:
        d2f_np.generate_batch(model, prompts, params_of(case), ids)
        return False, "accepted", ["  the reference accepted a request the spec refuses"]
    except d2f_np.GenerationError as e:
        summary = f"reference: {e}"
    if reference_only:
        return True, summary, []
    argv = mosaic_argv(mosaic, model_dir, adapter_dir, prompts, case)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, summary, [f"  timed out: {' '.join(argv)}"]
    err = proc.stderr.strip().splitlines()
    if proc.returncode == 0:
        return False, summary, ["  mosaic accepted it: " + " ".join(argv)]
    if proc.returncode < 0:
        return False, summary, [f"  mosaic died of signal {-proc.returncode}: " + " ".join(argv)]
    if len(err) != 1:
        return False, summary, [f"  mosaic's error is {len(err)} lines, not one:"] + \
            ["    " + line for line in err[:20]] + ["  command: " + " ".join(argv)]
    return True, summary + f"; mosaic: exit {proc.returncode}: {err[0]}", []


def run_one(mosaic, workdir, case, models, reference_only):
    if case.name in ERROR_NAMES:
        return run_error_case(mosaic, case, models, reference_only)
    return run_case(mosaic, workdir, case, models, reference_only)


def main(argv=None):
    return cg.check_main(argv, ALL_CASES, build_models, run_one, width=34)


if __name__ == "__main__":
    sys.exit(main())
