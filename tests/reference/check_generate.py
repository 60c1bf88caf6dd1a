#!/usr/bin/python3
"""Cross-implementation test: `mosaic generate` vs the NumPy reference (generate_np.py).

    /usr/bin/python3 tests/reference/check_generate.py --mosaic build/src/cli/mosaic \
        --workdir /tmp/check_generate [--cases NAME,...] [--reference-only] [--list]

It asks Mosaic for a few random tiny checkpoints (`mosaic make-test-model`, preset tiny:
mask id 1000, EOS 1001), then for every case runs ONE `mosaic generate ... --json` call
(one --ids per prompt) and the reference on each prompt on its own, and compares token
for token: every generated id (mask id where nothing was committed) and the step count.

Random tiny models rarely produce EOS, so the cases about EOS use a copy of the model
folder whose config.json names as EOS a token the model likes (picked from a reference run
without the EOS options), and choose `--eot-id` the same way; stop_at_eos cases pick a
token of the middle of such a run. Thresholds are chosen for the tiny models' confidences
(about 0.01 over a vocabulary of ~1000), so that steps commit several tokens.

The reference also reports its closest decision per case (token argmax gap, top-k cut,
threshold / factor margin, top-p cumulative margin); a gap under 1e-6 (NEAR TIE) is a
place where fp32 and float64 could legitimately disagree. It also counts committed mask
ids (x0 = mask id: sampling.md does not say whether that is allowed). Both are printed as
warnings; with --reference-only they fail the case. Every case's seed and prompt were
chosen so that neither occurs.

Exit status 0 when every case passes, 1 otherwise.
"""

import argparse
import json
import os
import shutil
import sys
import time
import zlib
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_runner import CheckFailure, run_command  # noqa: E402
import generate_np as gen  # noqa: E402
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402

PROMPT_ID_LIMIT = 1000      # prompts use ids below the tiny preset's specials (1000, 1001)


@dataclass
class ModelSpec:
    family: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    dtype: str
    seed: int


MODELS = {
    "llada": ModelSpec("llada", 2, 64, 4, 4, 128, 1030, "bf16", 11),
    "llada_gqa": ModelSpec("llada", 2, 64, 4, 2, 96, 1037, "fp32", 12),
    "dream": ModelSpec("dream", 2, 64, 4, 2, 128, 1030, "bf16", 21),
    "dream_mqa": ModelSpec("dream", 2, 64, 4, 1, 96, 1041, "fp32", 22),
    "llada_tp": ModelSpec("llada", 2, 64, 4, 2, 128, 1032, "bf16", 13),  # splits over 2 and 4 ranks
}


@dataclass
class Case:
    """One `mosaic generate` call.

    prompts: prompt lengths (one --ids each, in one call). params: generate_np.Params
    fields. eos_pick / eot_pick: ("freq", r) = the r-th most frequent token of a probe run
    (the same case without EOS options and stop, first prompt), ("at", k) = the probe's
    token at generated index k; eos_pick rewrites config.json's eos_token_id in a copy of
    the model folder, eot_pick becomes --eot-id. eot: a fixed --eot-id. prompt_seed: the
    seed of the random prompts (default: CRC-32 of the name)."""
    name: str
    model: str
    prompts: list
    params: dict
    notes: str = ""
    eos_pick: tuple = None
    eot_pick: tuple = None
    eot: int = None
    prompt_seed: int = None
    mosaic_args: tuple = ()  # further `mosaic generate` flags (--tensor-parallel N)


def L(name, prompts=(5,), notes="", **kw):
    """A LLaDA case on the default LLaDA model (model= to choose another)."""
    model = kw.pop("model", "llada")
    picks = {k: kw.pop(k) for k in ("eos_pick", "eot_pick", "eot", "prompt_seed", "mosaic_args")
             if k in kw}
    return Case(name, model, list(prompts), kw, notes, **picks)


def D(name, prompts=(5,), notes="", **kw):
    """A Dream case on the default Dream model (model= to choose another)."""
    model = kw.pop("model", "dream")
    kw.setdefault("eps", 1e-3)
    picks = {k: kw.pop(k) for k in ("eos_pick", "eot_pick", "eot", "prompt_seed", "mosaic_args")
             if k in kw}
    return Case(name, model, list(prompts), kw, notes, **picks)


