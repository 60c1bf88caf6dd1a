#!/usr/bin/python3
"""Cross-implementation test of LLaDA-MoE generation: `mosaic generate` vs the NumPy reference
(generate_np.py's LLaDA sampler on llada_moe_np's forward), token for token.

    /usr/bin/python3 tests/reference/check_moe_generate.py --mosaic build/src/cli/mosaic \
        --workdir /tmp/check_moe_generate [--cases NAME,...] [--reference-only] [--list] \
        [--tie-margin 1e-6]

LLaDA-MoE generates with LLaDA's sampler (shared/reference/moe-models.md §1.5: a plain masked
diffusion model, row p predicts position p, no shift), so the reference is generate_np's
LLaDA path unchanged, fed by llada_moe_np.GenerationModel (the MoE forward, full and cached,
through generate_np.forward_module). The machinery is check_generate.py's and
check_cached_generate.py's: Mosaic makes a few random tiny LLaDA-MoE checkpoints (`mosaic
make-test-model --family llada-moe`: the tiny preset in bf16, a GQA fp32 one, one whose
experts-per-token equals its expert count, MQA fp16); every case runs ONE `mosaic generate
... --json` call with several prompts (one --ids each) and the reference on each prompt on its
own, and compares every generated id (mask id where nothing was committed), the step count,
and each result's "cache" (effective mode) and "forwards" (steps that ran a forward). Covered:
low_confidence remasking with semi-autoregressive blocks (several block / step grids, an
uneven quota), temperature > 0 (Gumbel-max with the counter-based RNG, philox_np, as
check_generate does for dense LLaDA), random remasking, CFG, Fast-dLLM's threshold and factor
rules, and Fast-dLLM's approximate prefix and dual caches (`--cache prefix|dual`).

Routing near-ties. Mosaic computes in fp32, the reference in float64; where a row's k-th and
(k+1)-th router probabilities nearly tie the two may legitimately route that row to different
experts, and the change spreads to every row (attention) and every later step (the canvas).
The reference records, per request, the smallest relative routing margin
(llada_moe_np.routing_margins: (p_(k) - p_(k+1)) / p_(k)) over every computed row and layer
of every forward the generation ran; a request below --tie-margin (1e-6) is excluded from
the token comparison (still compared, a difference only noted), counted, and a case fails if
more than a quarter of its requests are excluded (and the whole run if more than a quarter of
all requests are). With experts-per-token == experts nothing can flip: no exclusion allowed.

Near-ties of the sampler's own decisions (token argmax gap, top-k cut, threshold / factor
margin) and committed mask ids are handled as check_generate does: reported as warnings, and
with --reference-only they fail the case (routing near-ties too). So that a CLI ignoring
--cache cannot pass, the reference also decodes every cached case's requests with cache none
and reports how many differ ("vs none k/n"); a cached case where none differs is a WEAK CACHE
warning (a failure with --reference-only). Every case's seed and prompts were chosen so that
none of these occurs.

Exit status 0 when every case passes, 1 otherwise.
"""

import argparse
import json
import math
import os
import shutil
import sys
from dataclasses import dataclass, replace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_cached_generate as ccg  # noqa: E402
import check_generate as cg  # noqa: E402
from check_generate import Case  # noqa: E402
from cli_runner import CheckFailure, run_command  # noqa: E402
import generate_np as gen  # noqa: E402
import llada_moe_np as moe  # noqa: E402
import safetensors_np as st  # noqa: E402

PROMPT_ID_LIMIT = cg.PROMPT_ID_LIMIT      # prompts use ids below the specials (1000, 1001)
TIE_MARGIN = 1e-6
MAX_EXCLUDED_FRACTION = 0.25


@dataclass
class MoeSpec:
    """A tiny LLaDA-MoE checkpoint: overrides False = the bare tiny preset (no size flags)."""
    dtype: str
    seed: int
    layers: int = None
    hidden: int = None
    heads: int = None
    kv_heads: int = None
    experts: int = None
    top_k: int = None
    expert_ffn: int = None
    vocab: int = None
    overrides: bool = True


MODELS = {
    "moe_tiny": MoeSpec("bf16", 31, overrides=False),
    "moe_gqa": MoeSpec("fp32", 32, layers=2, hidden=64, heads=4, kv_heads=2, experts=8,
                       top_k=2, expert_ffn=48, vocab=1061),
    "moe_all": MoeSpec("fp16", 33, layers=2, hidden=64, heads=4, kv_heads=1, experts=4,
                       top_k=4, expert_ffn=40, vocab=1030),
}


