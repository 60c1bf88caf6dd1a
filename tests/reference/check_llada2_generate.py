#!/usr/bin/python3
"""Cross-implementation test of LLaDA 2.x generation: `mosaic generate` vs the NumPy reference
(llada2_np.generate: the LLaDA2.0 block decoding of the HF generate() at temperature 0 -- the
dllm LLaDA2Sampler's loop, stopped after a block that holds an EOS -- with the mask id never a
choice, Mosaic's convention), token for token.

    /usr/bin/python3 tests/reference/check_llada2_generate.py --mosaic build/src/cli/mosaic \
        --workdir /tmp/check_llada2_generate [--cases NAME,...] [--reference-only] \
        [--list] [--tie-margin 1e-6]

Mosaic makes two random tiny LLaDA 2.x checkpoints with check_llada2_forward's
make-test-model call and folder checks (the bare tiny preset in bf16, and a GQA fp32 one).
Every case runs ONE call with the case's prompts (mosaic_argv builds it):

    mosaic generate --model DIR --ids 1,2,3 [--ids ..] --gen-length N --block-length B
        --steps S --threshold T --temperature 0 --json

where --steps is the number of steps PER BLOCK (as the reference and the HF generate()).
The output is read by parse_output: a JSON object {"results": [...]}, one entry per prompt
in order, whose "output_ids" begins with the generated region (the canvas positions
P .. P + gen_length - 1; the reference's canvas is rounded up to the block grid, only the
first gen_length generated ids are compared). "prompt_ids", when present, must be the
prompt; "forwards", when present, is reported next to the reference's (not compared: a
cached implementation may count differently). Both functions are the place to adapt when
Mosaic's command line or output settles.

Cases cover prompt lengths with P % B == 0 and != 0, B 32 and 8, steps per block 32 / 8 /
4 / more than B (trailing zero-token steps), thresholds 0.95, 0.5, 1.0 (no probability
exceeds it: the pure schedule) and "q50" (the median confidence of the first step of the
first prompt, computed from the reference, so that several tokens clear it whatever the
random model's scale), a gen_length that is not a multiple of B, and gen_length <
steps (steps capped at gen_length // minimal_topk).

Near-ties. Mosaic computes in fp32, the reference in float64. The reference records, per
prompt (llada2_np.Trace), the smallest gap of every decision a tiny error could flip (a
committed token's top-1 vs top-2 probability, a masked position's confidence vs the
threshold, the fallback's k-th vs (k+1)-th confidence; relative gaps, llada2_np.NEAR_TIE
1e-5) and the smallest routing margin of every forward (below --tie-margin, 1e-6 in
selection-score units: smaller than check_llada2_forward's 1e-5 because a generation runs
hundreds of forwards, i.e. many more chances of a near tie, while the fp32 router error is
~1e-7). A prompt with a near tie is left out of the comparison (still compared, a
difference only noted) and counted; a case fails if all its prompts are left out, the run
if more than a quarter of all prompts are. The models are Mosaic's own random ones, so
which prompts tie depends on Mosaic's weights: with the real CLI, run --reference-only to
see the exclusions and change a case's prompt lengths if one has none left.

A committed mask id and an EOS in the generated region are reported as warnings (neither can
happen with the mask id banned, as both sides do; at an EOS both stop after its block and the
rest reads as EOS). With --reference-only these warnings (and near ties) fail the case.

Exit status 0 when every case passes, 1 otherwise.
"""

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_llada2_forward as cf  # noqa: E402
from cli_runner import CheckFailure, run_command  # noqa: E402
import llada2_np as l2  # noqa: E402

TIE_MARGIN = 1e-6
MAX_EXCLUDED_FRACTION = 0.25
PROMPT_ID_LIMIT = 1000      # prompts use ids below the tiny preset's specials (1000, 1001)