G16 = dict(gen_length=16)
CASES = [
    # LLaDA, greedy, block / step grid
    L("llada_t0_b16_s16", **G16, block_length=16, steps=16, seed=1),
    L("llada_t0_b16_s8", **G16, block_length=16, steps=8, seed=1),
    L("llada_t0_b8_s16", **G16, block_length=8, steps=16, seed=1),
    L("llada_t0_b8_s8", **G16, block_length=8, steps=8, seed=1),
    L("llada_t0_b4_s16", **G16, block_length=4, steps=16, seed=1),
    L("llada_t0_b4_s8", **G16, block_length=4, steps=8, seed=1),
    L("llada_t0_uneven_quota", gen_length=24, block_length=12, steps=10, seed=1,
      notes="12 masks over 5 steps per block: 3,3,2,2,2"),
    # More steps than positions (the reference's steps of quota 0) are refused since issue 29:
    # tests/cli/test_hostile_args.py. One step per position is the most a request can use.
    L("llada_steps_eq_tokens_t1", gen_length=8, block_length=4, steps=8, temperature=1.0,
      seed=3, notes="S = B = 4: quota 1 at every step"),
    # LLaDA, temperature (Gumbel stream 1)
    L("llada_t1_seed17", **G16, block_length=8, steps=16, temperature=1.0, seed=17),
    L("llada_t1_seed8", **G16, block_length=8, steps=16, temperature=1.0, seed=8),
    L("llada_t07_seed_hi_word", **G16, block_length=16, steps=16, temperature=0.7,
      seed=0x9E3779B97F4A7C15, notes="seed >= 2^32: key word 1 used"),
    # LLaDA, random remasking (stream 2)
    L("llada_random_t0", **G16, block_length=8, steps=8, remasking="random", seed=3),
    L("llada_random_t1", **G16, block_length=4, steps=16, remasking="random",
      temperature=1.0, seed=4),
    # LLaDA, CFG
    L("llada_cfg15_t0", **G16, block_length=8, steps=16, cfg_scale=1.5, seed=1),
    L("llada_cfg15_t1", **G16, block_length=16, steps=8, cfg_scale=1.5, temperature=1.0,
      seed=5, model="llada_gqa"),
    # LLaDA, EOS / EoT options (EOS and EoT = tokens the model likes)
    L("llada_logits_eos_inf_t0", **G16, block_length=8, steps=16, logits_eos_inf=True,
      seed=1, eos_pick=("freq", 0), notes="EOS = most frequent token, banned"),
    L("llada_logits_eos_inf_t1", **G16, block_length=8, steps=16, logits_eos_inf=True,
      temperature=1.0, seed=6, eos_pick=("freq", 0)),
    L("llada_conf_eos_eot_t0", **G16, block_length=8, steps=16, confidence_eos_eot_inf=True,
      seed=1, eos_pick=("freq", 0), eot_pick=("freq", 1), prompt_seed=1,
      notes="T = 0: EOS and EoT out of the confidence softmax"),
    L("llada_conf_eos_eot_t1", **G16, block_length=8, steps=16, confidence_eos_eot_inf=True,
      temperature=0.5, seed=9, eos_pick=("freq", 0), eot_pick=("freq", 1),
      notes="T > 0: only EoT out of the softmax"),
    L("llada_both_eos_options", **G16, block_length=16, steps=16, logits_eos_inf=True,
      confidence_eos_eot_inf=True, seed=1, eos_pick=("freq", 0), eot_pick=("freq", 1)),
    # LLaDA, Fast-dLLM rules (steps = G, so no reading of "steps bounds the total" binds)
    L("llada_threshold", **G16, block_length=8, steps=16, threshold=0.028, seed=1,
      notes="multi-token steps"),
    L("llada_threshold_t1", **G16, block_length=16, steps=16, threshold=0.004,
      temperature=1.0, seed=2),
    L("llada_factor", gen_length=14, block_length=7, steps=14, factor=4.5, seed=1,
      notes="K = 3, then first failure at rank n = 4 -> K = 4"),
    L("llada_factor_t1", **G16, block_length=8, steps=16, factor=4.0, temperature=1.0,
      seed=3),
    # LLaDA, stop at EOS
    L("llada_stop_eot", **G16, block_length=4, steps=16, stop_at_eos=True, seed=1,
      eot_pick=("at", 6)),
    L("llada_stop_eos_t1", **G16, block_length=8, steps=16, stop_at_eos=True,
      temperature=1.0, seed=1, eos_pick=("at", 3)),
    L("llada_stop_plain", **G16, block_length=8, steps=8, stop_at_eos=True, seed=1,
      notes="config EOS: consistency only"),
    # LLaDA, prompt lengths and batches
    L("llada_prompt_len1", prompts=(1,), **G16, block_length=8, steps=16, seed=1),
    L("llada_prompt_len13", prompts=(13,), **G16, block_length=8, steps=8, seed=1),
    L("llada_batch3_t0", prompts=(1, 5, 13), **G16, block_length=8, steps=16, seed=1),
    L("llada_batch3_t1", prompts=(13, 1, 5), **G16, block_length=8, steps=16,
      temperature=1.0, seed=10, notes="one --seed for every prompt of the call"),
    # Dream, the four algs at T = 0 and T = 0.7
    D("dream_origin_t0", **G16, steps=16, alg="origin", seed=1),
    D("dream_origin_t07", **G16, steps=16, alg="origin", temperature=0.7, seed=2),
    D("dream_maskgit_t0", **G16, steps=8, alg="maskgit_plus", seed=1),
    D("dream_maskgit_t07", **G16, steps=8, alg="maskgit_plus", temperature=0.7, seed=3),
    D("dream_margin_t0", **G16, steps=8, alg="topk_margin", seed=1),
    D("dream_margin_t07", **G16, steps=16, alg="topk_margin", temperature=0.7, seed=4),
    D("dream_entropy_t0", **G16, steps=8, alg="entropy", seed=1),
    D("dream_entropy_t07", **G16, steps=16, alg="entropy", temperature=0.7, seed=5),
    # Dream, position and token sampling options
    D("dream_alg_temp05", **G16, steps=8, alg="maskgit_plus", alg_temp=0.5, seed=6,
      notes="Gumbel-top-k stream 4"),
    D("dream_alg_temp05_entropy_t07", **G16, steps=8, alg="entropy", alg_temp=0.5,
      temperature=0.7, seed=7),
    D("dream_top_p09", **G16, steps=8, alg="maskgit_plus", temperature=0.3, top_p=0.9,
      seed=8, notes="T = 0.3: at T = 0.7 the cumulative sum grazes 0.9 for most seeds"),
    D("dream_top_k20", **G16, steps=8, alg="maskgit_plus", temperature=0.7, top_k=20,
      seed=9),
    D("dream_top_p_top_k_t0", **G16, steps=8, alg="topk_margin", top_p=0.05, top_k=4,
      seed=1, prompt_seed=1, notes="T = 0: filters change confidences only"),
    # Tensor parallelism (docs/design/tensor-parallel.md): the ranks' combined head summaries
    # commit what one device does; temperature > 0 draws each id's noise on the rank holding it.
    L("llada_tp2_t0", prompts=(5, 9), **G16, block_length=8, steps=16, seed=1, model="llada_tp",
      mosaic_args=("--tensor-parallel", "2"), notes="2 ranks, 2 prompts"),
    L("llada_tp4_t1", **G16, block_length=8, steps=16, temperature=1.0, seed=17, model="llada_tp",
      mosaic_args=("--tensor-parallel", "4"), notes="4 ranks, Gumbel-max across vocabulary shards"),
    D("dream_tp2_entropy_t07", **G16, steps=16, alg="entropy", temperature=0.7, seed=5,
      mosaic_args=("--tensor-parallel", "2"), notes="2 ranks, entropy from combined log-sum-exp"),
    D("dream_tp2_top_p09", **G16, steps=8, alg="maskgit_plus", temperature=0.3, top_p=0.9, seed=8,
      mosaic_args=("--tensor-parallel", "2"), notes="2 ranks, top-p from the ranks' logits side by side"),
    # Context parallelism (docs/design/context-parallel.md): rows split over ranks, every rank
    # gathering every rank's keys and values.
    L("llada_cp3_t1", prompts=(5, 9), **G16, block_length=8, steps=16, temperature=1.0, seed=17,
      mosaic_args=("--context-parallel", "3"), notes="3 ranks, 2 prompts, Gumbel-max"),
    D("dream_cp2_maskgit_t07", **G16, steps=8, alg="maskgit_plus", temperature=0.7, seed=3,
      mosaic_args=("--context-parallel", "2"), notes="2 ranks"),
    # Dream, schedule corners
    D("dream_steps_eq_tokens", gen_length=8, steps=8, alg="maskgit_plus", seed=1,
      notes="as many steps as positions, the most a request may ask for"),
    D("dream_uneven_schedule", gen_length=20, steps=7, alg="entropy", seed=1),
    D("dream_eps01_g17_s6", gen_length=17, steps=6, alg="maskgit_plus", eps=0.1,
      temperature=0.7, seed=1,
      notes="counts 2,2,2,2,3,6 (CUDA's fused linspace); unfused: 2,2,2,3,2,6"),
    # Dream, Fast-dLLM rules
    D("dream_threshold", **G16, steps=16, alg="maskgit_plus", threshold=0.0125, seed=1),
    D("dream_threshold_margin_t07", **G16, steps=16, alg="topk_margin", threshold=0.018,
      temperature=0.7, seed=2, notes="a rule ranks by p(x0) whatever alg says"),
    D("dream_threshold_origin", **G16, steps=16, alg="origin", threshold=0.0125, seed=1,
      notes="origin with a rule decodes like maskgit_plus"),
    D("dream_factor", **G16, steps=16, alg="maskgit_plus", factor=4.5, seed=1,
      notes="K = 3 repeatedly, then first failure at rank n = 4"),
    D("dream_factor_entropy_t07", **G16, steps=16, alg="entropy", factor=4.5,
      temperature=0.7, seed=3),
    # Dream, stop at EOS
    D("dream_stop_eos", **G16, steps=16, alg="maskgit_plus", stop_at_eos=True, seed=1,
      eos_pick=("at", 4)),
    D("dream_stop_plain", **G16, steps=8, alg="entropy", stop_at_eos=True, seed=1,
      notes="config EOS: consistency only"),
    # Dream, prompt lengths, batches, another model
    D("dream_prompt_len1", prompts=(1,), **G16, steps=8, alg="maskgit_plus", seed=1),
    D("dream_prompt_len13", prompts=(13,), **G16, steps=8, alg="entropy", seed=1),
    D("dream_batch3_t0", prompts=(1, 5, 13), **G16, steps=8, alg="topk_margin", seed=1),
    D("dream_batch3_t07", prompts=(5, 13, 1), **G16, steps=16, alg="origin",
      temperature=0.7, seed=11),
    D("dream_mqa_entropy_t07", **G16, steps=8, alg="entropy", temperature=0.7, seed=12,
      model="dream_mqa"),
]