def M(name, model="moe_tiny", prompts=(5, 1, 13), notes="", **kw):
    """A LLaDA-MoE case (LLaDA's sampler options; cache "auto" = no --cache flag)."""
    picks = {k: kw.pop(k) for k in ("prompt_seed",) if k in kw}
    return Case(name, model, list(prompts), kw, notes, **picks)


G16 = dict(gen_length=16)
CASES = [
    # tiny preset (bf16, 8 experts top 2), greedy low_confidence, block / step grids
    M("moe_t0_b16_s16", **G16, block_length=16, steps=16, seed=1, notes="one block"),
    M("moe_t0_b8_s16", **G16, block_length=8, steps=16, seed=1),
    M("moe_t0_b4_s8", **G16, block_length=4, steps=8, seed=1, notes="2 tokens a step"),
    M("moe_t0_b4_s16", prompts=(5, 8), **G16, block_length=4, steps=16, seed=1),
    M("moe_t0_uneven_quota", prompts=(5, 2), gen_length=24, block_length=12, steps=10,
      seed=1, notes="12 masks over 5 steps per block: 3,3,2,2,2"),
    # temperature > 0 (Gumbel stream 1)
    M("moe_t1_b8_s16", **G16, block_length=8, steps=16, temperature=1.0, seed=17),
    M("moe_t07_seed_hi_word", **G16, block_length=16, steps=16, temperature=0.7,
      seed=0x9E3779B97F4A7C15, notes="seed >= 2^32"),
    # random remasking (stream 2), CFG
    M("moe_random_t0", prompts=(5, 9), **G16, block_length=8, steps=8, remasking="random",
      seed=3),
    M("moe_cfg15_t0", prompts=(5, 9), **G16, block_length=8, steps=16, cfg_scale=1.5,
      seed=1),
    # Fast-dLLM rules
    M("moe_threshold", **G16, block_length=8, steps=16, threshold=0.028, seed=1,
      notes="multi-token steps"),
    M("moe_threshold_t1", **G16, block_length=16, steps=16, threshold=0.004,
      temperature=1.0, seed=2),
    M("moe_factor", prompts=(5, 9), gen_length=14, block_length=7, steps=14, factor=4.5,
      seed=1),
    # batches of mixed prompt lengths
    M("moe_batch4_t1", prompts=(13, 1, 5, 8), **G16, block_length=8, steps=16,
      temperature=1.0, seed=10, notes="one --seed for every prompt of the call"),
    # Fast-dLLM's prefix cache
    M("moe_prefix_t0_b4_s16", **G16, block_length=4, steps=16, cache="prefix", seed=1),
    M("moe_prefix_t0_b8_s8", **G16, block_length=8, steps=8, cache="prefix", seed=1),
    M("moe_prefix_t1", **G16, block_length=8, steps=16, temperature=1.0, cache="prefix",
      seed=17),
    M("moe_prefix_threshold", **G16, block_length=8, steps=16, threshold=0.025,
      cache="prefix", seed=1),
    M("moe_prefix_random_t1", prompts=(5, 9), **G16, block_length=4, steps=16,
      remasking="random", temperature=1.0, cache="prefix", prompt_seed=3, seed=4),
    # Fast-dLLM's dual cache
    M("moe_dual_t0_b4_s16", **G16, block_length=4, steps=16, cache="dual", seed=1),
    M("moe_dual_t0_b8_s8", **G16, block_length=8, steps=8, cache="dual", prompt_seed=5,
      seed=1),
    M("moe_dual_t1", **G16, block_length=4, steps=16, temperature=1.0, cache="dual", seed=9),
    M("moe_dual_threshold_t1", prompts=(5, 9), gen_length=24, block_length=8, steps=24,
      threshold=0.004, temperature=1.0, cache="dual", seed=2),
    M("moe_dual_factor", prompts=(5, 9), gen_length=14, block_length=7, steps=14,
      factor=4.5, cache="dual", prompt_seed=3, seed=1),
    # GQA fp32 (4 query heads on 2 kv heads, vocab 1061)
    M("gqa_t0_b8_s16", model="moe_gqa", **G16, block_length=8, steps=16, seed=1),
    M("gqa_t1_b4_s16", model="moe_gqa", **G16, block_length=4, steps=16, temperature=1.0,
      seed=5),
    M("gqa_threshold", model="moe_gqa", **G16, block_length=8, steps=16, threshold=0.022,
      seed=1),
    M("gqa_prefix_t07", model="moe_gqa", **G16, block_length=8, steps=16, temperature=0.7,
      cache="prefix", seed=5),
    M("gqa_dual_batch4", model="moe_gqa", prompts=(1, 5, 13, 8), **G16, block_length=8,
      steps=16, cache="dual", seed=1),
    # experts per token == experts (4 of 4: routing cannot flip), MQA, fp16
    M("all_t0_b4_s8", model="moe_all", **G16, block_length=4, steps=8, seed=1),
    M("all_t1_b8_s16", model="moe_all", **G16, block_length=8, steps=16, temperature=1.0,
      seed=6),
    M("all_prefix_threshold", model="moe_all", **G16, block_length=8, steps=16,
      threshold=0.019, cache="prefix", prompt_seed=1, seed=1),
    M("all_dual_t07", model="moe_all", **G16, block_length=4, steps=16, temperature=0.7,
      cache="dual", seed=7),
]


