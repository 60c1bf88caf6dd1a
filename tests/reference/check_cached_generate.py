#!/usr/bin/python3
"""Cross-implementation test of cached decoding: `mosaic generate --cache MODE` vs the NumPy
reference (generate_np.py, docs/design/cached-decoding.md).

    /usr/bin/python3 tests/reference/check_cached_generate.py \
        --mosaic build/src/cli/mosaic --workdir /tmp/check_cached_generate \
        [--cases NAME,...] [--reference-only] [--list]

The machinery is check_generate.py's (its models, prompts, EOS / EoT picks, tie report and
token-for-token comparison); this file adds the cached forms: Fast-dLLM's prefix and dual
caches on the full-attention models, Dream's block decoding, and block-causal models, made
by copying a model folder and setting "block_attention" ("prompt" or "absolute") in the
copy's config.json, decoded with their exact block cache (cache auto) and without it (cache
none). Every case runs ONE `mosaic generate ... --cache MODE --json` call (Dream: also
--block-length when the case sets it) and the reference on each prompt on its own; it
compares every generated id and the step count as check_generate does, and also each
result's "cache" (the effective mode) and "forwards" (steps that ran a forward).

ERROR_CASES are requests the specification rejects (§3: prefix / dual with CFG or on a
block-causal model, an unknown mode; §2: Dream block requirements): the reference must raise
GenerationError and Mosaic must exit with a non-zero status of its own (not a signal).

Seeds and prompts were chosen so that no case has a NEAR TIE or a MASK COMMIT in the
reference (--reference-only fails on either).

Exit status 0 when every case passes, 1 otherwise.
"""

import json
import os
import shutil
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_generate as cg  # noqa: E402
from check_generate import D, L, case_prompts, compare  # noqa: E402
from cli_runner import CheckFailure, run_command  # noqa: E402
import generate_np as gen  # noqa: E402
import reference_forward as ref  # noqa: E402


@dataclass
class Variant:
    """A block-causal copy of one of check_generate's models."""
    base: str
    block_attention: str


VARIANTS = {
    "llada_prompt": Variant("llada", "prompt"),
    "llada_absolute": Variant("llada", "absolute"),
    "dream_prompt": Variant("dream", "prompt"),
    "dream_absolute": Variant("dream", "absolute"),
}
MODEL_NAMES = sorted(set(cg.MODELS) | set(VARIANTS))