def make_model(mosaic, spec, out_dir):
    """`mosaic make-test-model` (preset tiny) into out_dir (emptied first)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    run_command([mosaic, "make-test-model", "--family", spec.family, "--preset", "tiny",
                 "--layers", str(spec.layers), "--hidden", str(spec.hidden),
                 "--heads", str(spec.heads), "--kv-heads", str(spec.kv_heads),
                 "--ffn", str(spec.ffn), "--vocab", str(spec.vocab), "--dtype", spec.dtype,
                 "--seed", str(spec.seed), "--out", out_dir])
    config = st.load_config(out_dir)
    hp = ref.hparams_from_config(config)
    if hp["family"] != spec.family or hp["vocab"] != spec.vocab:
        raise CheckFailure(f"make-test-model wrote family {hp['family']} vocab "
                           f"{hp['vocab']}, asked {spec.family} {spec.vocab}")
    ids = gen.special_ids_from_config(config)
    if max(ids.mask, ids.eos) < PROMPT_ID_LIMIT:
        raise CheckFailure(f"special ids {ids} collide with prompt ids < {PROMPT_ID_LIMIT}")


def copy_with_eos(src, dst, eos):
    """A copy of a model folder whose config.json says eos_token_id = eos."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    path = os.path.join(dst, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["eos_token_id"] = int(eos)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