MODELS = {
    "tiny": cf.Case("gen_tiny_bf16", "bf16", 21, batches=[]),
    "gqa": cf.Case("gen_gqa_fp32", "fp32", 22, batches=[],
                   sizes=dict(layers=2, hidden=128, heads=8, kv_heads=2, experts=8, top_k=2,
                              groups=4, topk_groups=2, expert_ffn=32, ffn=192)),
}


@dataclass
class GenCase:
    """One `mosaic generate` call: prompt lengths (random ids, seeded by the name), the
    decoding options; threshold a float or "q50" (see the module docstring)."""
    name: str
    prompts: tuple
    gen_length: int
    block_length: int
    steps: int
    threshold: object
    model: str = "tiny"
    notes: str = ""
    # LLaDA 2.1's token editing: (editing_threshold, max_post_steps, num_to_transfer), or None
    # for LLaDA2.0's decoding. With it `steps` is not passed (2.1 has no schedule).
    editing: tuple = None


CASES = [
    GenCase("b32_s32_t095_p5", (5, 13), 32, 32, 32, 0.95, notes="P % B != 0"),
    GenCase("b32_s32_t095_p32", (32, 64), 32, 32, 32, 0.95, notes="P % B == 0"),
    GenCase("b32_s8_t095_p7", (7, 40), 40, 32, 8, 0.95, notes="4 tokens a step"),
    GenCase("b32_s8_t05_p32", (32, 3), 32, 32, 8, 0.5),
    GenCase("b32_s32_t10_p20", (20, 1), 44, 32, 32, 1.0, notes="pure schedule, 2 blocks"),
    GenCase("b32_s32_tq50_p9", (9, 30), 32, 32, 32, "q50", notes="multi-token steps"),
    GenCase("b8_s8_t095_p8", (8, 3), 16, 8, 8, 0.95, notes="P % B == 0 and != 0"),
    GenCase("b8_s8_t05_p3", (3, 11, 16), 24, 8, 8, 0.5),
    GenCase("b8_s8_t10_p12", (12, 4), 16, 8, 8, 1.0, notes="P % 8 == 4"),
    GenCase("b8_s32_t095_p5", (5, 8), 16, 8, 32, 0.95, notes="steps > B: zero-token steps"),
    GenCase("b8_s4_t10_p16", (16, 9), 16, 8, 4, 1.0, notes="2 tokens a step"),
    GenCase("b8_s8_tq50_gqa", (8, 6), 24, 8, 8, "q50", model="gqa", notes="GQA fp32"),
    GenCase("b8_s8_t05_gqa", (13, 16), 16, 8, 8, 0.5, model="gqa", notes="GQA fp32"),
    GenCase("b8_s8_t095_g13", (6, 2), 13, 8, 8, 0.95, notes="gen 13: canvas 24"),
    GenCase("b8_s8_t10_g3", (4, 7), 3, 8, 8, 1.0, notes="steps capped at 3: [3, 3, 2]"),
    # LLaDA 2.1 (moe-models.md 2.5). An editing threshold of 0 edits every placed token whose
    # prediction changed (SGLang's "full editing"); 0.9 never clears on random tiny models (M2T
    # and one post step alone).
    GenCase("e21_b8_t05_e0", (5, 12), 16, 8, 0, 0.5, editing=(0.0, 16, 1), notes="2.1, full editing"),
    GenCase("e21_b8_tq50_e09", (9, 3), 16, 8, 0, "q50", editing=(0.9, 16, 1), notes="2.1, no edit clears"),
    GenCase("e21_b32_t10_e0_n2", (7, 32), 32, 32, 0, 1.0, editing=(0.0, 4, 2), notes="2.1, 2 masks a step, 4 post"),
    GenCase("e21_b8_t10_e0_post0", (6, 16), 16, 8, 0, 1.0, editing=(0.0, 0, 1), notes="2.1, no post steps"),
    GenCase("e21_b8_t05_e0_gqa", (11, 4), 16, 8, 0, 0.5, model="gqa", editing=(0.0, 16, 1), notes="2.1, GQA fp32"),
]