def copy_with_block_attention(src, dst, kind):
    """A copy of a model folder whose config.json says "block_attention": kind."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    path = os.path.join(dst, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["block_attention"] = kind
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


G16 = dict(gen_length=16)
G24 = dict(gen_length=24)
CASES = [
    # LLaDA, full attention, Fast-dLLM's prefix cache: block / step grids, T, rules
    L("llada_prefix_t0_b4_s16", **G16, block_length=4, steps=16, cache="prefix", seed=1),
    L("llada_prefix_t0_b8_s8", **G16, block_length=8, steps=8, cache="prefix", seed=1),
    L("llada_prefix_t0_b16_s16", **G16, block_length=16, steps=16, cache="prefix", seed=1,
      notes="one block: one refresh, then rows [P, L)"),
    L("llada_prefix_t1", **G16, block_length=8, steps=16, temperature=1.0, cache="prefix",
      seed=17),
    L("llada_prefix_threshold", **G16, block_length=8, steps=16, threshold=0.028,
      cache="prefix", prompt_seed=2, seed=1),
    L("llada_prefix_threshold_t1", **G16, block_length=8, steps=16, threshold=0.004,
      temperature=1.0, cache="prefix", seed=2),
    L("llada_prefix_factor", gen_length=14, block_length=7, steps=14, factor=4.5,
      cache="prefix", prompt_seed=3, seed=1),
    L("llada_prefix_random_t0", **G16, block_length=8, steps=8, remasking="random",
      cache="prefix", seed=3,
      notes="random remasking: candidates drawn before the forward"),
    L("llada_prefix_random_t1", **G16, block_length=4, steps=16, remasking="random",
      temperature=1.0, cache="prefix", prompt_seed=1, seed=4),
    L("llada_prefix_batch3", prompts=(1, 5, 13), **G16, block_length=8, steps=16,
      cache="prefix", seed=1),
    # LLaDA, full attention, dual cache
    L("llada_dual_t0_b4_s16", **G16, block_length=4, steps=16, cache="dual", prompt_seed=1,
      seed=1),
    L("llada_dual_t0_b8_s8", **G16, block_length=8, steps=8, cache="dual", seed=1),
    L("llada_dual_t1", **G16, block_length=4, steps=16, temperature=1.0, cache="dual",
      seed=8),
    L("llada_dual_threshold", **G16, block_length=8, steps=16, threshold=0.028,
      cache="dual", prompt_seed=2, seed=1),
    L("llada_dual_threshold_t1", **G24, block_length=8, steps=24, threshold=0.004,
      temperature=1.0, cache="dual", prompt_seed=1, seed=2),
    L("llada_dual_gqa_t07", **G16, block_length=8, steps=16, temperature=0.7, cache="dual",
      seed=5, model="llada_gqa"),
    L("llada_dual_batch3_t1", prompts=(13, 1, 5), **G16, block_length=8, steps=16,
      temperature=1.0, cache="dual", seed=10),
    L("llada_dual_stop_eot", **G16, block_length=4, steps=16, stop_at_eos=True,
      cache="dual", seed=1, eot_pick=("at", 6)),
    # Tensor parallelism (docs/design/tensor-parallel.md): each rank caches its own heads' K/V.
    L("llada_tp2_dual_t1", **G16, block_length=4, steps=16, temperature=1.0, cache="dual", seed=8,
      mosaic_args=("--tensor-parallel", "2"), notes="2 ranks, dual cache"),
    D("dream_tp2_prefix_entropy_t07", **G16, block_length=8, steps=16, alg="entropy",
      temperature=0.7, cache="prefix", seed=5, mosaic_args=("--tensor-parallel", "2"),
      notes="2 ranks, prefix cache, a key/value head each"),
    # LLaDA, full attention, cache auto = none (the effective mode is reported)
    L("llada_auto_cfg", **G16, block_length=8, steps=16, cfg_scale=1.5, cache="auto",
      seed=1, notes="auto on full attention = none; CFG allowed"),
    # Dream, full attention, prefix / dual (block decoding), explicit block_length
    D("dream_prefix_maskgit_t0", **G16, block_length=8, steps=8, alg="maskgit_plus",
      cache="prefix", seed=1),
    D("dream_prefix_entropy_t07", **G16, block_length=8, steps=16, alg="entropy",
      temperature=0.7, cache="prefix", seed=5),
    D("dream_prefix_origin_t0", **G16, block_length=4, steps=16, alg="origin",
      cache="prefix", seed=1),
    D("dream_prefix_origin_t07", **G16, block_length=8, steps=16, alg="origin",
      temperature=0.7, cache="prefix", seed=2),
    D("dream_prefix_margin_t0", **G16, block_length=8, steps=8, alg="topk_margin",
      cache="prefix", seed=1),
    D("dream_prefix_threshold", **G16, block_length=8, steps=16, alg="maskgit_plus",
      threshold=0.0125, cache="prefix", seed=1),
    D("dream_prefix_threshold_t07", **G16, block_length=8, steps=16, alg="entropy",
      threshold=0.018, temperature=0.7, cache="prefix", seed=2),
    D("dream_prefix_alg_temp", **G16, block_length=8, steps=8, alg="maskgit_plus",
      alg_temp=0.5, cache="prefix", seed=6),
    D("dream_dual_maskgit_t07", **G16, block_length=8, steps=8, alg="maskgit_plus",
      temperature=0.7, cache="dual", seed=3),
    D("dream_dual_entropy_t0", **G16, block_length=4, steps=12, alg="entropy",
      cache="dual", seed=1),
    D("dream_dual_origin_t0", **G16, block_length=8, steps=16, alg="origin", cache="dual",
      seed=1),
    D("dream_dual_origin_t07", **G16, block_length=4, steps=16, alg="origin",
      temperature=0.7, cache="dual", prompt_seed=1, seed=2),
    D("dream_dual_threshold", **G16, block_length=8, steps=16, alg="maskgit_plus",
      threshold=0.0125, cache="dual", prompt_seed=1, seed=1),
    D("dream_dual_factor_t07", **G16, block_length=8, steps=16, alg="entropy", factor=4.5,
      temperature=0.7, cache="dual", seed=3),
    D("dream_dual_batch3", prompts=(1, 5, 13), **G16, block_length=8, steps=8,
      alg="topk_margin", cache="dual", seed=1),
    D("dream_dual_mqa_t07", **G16, block_length=8, steps=8, alg="entropy",
      temperature=0.7, cache="dual", seed=12, model="dream_mqa"),
    # Dream, prefix / dual without block_length: one block B = G
    D("dream_prefix_noblock_maskgit", **G16, steps=8, alg="maskgit_plus", cache="prefix",
      seed=1, notes="B = G: step 0 commits position P alone"),
    D("dream_prefix_noblock_origin_t07", **G16, steps=16, alg="origin", temperature=0.7,
      cache="prefix", prompt_seed=2, seed=11),
    D("dream_dual_noblock_entropy", **G16, steps=8, alg="entropy", cache="dual", seed=1),
    D("dream_dual_noblock_threshold_t07", **G16, steps=16, alg="maskgit_plus",
      threshold=0.0125, temperature=0.7, cache="dual", seed=4),
    # Dream block decoding without a cache (block_length set)
    D("dream_blocks_none_maskgit", **G16, block_length=8, steps=8, alg="maskgit_plus",
      cache="none", seed=1),
    D("dream_blocks_none_origin_t07", **G16, block_length=4, steps=16, alg="origin",
      temperature=0.7, cache="none", seed=2),
    D("dream_blocks_none_entropy_s24", gen_length=24, block_length=8, steps=9,
      alg="entropy", cache="none", seed=1, notes="S_b = 3"),
    D("dream_blocks_none_threshold", **G16, block_length=8, steps=16, alg="maskgit_plus",
      threshold=0.0125, cache="none", seed=1),
    D("dream_blocks_none_top_p", **G16, block_length=8, steps=8, alg="maskgit_plus",
      temperature=0.3, top_p=0.9, cache="none", seed=8),
    # Block-causal LLaDA, "prompt" (the prompt one block): exact block cache and none
    L("llada_prompt_auto_p5", **G16, block_length=4, steps=16, cache="auto",
      prompt_seed=201, seed=1, model="llada_prompt"),
    L("llada_prompt_none_p5", **G16, block_length=4, steps=16, cache="none",
      prompt_seed=201, seed=1, model="llada_prompt"),
    L("llada_prompt_auto_p8_t1", prompts=(8,), **G16, block_length=4, steps=16,
      temperature=1.0, cache="auto", prompt_seed=202, seed=3, model="llada_prompt"),
    L("llada_prompt_none_p8_t1", prompts=(8,), **G16, block_length=4, steps=16,
      temperature=1.0, cache="none", prompt_seed=202, seed=3, model="llada_prompt"),
    L("llada_prompt_auto_threshold", **G16, block_length=8, steps=16, threshold=0.028,
      cache="auto", seed=1, model="llada_prompt"),
    L("llada_prompt_auto_cfg", **G16, block_length=8, steps=16, cfg_scale=1.5,
      cache="auto", seed=1, model="llada_prompt",
      notes="block mode with CFG: the unconditional canvas has its own cache"),
    L("llada_prompt_auto_noblock", **G16, steps=8, cache="auto", seed=1,
      model="llada_prompt", notes="block_length unset: B = G"),
    L("llada_prompt_auto_batch3", prompts=(1, 8, 13), **G16, block_length=8, steps=16,
      temperature=1.0, cache="auto", seed=10, model="llada_prompt"),
    # Block-causal LLaDA, "absolute" (blocks from position 0)
    L("llada_absolute_auto_p5", **G16, block_length=4, steps=15, cache="auto",
      prompt_seed=203, seed=1, model="llada_absolute",
      notes="P = 5, B = 4: blocks [5,8) .. [20,21)"),
    L("llada_absolute_none_p5", **G16, block_length=4, steps=15, cache="none",
      prompt_seed=203, seed=1, model="llada_absolute"),
    L("llada_absolute_tp2_auto_p5", **G16, block_length=4, steps=15, cache="auto",
      prompt_seed=203, seed=1, model="llada_absolute", mosaic_args=("--tensor-parallel", "2"),
      notes="2 ranks, the exact block cache"),
    L("llada_absolute_auto_p8", prompts=(8,), **G16, block_length=4, steps=16,
      cache="auto", prompt_seed=204, seed=1, model="llada_absolute",
      notes="P a multiple of B"),
    L("llada_absolute_none_p8", prompts=(8,), **G16, block_length=4, steps=16,
      cache="none", prompt_seed=204, seed=1, model="llada_absolute"),
    L("llada_absolute_auto_g18_t1", gen_length=18, block_length=8, steps=12,
      temperature=1.0, cache="auto", prompt_seed=205, seed=2, model="llada_absolute",
      notes="G % B != 0: blocks [5,8), [8,16), [16,23)"),
    L("llada_absolute_none_g18_t1", gen_length=18, block_length=8, steps=12,
      temperature=1.0, cache="none", prompt_seed=205, seed=2, model="llada_absolute"),
    L("llada_absolute_auto_threshold", gen_length=19, block_length=4, steps=20,
      threshold=0.028, cache="auto", prompt_seed=206, seed=1, model="llada_absolute"),
    L("llada_absolute_none_threshold", gen_length=19, block_length=4, steps=20,
      threshold=0.028, cache="none", prompt_seed=206, seed=1, model="llada_absolute"),
    L("llada_absolute_auto_batch3", prompts=(3, 8, 13), **G16, block_length=8, steps=12,
      cache="auto", seed=1, model="llada_absolute", notes="3, 2 and 3 blocks"),
    # Block-causal Dream, "prompt"
    D("dream_prompt_auto_p5", **G16, block_length=4, steps=16, alg="maskgit_plus",
      cache="auto", prompt_seed=207, seed=1, model="dream_prompt"),
    D("dream_prompt_none_p5", **G16, block_length=4, steps=16, alg="maskgit_plus",
      cache="none", prompt_seed=207, seed=1, model="dream_prompt"),
    D("dream_prompt_auto_p8_origin_t07", prompts=(8,), **G16, block_length=8, steps=16,
      alg="origin", temperature=0.7, cache="auto", prompt_seed=208, seed=2,
      model="dream_prompt"),
    D("dream_prompt_none_p8_origin_t07", prompts=(8,), **G16, block_length=8, steps=16,
      alg="origin", temperature=0.7, cache="none", prompt_seed=208, seed=2,
      model="dream_prompt"),
    D("dream_prompt_auto_threshold_t07", **G16, block_length=8, steps=16,
      alg="maskgit_plus", threshold=0.0125, temperature=0.7, cache="auto", seed=4,
      model="dream_prompt"),
    D("dream_prompt_auto_noblock", **G16, steps=8, alg="entropy", cache="auto", seed=1,
      model="dream_prompt", notes="block_length unset: B = G"),
    D("dream_prompt_auto_batch3", prompts=(13, 1, 8), **G16, block_length=8, steps=8,
      alg="entropy", temperature=0.7, cache="auto", seed=7, model="dream_prompt"),
    # Block-causal Dream, "absolute"
    D("dream_absolute_auto_p5", **G16, block_length=4, steps=15, alg="entropy",
      cache="auto", prompt_seed=209, seed=1, model="dream_absolute",
      notes="a first block of 3 positions"),
    D("dream_absolute_none_p5", **G16, block_length=4, steps=15, alg="entropy",
      cache="none", prompt_seed=209, seed=1, model="dream_absolute"),
    D("dream_absolute_auto_p8", prompts=(8,), **G16, block_length=8, steps=8,
      alg="maskgit_plus", cache="auto", prompt_seed=210, seed=1, model="dream_absolute"),
    D("dream_absolute_none_p8", prompts=(8,), **G16, block_length=8, steps=8,
      alg="maskgit_plus", cache="none", prompt_seed=210, seed=1, model="dream_absolute"),
    D("dream_absolute_auto_g18_origin_t07", gen_length=18, block_length=8, steps=12,
      alg="origin", temperature=0.7, cache="auto", prompt_seed=211, seed=2,
      model="dream_absolute"),
    D("dream_absolute_none_g18_origin_t07", gen_length=18, block_length=8, steps=12,
      alg="origin", temperature=0.7, cache="none", prompt_seed=211, seed=2,
      model="dream_absolute"),
    D("dream_absolute_auto_threshold", gen_length=19, block_length=4, steps=20,
      alg="maskgit_plus", threshold=0.0125, cache="auto", seed=1, model="dream_absolute"),
    D("dream_absolute_auto_batch3", prompts=(3, 8, 13), **G16, block_length=8, steps=12,
      alg="topk_margin", cache="auto", seed=1, model="dream_absolute"),
]

ERROR_CASES = [
    L("error_llada_prefix_steps_gt_tokens", **G16, block_length=4, steps=32, cache="prefix", seed=1,
      notes="S = 8 > B = 4: more steps than positions"),
    L("error_llada_dual_steps_gt_tokens", **G16, block_length=8, steps=32, cache="dual", seed=1,
      notes="S = 16 > B = 8"),
    L("error_llada_prefix_cfg", **G16, block_length=8, steps=16, cfg_scale=1.5,
      cache="prefix", seed=1, notes="§3: prefix with CFG"),
    L("error_llada_dual_cfg", **G16, block_length=8, steps=16, cfg_scale=1.5, cache="dual",
      seed=1, notes="§3: dual with CFG"),
    L("error_llada_prompt_prefix", **G16, block_length=8, steps=16, cache="prefix", seed=1,
      model="llada_prompt", notes="§3: prefix on a block-causal model"),
    L("error_llada_absolute_dual", **G16, block_length=8, steps=12, cache="dual", seed=1,
      model="llada_absolute", notes="§3: dual on a block-causal model"),
    D("error_dream_prompt_dual", **G16, block_length=8, steps=8, alg="entropy",
      cache="dual", seed=1, model="dream_prompt", notes="§3: dual on a block-causal model"),
    L("error_llada_unknown_cache", **G16, block_length=8, steps=16, cache="bogus", seed=1,
      notes="§3: an unknown mode"),
    D("error_dream_blocks_steps", **G16, block_length=4, steps=6, alg="entropy",
      cache="prefix", seed=1, notes="§2: steps % (G / B) != 0"),
    D("error_dream_blocks_g_mod_b", **G16, block_length=6, steps=8, alg="entropy",
      cache="none", seed=1, notes="§2: G % B != 0"),
    D("error_dream_blocks_one_step", **G16, block_length=4, steps=4, alg="maskgit_plus",
      cache="dual", seed=1, notes="§2: S_b = 1 without a rule"),
    L("error_llada_absolute_steps", **G16, block_length=4, steps=16, cache="auto", seed=1,
      model="llada_absolute", notes="§2: P = 5, L = 21: 5 blocks, steps % 5 != 0"),
]
ALL_CASES = CASES + ERROR_CASES


def mosaic_argv(mosaic, model_dir, family, prompts, p, eot):
    """check_generate's command line plus --cache (always) and, for Dream, --block-length
    when the case sets it (check_generate passes it for LLaDA already)."""
    argv = cg.mosaic_argv(mosaic, model_dir, family, prompts, p, eot)
    extra = ["--cache", p.cache]
    if family == ref.FAMILY_DREAM and p.block_length is not None:
        extra += ["--block-length", str(p.block_length)]
    assert argv[-3] == "--seed" and argv[-1] == "--json"
    return argv[:-3] + extra + argv[-3:]


def compare_cached(results, got_json, prompts, eos_id=None):
    """check_generate.compare, and each result's "cache" and "forwards"."""
    lines = compare(results, got_json, prompts, eos_id)
    got = got_json.get("results") if isinstance(got_json, dict) else None
    if not isinstance(got, list) or len(got) != len(results):
        return lines
    for i, (r, g) in enumerate(zip(results, got)):
        who = f"prompt {i} (P={len(prompts[i])})"
        if g.get("cache") != r.cache:
            lines.append(f"{who}: cache mosaic {g.get('cache')!r}, reference {r.cache!r}")
        if g.get("forwards") != r.forwards:
            lines.append(f"{who}: forwards mosaic {g.get('forwards')}, reference "
                         f"{r.forwards} (reference computed rows (t, c0, c1): "
                         f"{r.computed})")
    return lines