# ----------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------

def make_model(mosaic, spec, out_dir):
    """`mosaic make-test-model --family llada-moe --preset tiny [sizes]` into out_dir, and the
    checks that it wrote what was asked (the reference refuses anything else)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    argv = [mosaic, "make-test-model", "--family", "llada-moe", "--preset", "tiny"]
    if spec.overrides:
        argv += ["--layers", str(spec.layers), "--hidden", str(spec.hidden),
                 "--heads", str(spec.heads), "--kv-heads", str(spec.kv_heads),
                 "--vocab", str(spec.vocab), "--experts", str(spec.experts),
                 "--experts-per-token", str(spec.top_k), "--expert-ffn",
                 str(spec.expert_ffn)]
    argv += ["--dtype", spec.dtype, "--seed", str(spec.seed), "--out", out_dir, "--quiet"]
    run_command(argv)
    config = st.load_config(out_dir)
    hp = moe.hparams_from_config(config)       # ValueError if not a LLaDA-MoE config
    if spec.overrides:
        want = {"n_layers": spec.layers, "hidden": spec.hidden, "n_heads": spec.heads,
                "n_kv_heads": spec.kv_heads, "n_experts": spec.experts,
                "experts_per_token": spec.top_k, "expert_ffn": spec.expert_ffn,
                "vocab": spec.vocab}
        wrong = {k: (hp[k], v) for k, v in want.items() if hp[k] != v}
        if wrong:
            raise CheckFailure(f"make-test-model wrote {wrong} (got, asked)")
    ids = gen.special_ids_from_config(config)
    if min(ids.mask, ids.eos) < PROMPT_ID_LIMIT:
        raise CheckFailure(f"special ids {ids} collide with prompt ids < {PROMPT_ID_LIMIT}")
    return hp


def build_models(mosaic, workdir, names):
    """{name: (llada_moe_np.GenerationModel, folder)} of the MODELS named, and failures."""
    models, failed = {}, []
    for name in sorted(names):
        model_dir = os.path.join(workdir, f"model_{name}")
        try:
            make_model(mosaic, MODELS[name], model_dir)
            models[name] = (moe.GenerationModel(moe.load_model(model_dir)), model_dir)
        except (CheckFailure, ValueError) as e:
            print(f"FAIL model {name}:\n  " + "\n  ".join(str(e).splitlines()))
            failed.append(f"model {name}")
    return models, failed


# ----------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------

@dataclass
class Tally:
    """Requests run and excluded for routing near-ties, over the whole run."""
    requests: int = 0
    excluded: int = 0
    min_margin: float = math.inf


def mosaic_argv(mosaic, model_dir, family, prompts, p, eot):
    """check_generate's command line; with --cache MODE when the case sets one."""
    if p.cache == "auto":
        return cg.mosaic_argv(mosaic, model_dir, family, prompts, p, eot)
    return ccg.mosaic_argv(mosaic, model_dir, family, prompts, p, eot)


def compare_one(i, prompt, r, g):
    """check_cached_generate's comparison (ids, steps, cache, forwards) of request i alone."""
    lines = ccg.compare_cached([r], {"results": [g]}, [prompt])
    label = f"prompt 0 (P={len(prompt)})"
    return [line.replace(label, f"prompt {i} (P={len(prompt)})", 1) for line in lines]


def excluded_too_many(n_excluded, n_requests):
    return n_excluded > MAX_EXCLUDED_FRACTION * n_requests