def case_prompts(case):
    """Deterministic random prompts (ids < 1000) of the case's lengths."""
    seed = zlib.crc32(case.name.encode()) if case.prompt_seed is None else case.prompt_seed
    rng = np.random.default_rng(seed)
    return [[int(v) for v in rng.integers(0, PROMPT_ID_LIMIT, size=n)] for n in case.prompts]


def params_of(case):
    return gen.Params(**case.params)


def mosaic_argv(mosaic, model_dir, family, prompts, p, eot):
    """The `mosaic generate` command line of a case (options of the family only)."""
    argv = [mosaic, "generate", "--model", model_dir]
    for ids in prompts:
        argv += ["--ids", ",".join(map(str, ids))]
    argv += ["--gen-length", str(p.gen_length), "--steps", str(p.steps),
             "--temperature", repr(float(p.temperature))]
    if family == ref.FAMILY_LLADA:
        argv += ["--block-length", str(p.gen_length if p.block_length is None
                                       else p.block_length),
                 "--remasking", p.remasking]
        if p.cfg_scale:
            argv += ["--cfg-scale", repr(float(p.cfg_scale))]
        if p.logits_eos_inf:
            argv.append("--logits-eos-inf")
        if p.confidence_eos_eot_inf:
            argv.append("--confidence-eos-eot-inf")
    else:
        argv += ["--alg", p.alg, "--eps", repr(float(p.eps))]
        if p.alg_temp:
            argv += ["--alg-temp", repr(float(p.alg_temp))]
        if p.top_p is not None:
            argv += ["--top-p", repr(float(p.top_p))]
        if p.top_k is not None:
            argv += ["--top-k", str(p.top_k)]
    if eot is not None:
        argv += ["--eot-id", str(eot)]
    if p.threshold is not None:
        argv += ["--threshold", repr(float(p.threshold))]
    if p.factor is not None:
        argv += ["--factor", repr(float(p.factor))]
    if p.stop_at_eos:
        argv.append("--stop-at-eos")
    argv += ["--seed", str(p.seed), "--json"]
    return argv