def describe(results):
    return (f"cache {','.join(sorted({r.cache for r in results}))}, steps "
            f"{','.join(str(r.steps) for r in results)}, forwards "
            f"{','.join(str(r.forwards) for r in results)}")


def run_case(mosaic, workdir, case, models, reference_only):
    """check_generate's case, with the cache in the command line, the comparison and the summary."""
    return cg.run_case(mosaic, workdir, case, models, reference_only, argv_of=mosaic_argv,
                       compare_with=compare_cached, describe=describe)


def run_error_case(mosaic, case, models, reference_only):
    """The reference must raise GenerationError; mosaic must exit non-zero (no signal)."""
    model, model_dir = models[case.model]
    prompts = case_prompts(case)
    p = cg.params_of(case)
    ids = gen.special_ids_from_folder(model_dir)
    try:
        gen.generate_batch(model, prompts, p, ids)
        return False, "accepted", ["  the reference accepted a request the spec rejects"]
    except gen.GenerationError as e:
        summary = f"reference: {e}"
    if reference_only:
        return True, summary, []
    argv = mosaic_argv(mosaic, model_dir, model.family, prompts, p, None)
    try:
        run_command(argv)
    except CheckFailure as e:
        text = str(e)
        if text.startswith("exit status ") and not text.startswith("exit status -"):
            return True, summary + "; mosaic: " + text.split(":")[0], []
        return False, summary, ["  " + line for line in text.splitlines()]
    return False, summary, ["  mosaic accepted it: " + " ".join(argv)]


def build_models(mosaic, workdir, names):
    """{name: (Model, folder)} for the named models (variants copy their base's folder);
    returns (models, failures)."""
    models, failed = cg.build_models(mosaic, workdir, {VARIANTS[n].base if n in VARIANTS else n for n in names})
    for name in sorted(n for n in names if n in VARIANTS):
        v = VARIANTS[name]
        if v.base not in models:
            continue
        model_dir = os.path.join(workdir, f"model_{name}")
        copy_with_block_attention(models[v.base][1], model_dir, v.block_attention)
        model = ref.load_model(model_dir)
        if model.block_attention != v.block_attention:
            raise CheckFailure(f"{model_dir}: block_attention not read back")
        models[name] = (model, model_dir)
    return models, failed


def run_one(mosaic, workdir, case, models, reference_only):
    """A comparison case, or an error case (both sides must refuse it)."""
    if case.name in ERROR_NAMES:
        return run_error_case(mosaic, case, models, reference_only)
    return run_case(mosaic, workdir, case, models, reference_only)


ERROR_NAMES = {c.name for c in ERROR_CASES}


def main(argv=None):
    return cg.check_main(argv, ALL_CASES, build_models, run_one, width=36)


if __name__ == "__main__":
    sys.exit(main())