# ----------------------------------------------------------------------------------------
# The command line and its output (the two places to adapt)
# ----------------------------------------------------------------------------------------

def mosaic_argv(mosaic, model_dir, prompts, case, threshold):
    """The `mosaic generate` command line of a case (all its prompts in one call)."""
    argv = [mosaic, "generate", "--model", model_dir]
    for ids in prompts:
        argv += ["--ids", ",".join(map(str, ids))]
    argv += ["--gen-length", str(case.gen_length), "--block-length", str(case.block_length),
             "--threshold", repr(float(threshold)), "--temperature", "0", "--json"]
    if case.editing is None:
        argv += ["--steps", str(case.steps)]
    else:
        editing_threshold, max_post_steps, num_to_transfer = case.editing
        argv += ["--editing-threshold", repr(float(editing_threshold)),
                 "--max-post-steps", str(max_post_steps), "--num-to-transfer", str(num_to_transfer)]
    return argv


def parse_output(stdout, prompts, gen_length):
    """[(generated ids: the first gen_length of "output_ids", forwards or None)] per prompt
    from `mosaic generate --json`'s stdout; CheckFailure when it is not that."""
    try:
        got = json.loads(stdout)
    except json.JSONDecodeError as e:
        raise CheckFailure(f"mosaic generate printed no JSON ({e}): {stdout[:500]}")
    results = got.get("results") if isinstance(got, dict) else None
    if not isinstance(results, list) or len(results) != len(prompts):
        raise CheckFailure(f"expected {{\"results\": [...]}} with {len(prompts)} entries, got "
                           f"{json.dumps(got)[:300]}")
    parsed = []
    for i, (prompt, r) in enumerate(zip(prompts, results)):
        out = r.get("output_ids") if isinstance(r, dict) else None
        if not isinstance(out, list) or len(out) < gen_length:
            raise CheckFailure(f"prompt {i}: output_ids {str(out)[:200]} is not a list of at "
                               f"least gen_length {gen_length} ids")
        if "prompt_ids" in r and r["prompt_ids"] != list(prompt):
            raise CheckFailure(f"prompt {i}: prompt_ids {r['prompt_ids']} != {list(prompt)}")
        parsed.append(([int(t) for t in out[:gen_length]], r.get("forwards")))
    return parsed


# ----------------------------------------------------------------------------------------
# The reference side
# ----------------------------------------------------------------------------------------

def case_prompts(case, vocab):
    """Random prompts of the case's lengths, ids below the specials, seeded by the name."""
    rng = np.random.default_rng(sum(map(ord, case.name)))
    limit = min(PROMPT_ID_LIMIT, vocab)
    return [[int(t) for t in rng.integers(0, limit, size=n)] for n in case.prompts]