def pick_token(output, how):
    """("freq", r): r-th most frequent id (ties: lower id); ("at", k): the id at the
    first index >= k that holds an id not seen before it (so a stop is not earlier)."""
    kind, k = how
    if kind == "freq":
        ranked = sorted(Counter(output).items(), key=lambda kv: (-kv[1], kv[0]))
        if k >= len(ranked):
            raise CheckFailure(f"probe output {output} has fewer than {k + 1} distinct ids")
        return ranked[k][0]
    if kind == "at":
        for j in range(k, len(output)):
            if output[j] not in output[:j]:
                return output[j]
        raise CheckFailure(f"probe output {output} has no new id at index >= {k}")
    raise ValueError(f"unknown pick {how!r}")


def resolve_case(case, model, model_dir, workdir, prompts):
    """(model, model folder, special ids, params) of a case, EOS / EoT picks applied."""
    p = params_of(case)
    base_ids = gen.special_ids_from_folder(model_dir)
    eos, eot = None, case.eot
    if case.eos_pick or case.eot_pick:
        probe = replace(p, logits_eos_inf=False, confidence_eos_eot_inf=False,
                        stop_at_eos=False)
        out = gen.generate(model, prompts[0], probe, base_ids).output_ids
        out = [v for v in out if v != base_ids.mask]
        if case.eos_pick:
            eos = pick_token(out, case.eos_pick)
        if case.eot_pick:
            eot = pick_token([v for v in out if v != eos], case.eot_pick) \
                if case.eot_pick[0] == "freq" else pick_token(out, case.eot_pick)
    if eos is not None:
        case_dir = os.path.join(workdir, f"{case.name}_model")
        copy_with_eos(model_dir, case_dir, eos)
        model_dir = case_dir
    ids = gen.special_ids_from_folder(model_dir, eot)
    return model_dir, ids, p


def first_difference(ref_res, got):
    """Text for the first differing generated position in the reference's commit order."""
    diff = [j for j in range(len(ref_res.output_ids))
            if j >= len(got) or got[j] != ref_res.output_ids[j]]
    if not diff:
        return None
    big = 1 << 30
    j = min(diff, key=lambda j: (ref_res.commit_step[j] if ref_res.commit_step[j] >= 0
                                 else big, j))
    step = ref_res.commit_step[j]
    when = f"committed by the reference at step {step}" if step >= 0 else \
        "left masked by the reference"
    mosaic_id = got[j] if j < len(got) else None
    return (f"first difference at generated position {j} (canvas "
            f"{len(ref_res.prompt_ids) + j}), {when}: mosaic {mosaic_id}, reference "
            f"{ref_res.output_ids[j]}; {len(diff)} position(s) differ")