def run_case(mosaic, workdir, case, models, reference_only, tie_margin=TIE_MARGIN,
             tally=None):
    """(ok, summary, report lines) of one case; tally (a Tally) adds its request counts."""
    tally = Tally() if tally is None else tally
    gm, model_dir = models[case.model]
    prompts = cg.case_prompts(case)
    p = cg.params_of(case)
    ids = gen.special_ids_from_folder(model_dir)
    results, margins = [], []
    for prompt in prompts:
        gm.reset()
        results.append(gen.generate(gm, prompt, p, ids))
        margins.append(gm.min_margin)
    excluded = [i for i, m in enumerate(margins) if m < tie_margin]
    vs_none = None
    if p.cache in ("prefix", "dual"):
        exact = replace(p, cache="none")
        vs_none = sum(gen.generate(gm, prompt, exact, ids).output_ids != r.output_ids
                      for prompt, r in zip(prompts, results))
    tally.requests += len(prompts)
    tally.excluded += len(excluded)
    tally.min_margin = min(tally.min_margin, min(margins))

    closest, near = cg.tie_summary(results)
    summary = ccg.describe(results)
    if closest is not None:
        summary += f", closest {closest.kind} gap {closest.gap:.1e}"
    summary += (f", routing margin {min(margins):.1e}" if math.isfinite(min(margins))
                else ", routing margin inf")
    summary += f", excluded {len(excluded)}/{len(prompts)}"
    if vs_none is not None:
        summary += f", vs none {vs_none}/{len(prompts)}"
    warnings = []
    if vs_none == 0:
        warnings.append(f"  WEAK CACHE: every request decodes the same with cache none, so "
                        f"--cache {p.cache} is not put to the test; change the case's prompts")
    if near:
        warnings.append(f"  NEAR TIE: {near} decision(s) of the reference within "
                        f"{gen.NEAR_TIE:g} (closest: {closest}); change the case's seed")
    mask_commits = sum(r.mask_commits for r in results)
    if mask_commits:
        warnings.append(f"  MASK COMMIT: the reference chose the mask id {mask_commits} "
                        f"time(s) at committed positions; change the case's seed")
    for i in excluded:
        warnings.append(f"  ROUTING TIE: prompt {i} (P={len(prompts[i])}) routing margin "
                        f"{margins[i]:.2e} < {tie_margin:g}: excluded from the comparison")
    if reference_only:
        return not warnings, summary, warnings

    argv = mosaic_argv(mosaic, model_dir, gm.family, prompts, p, ids.eot)
    out = run_command(argv)
    try:
        got = json.loads(out)
    except json.JSONDecodeError as e:
        raise CheckFailure(f"mosaic generate printed no JSON ({e}): {out[:500]}")
    got_results = got.get("results") if isinstance(got, dict) else None
    if not isinstance(got_results, list) or len(got_results) != len(results):
        lines = [f"  expected {{\"results\": [...]}} with {len(results)} entries, got "
                 f"{json.dumps(got)[:300]}"]
    else:
        lines = []
        for i, (prompt, r, g) in enumerate(zip(prompts, results, got_results)):
            diff = compare_one(i, prompt, r, g)
            if i in excluded:
                warnings.append(f"  prompt {i} excluded (routing near-tie): "
                                + ("differs: " + diff[0].strip() if diff else "agrees anyway"))
            else:
                lines += ["  " + line for line in diff]
    if excluded_too_many(len(excluded), len(prompts)):
        lines.append(f"  {len(excluded)} of {len(prompts)} requests on a routing near-tie "
                     f"(more than {MAX_EXCLUDED_FRACTION:.0%}): too few left to check")
    if excluded and MODELS[case.model].top_k is not None and \
            MODELS[case.model].top_k == MODELS[case.model].experts:
        lines.append("  experts-per-token == experts cannot tie, yet requests were excluded")
    if lines:
        lines.append("  command: " + " ".join(argv))
    return not lines, summary, warnings + lines


def main(argv=None):
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--tie-margin", type=float, default=TIE_MARGIN,
                     help="exclude requests whose smallest relative routing margin is below "
                          "this (default 1e-6)")
    opts, rest = pre.parse_known_args(argv)
    tally = Tally()

    def run_one(mosaic, workdir, case, models, reference_only):
        return run_case(mosaic, workdir, case, models, reference_only, opts.tie_margin,
                        tally)

    rc = cg.check_main(rest, CASES, build_models, run_one, width=26)
    if "--list" in rest:
        return rc
    if tally.requests:
        margin = f"{tally.min_margin:.1e}" if math.isfinite(tally.min_margin) else "inf"
        print(f"routing near-ties: {tally.excluded} of {tally.requests} requests excluded "
              f"(tie margin {opts.tie_margin:g}, smallest margin {margin})")
        if excluded_too_many(tally.excluded, tally.requests):
            print(f"FAIL: more than {MAX_EXCLUDED_FRACTION:.0%} of all requests excluded")
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