def resolve_threshold(model, case, prompt):
    """The case's threshold; "q50": halfway between the two middle confidences (largest
    first) over the masked positions of the first block's first step of `prompt` (the
    reference's forward), so about half of them clear it and none sits on it."""
    if case.threshold != "q50":
        return float(case.threshold)
    B = case.block_length
    canvas = l2.new_canvas(prompt, case.gen_length, B, model.mask_id)
    _, first = l2.canvas_blocks(len(prompt), case.gen_length, B)
    lo, hi = first * B, (first + 1) * B
    _, conf, _ = l2.greedy_tokens(l2.forward(model, canvas[:hi], range(lo, hi), B))
    ordered = np.sort(conf[canvas[lo:hi] == model.mask_id])[::-1]
    half = max(len(ordered) // 2, 1)
    return float((ordered[half - 1] + ordered[min(half, len(ordered) - 1)]) / 2)


@dataclass
class Reference:
    """One prompt's reference decoding: generated ids (the first gen_length), forwards,
    trace, and whether a near tie leaves it out."""
    output: list
    forwards: int
    trace: l2.Trace
    excluded: bool


def reference_run(model, case, prompt, threshold, tie_margin):
    trace = l2.Trace()
    if case.editing is None:
        canvas, forwards = l2.generate(model, prompt, case.gen_length, case.block_length,
                                       case.steps, threshold, trace=trace)
    else:
        editing_threshold, max_post_steps, num_to_transfer = case.editing
        canvas, forwards = l2.generate_llada21(model, prompt, case.gen_length, case.block_length,
                                               threshold, editing_threshold, max_post_steps,
                                               num_to_transfer, trace=trace)
    out = [int(t) for t in canvas[len(prompt):len(prompt) + case.gen_length]]
    return Reference(out, forwards, trace, trace.near_tie(l2.NEAR_TIE, tie_margin))


def warnings_of(i, prompt, r, model):
    """Warning lines of one prompt's reference run (near tie, mask commit, EOS)."""
    lines = []
    kind, gap = r.trace.closest()
    if r.excluded:
        lines.append(f"  NEAR TIE: prompt {i} (P={len(prompt)}) closest decision {kind} "
                     f"{gap:.1e}, routing margin {r.trace.routing:.1e}: excluded from the "
                     f"comparison")
    if r.trace.mask_commits:
        lines.append(f"  MASK COMMIT: prompt {i}: the reference committed the mask id "
                     f"{r.trace.mask_commits} time(s) (it stays a mask and is decoded again)")
    if model.eos_id in r.output:
        lines.append(f"  EOS: prompt {i}: EOS ({model.eos_id}) at generated position "
                     f"{r.output.index(model.eos_id)}; the HF generate() would stop after "
                     f"that block, the dllm sampler (the reference) goes on")
    return lines


def first_difference(ref_ids, got):
    """Text for the first differing generated position, or None."""
    diff = [j for j in range(len(ref_ids)) if got[j] != ref_ids[j]]
    if not diff:
        return None
    j = diff[0]
    return (f"first difference at generated position {j}: mosaic {got[j]}, reference "
            f"{ref_ids[j]}; {len(diff)} position(s) differ")


# ----------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------

@dataclass
class Tally:
    """Prompts run and excluded for near ties, over the whole run."""
    prompts: int = 0
    excluded: int = 0
    lines: list = field(default_factory=list)


def run_case(mosaic, case, models, reference_only, tie_margin, tally):
    """(ok, summary, report lines) of one case."""
    model, model_dir = models[case.model]
    prompts = case_prompts(case, model.vocab)
    threshold = resolve_threshold(model, case, prompts[0])
    refs = [reference_run(model, case, p, threshold, tie_margin) for p in prompts]
    warnings = [w for i, (p, r) in enumerate(zip(prompts, refs))
                for w in warnings_of(i, p, r, model)]
    excluded = sum(r.excluded for r in refs)
    tally.prompts += len(prompts)
    tally.excluded += excluded
    closest = min((r.trace.closest() for r in refs), key=lambda kg: kg[1])
    summary = (f"threshold {threshold:.4g}, ref forwards "
               f"{','.join(str(r.forwards) for r in refs)}, closest {closest[0]} "
               f"{closest[1]:.1e}, routing {min(r.trace.routing for r in refs):.1e}, "
               f"excluded {excluded}/{len(prompts)}")
    if reference_only:
        return not warnings, summary, warnings
    argv = mosaic_argv(mosaic, model_dir, prompts, case, threshold)
    got = parse_output(run_command(argv), prompts, case.gen_length)
    summary += f", mosaic forwards {','.join(str(f) for _, f in got)}"
    lines = []
    for i, (prompt, r, (out, _)) in enumerate(zip(prompts, refs, got)):
        diff = first_difference(r.output, out)
        if r.excluded:
            warnings.append(f"  prompt {i} excluded (near tie): "
                            + (f"differs: {diff}" if diff else "agrees anyway"))
        elif diff:
            lines += [f"  prompt {i} (P={len(prompt)}): {diff}",
                      f"    mosaic    {out}", f"    reference {r.output}"]
    if excluded == len(prompts):
        lines.append("  every prompt on a near tie: nothing left to check")
    if lines:
        lines.append("  command: " + " ".join(argv))
    return not lines, summary, warnings + lines


def build_models(mosaic, workdir, names):
    """{name: (llada2_np model, folder)} of the MODELS named, and the names that failed."""
    models, failed = {}, []
    for name in sorted(names):
        spec = MODELS[name]
        model_dir = os.path.join(workdir, f"model_{name}")
        try:
            cf.make_model(mosaic, spec, model_dir)
            cf.check_model_folder(spec, model_dir)
            model = l2.load_model(model_dir)
            if min(model.mask_id, model.eos_id) < min(PROMPT_ID_LIMIT, model.vocab):
                raise CheckFailure(f"special ids mask {model.mask_id} / eos {model.eos_id} "
                                   f"collide with prompt ids < {PROMPT_ID_LIMIT}")
            models[name] = (model, model_dir)
        except (CheckFailure, ValueError) as e:
            print(f"FAIL model {name}:\n  " + "\n  ".join(str(e).splitlines()))
            failed.append(f"model {name}")
    return models, failed


def select_cases(parser, names):
    if not names:
        return CASES
    names = names.split(",")
    unknown = set(names) - {c.name for c in CASES}
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: {[c.name for c in CASES]}")
    return [c for c in CASES if c.name in names]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mosaic", help="path to the mosaic executable (it also makes the "
                                         "models, so --reference-only needs it too)")
    parser.add_argument("--workdir", help="scratch folder (created)")
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument("--reference-only", action="store_true",
                        help="run only the reference; warnings fail the case")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--tie-margin", type=float, default=TIE_MARGIN,
                        help=f"routing near-tie margin (default {TIE_MARGIN:g})")
    args = parser.parse_args(argv)
    cases = select_cases(parser, args.cases)
    if args.list:
        for c in cases:
            print(f"{c.name:20s} model {c.model}, prompts {list(c.prompts)}, gen "
                  f"{c.gen_length}, B {c.block_length}, steps {c.steps}, threshold "
                  f"{c.threshold}  {c.notes}")
        return 0
    if not args.mosaic or not args.workdir:
        parser.error("--mosaic and --workdir are required (except with --list)")
    mosaic = os.path.abspath(args.mosaic)
    if not os.access(mosaic, os.X_OK):
        print(f"FAIL: mosaic executable not found or not executable: {mosaic}")
        return 1
    os.makedirs(args.workdir, exist_ok=True)
    models, failed = build_models(mosaic, args.workdir, {c.model for c in cases})
    tally = Tally()
    for case in cases:
        if case.model not in models:
            failed.append(case.name)
            continue
        t0 = time.monotonic()
        try:
            ok, summary, lines = run_case(mosaic, case, models, args.reference_only,
                                          args.tie_margin, tally)
        except (CheckFailure, ValueError) as e:
            ok, summary, lines = False, "not run", ["  " + x for x in str(e).splitlines()]
        print(f"{'PASS' if ok else 'FAIL'} {case.name:18s} ({case.notes or '-'}; {summary}; "
              f"{time.monotonic() - t0:.1f} s)")
        for line in lines:
            print(line)
        if not ok:
            failed.append(case.name)
    if tally.prompts:
        print(f"near ties: {tally.excluded} of {tally.prompts} prompts excluded (decision "
              f"gap {l2.NEAR_TIE:g}, routing margin {args.tie_margin:g})")
        if tally.excluded > MAX_EXCLUDED_FRACTION * tally.prompts:
            print(f"FAIL: more than {MAX_EXCLUDED_FRACTION:.0%} of all prompts excluded")
            failed.append("near ties")
    if failed:
        print(f"\n{len(failed)} failure(s): {', '.join(failed)} (models kept in "
              f"{args.workdir})")
        return 1
    print(f"\nall {len(cases)} cases agree token for token")
    return 0


if __name__ == "__main__":
    sys.exit(main())