def eos_filler(r, out, eos_id):
    """Number of positions the reference leaves masked after its stop and mosaic fills with
    EOS, when that is the only difference (else 0)."""
    diff = [j for j in range(len(out)) if out[j] != r.output_ids[j]]
    if r.stopped_at_eos and diff and all(out[j] == eos_id for j in diff):
        return len(diff)
    return 0


def matched_results(results, got_json, prompts):
    """(lines, rows): report lines for a JSON without one result per prompt, a wrong prompt_ids
    or an output_ids of the wrong length, and (who, reference, got, output_ids) of every result
    whose output_ids can be compared position by position."""
    got = got_json.get("results") if isinstance(got_json, dict) else None
    if not isinstance(got, list) or len(got) != len(results):
        return [f"expected {{\"results\": [...]}} with {len(results)} entries, got "
                f"{json.dumps(got_json)[:300]}"], []
    lines, rows = [], []
    for i, (r, g) in enumerate(zip(results, got)):
        who = f"prompt {i} (P={len(prompts[i])})"
        if g.get("prompt_ids") != r.prompt_ids:
            lines.append(f"{who}: prompt_ids {g.get('prompt_ids')} != {r.prompt_ids}")
        out = g.get("output_ids")
        if not isinstance(out, list) or len(out) != len(r.output_ids):
            lines.append(f"{who}: output_ids has {len(out) if isinstance(out, list) else out}"
                         f" entries, expected {len(r.output_ids)}")
            continue
        rows.append((who, r, g, out))
    return lines, rows


def compare(results, got_json, prompts, eos_id=None):
    """Report lines of every disagreement (empty when all agree)."""
    lines, rows = matched_results(results, got_json, prompts)
    for who, r, g, out in rows:
        d = first_difference(r, out)
        filled = eos_filler(r, out, eos_id)
        if filled:
            d = (f"after the stop mosaic wrote EOS ({eos_id}) into {filled} position(s) the "
                 f"reference leaves masked (the CLI contract: output_ids hold the mask id "
                 f"where nothing was committed)")
        if g.get("steps") != r.steps:
            lines.append(f"{who}: steps mosaic {g.get('steps')}, reference {r.steps}")
        if d:
            lines.append(f"{who}: {d}")
        if d or g.get("steps") != r.steps:
            lines.append(f"    mosaic    {out}")
            lines.append(f"    reference {r.output_ids}")
            lines.append(f"    ref commit steps {r.commit_step}")
    return lines


def tie_summary(results):
    """(closest Decision over all prompts, number of near ties)."""
    closest, near = None, 0
    for r in results:
        c = r.ties.closest
        if c is not None and (closest is None or c.gap < closest.gap):
            closest = c
        near += len(r.ties.near)
    return closest, near


def run_case(mosaic, workdir, case, models, reference_only, argv_of=None, compare_with=None,
             describe=None):
    """Returns (ok, summary text, report lines). argv_of (mosaic_argv's arguments), compare_with
    (compare's) and describe(results) -> the summary's first words let another check reuse it."""
    argv_of, compare_with = argv_of or mosaic_argv, compare_with or compare
    model, model_dir = models[case.model]
    prompts = case_prompts(case)
    model_dir, ids, p = resolve_case(case, model, model_dir, workdir, prompts)
    if model_dir != models[case.model][1]:
        model = ref.load_model(model_dir)
    results = gen.generate_batch(model, prompts, p, ids)
    closest, near = tie_summary(results)
    summary = describe(results) if describe else "steps " + ",".join(str(r.steps) for r in results)
    if closest is not None:
        summary += f", closest {closest.kind} gap {closest.gap:.1e}"
    if ids.eot is not None:
        summary += f", eot {ids.eot}"
    if ids.eos != gen.special_ids_from_folder(models[case.model][1]).eos:
        summary += f", eos {ids.eos}"
    if any(r.stopped_at_eos for r in results):
        summary += ", stopped"
    warnings = []
    if near:
        warnings.append(f"  NEAR TIE: {near} decision(s) of the reference within "
                        f"{gen.NEAR_TIE:g} (closest: {closest}); change the case's seed")
    mask_commits = sum(r.mask_commits for r in results)
    if mask_commits:
        warnings.append(f"  MASK COMMIT: the reference chose the mask id {mask_commits} "
                        f"time(s) at committed positions (sampling.md does not say whether "
                        f"x0 may be the mask id); change the case's seed")
    if reference_only:
        return not warnings, summary, warnings
    argv = argv_of(mosaic, model_dir, model.family, prompts, p, ids.eot) + list(case.mosaic_args)
    out = run_command(argv)
    try:
        got = json.loads(out)
    except json.JSONDecodeError as e:
        raise CheckFailure(f"mosaic generate printed no JSON ({e}): {out[:500]}")
    lines = ["  " + line for line in compare_with(results, got, prompts, ids.eos)]
    if lines:
        lines.append("  command: " + " ".join(argv))
    return not lines, summary, warnings + lines


def build_models(mosaic, workdir, names):
    """{name: (reference model, folder)} of the MODELS named, and the names that failed."""
    models, failed = {}, []
    for name in sorted(names):
        model_dir = os.path.join(workdir, f"model_{name}")
        try:
            make_model(mosaic, MODELS[name], model_dir)
            models[name] = (ref.load_model(model_dir), model_dir)
        except (CheckFailure, ValueError) as e:
            print(f"FAIL model {name}:\n  " + "\n  ".join(str(e).splitlines()))
            failed.append(f"model {name}")
    return models, failed


def check_main(argv, all_cases, build, run_one, width=30):
    """The command line of a cross-check: --list, --cases, --reference-only; builds the cases'
    models with build(mosaic, workdir, names) and runs each case with
    run_one(mosaic, workdir, case, models, reference_only) -> (ok, summary, lines)."""
    parser = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__.split("\n")[0])
    parser.add_argument("--mosaic", required=True, help="path to the mosaic executable")
    parser.add_argument("--workdir", required=True, help="scratch folder (created)")
    parser.add_argument("--cases", default="", help="comma-separated case names")
    parser.add_argument("--reference-only", action="store_true",
                        help="run only the reference (needs make-test-model): near ties")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)

    if args.list:
        for c in all_cases:
            print(f"{c.name:{width + 2}s} {c.model:14s} prompts {c.prompts} {c.params} {c.notes}")
        return 0
    cases = all_cases
    if args.cases:
        names = args.cases.split(",")
        unknown = set(names) - {c.name for c in all_cases}
        if unknown:
            parser.error(f"unknown cases {sorted(unknown)}")
        cases = [c for c in all_cases if c.name in names]
    mosaic = os.path.abspath(args.mosaic)
    if not os.access(mosaic, os.X_OK):
        print(f"FAIL: mosaic executable not found or not executable: {mosaic}")
        return 1
    os.makedirs(args.workdir, exist_ok=True)

    t_start = time.monotonic()
    models, failed = build(mosaic, args.workdir, {c.model for c in cases})
    for case in cases:
        if case.model not in models:
            failed.append(case.name)
            print(f"FAIL {case.name} (no model {case.model})")
            continue
        t0 = time.monotonic()
        try:
            ok, summary, lines = run_one(mosaic, args.workdir, case, models, args.reference_only)
        except (CheckFailure, ValueError) as e:
            ok, summary, lines = False, "error", ["  " + line for line in
                                                  str(e).splitlines()]
        status = "PASS" if ok else "FAIL"
        note = f"; {case.notes}" if case.notes else ""
        print(f"{status} {case.name:{width}s} ({summary}{note}; {time.monotonic() - t0:.1f} s)")
        for line in lines:
            print(line)
        if not ok:
            failed.append(case.name)
    took = time.monotonic() - t_start
    what = "reference-only cases" if args.reference_only else "cases"
    if failed:
        print(f"\n{len(failed)} of {len(cases)} {what} failed: {', '.join(failed)} "
              f"({took:.0f} s; models kept in {args.workdir})")
        return 1
    print(f"\nall {len(cases)} {what} agree ({took:.0f} s)")
    return 0


def main(argv=None):
    return check_main(argv, CASES, build_models, run_case)


if __name__ == "__main__":
    sys.exit(main())
