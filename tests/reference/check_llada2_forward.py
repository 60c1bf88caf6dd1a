#!/usr/bin/python3
"""Cross-implementation test of LLaDA 2.x (LLaDA2MoeModelLM): Mosaic's block-causal logits vs
the independent NumPy reference (llada2_np.py).

    /usr/bin/python3 tests/reference/check_llada2_forward.py --mosaic build/src/cli/mosaic \
        --workdir /tmp/check_llada2_forward [--cases NAME,...] [--tol 1e-4] \
        [--tie-margin 1e-5]

For every case it asks Mosaic for a random tiny LLaDA 2.x checkpoint

    mosaic make-test-model --family llada2 --preset tiny [--layers N --hidden H --heads NH
        --kv-heads NKV --vocab V --experts E --experts-per-token K --expert-ffn F --ffn I
        --groups G --topk-groups TG --shared-experts S --dense-layers D]
        --dtype bf16|fp16|fp32 --seed S --out DIR --quiet [--shards N]

checks the folder is what was asked for (config values, the exact tensor set and shapes of
moe-models.md §2.2, the stored dtype -- expert_bias always F32 --, the shard files), runs

    mosaic forward --model DIR --block-length B --ids 1,2,3 --rows 0,2 [--ids .. --rows ..]
        --logits-out OUT.npy

on batches of several sequences (one --block-length per call) and compares every requested
row with llada2_np.forward (float64, each sequence on its own, same block length):

    err(row) = max |mosaic - ref| / max |ref|   must be <= tol (1e-4)

Routing near-ties. Mosaic computes in fp32, the reference in float64; where a row's
group-limited top-k choice nearly ties (llada2_np.routing_margins: the gap between the k-th
and (k+1)-th selection score among the kept groups' experts, or between the last kept and
the first dropped group score when swapping them changes the choice, in selection-score
units) the two may legitimately choose different experts, and the change spreads to every
row through attention. A sequence whose smallest margin (over every MoE layer and row) is
below --tie-margin (1e-5) is left out of the tolerance check, counted and reported; a case
fails if more than a quarter of its sequences had to be left out.

Block-causal, not full. Every case but one also computes the full-attention reference for
the rows that see fewer keys than the whole sequence (rows outside the last block) and
requires Mosaic to be clearly away from it somewhere (err > 10 tol), so the case can tell a
block-causal forward from a full one; the case llada2_block_covers_all uses blocks >= every
length, where the two are the same, and has that comparison excluded.

Exit status 0 when every case passes, 1 otherwise (with a report of what failed).
"""

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_moe_forward import (MAX_EXCLUDED_FRACTION, excluded_too_many,  # noqa: E402
                               make_sequences)
from cli_runner import CheckFailure, run_command  # noqa: E402
import llada2_np as l2  # noqa: E402
import safetensors_np as st  # noqa: E402

STORED_DTYPE = {"bf16": "BF16", "fp16": "F16", "fp32": "F32"}
TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
EXPERT_BIAS_DTYPE = "F32"          # whatever --dtype says
TIE_MARGIN = 1e-5
FULL_DISTINCT = 10.0               # a discriminating row is > FULL_DISTINCT * tol from full

# `make-test-model --family llada2 --preset tiny` with no size flags (the brief's values).
TINY_PRESET = dict(hidden=128, layers=3, heads=4, kv_heads=2, ffn=256, expert_ffn=64,
                   experts=16, top_k=4, groups=4, topk_groups=2, shared=1, dense=1,
                   vocab=1024)
# size name -> make-test-model flag
SIZE_FLAGS = {"layers": "--layers", "hidden": "--hidden", "heads": "--heads",
              "kv_heads": "--kv-heads", "vocab": "--vocab", "experts": "--experts",
              "top_k": "--experts-per-token", "expert_ffn": "--expert-ffn", "ffn": "--ffn",
              "groups": "--groups", "topk_groups": "--topk-groups",
              "shared": "--shared-experts", "dense": "--dense-layers"}

# Config values every llada2 tiny folder carries, whatever the size flags say.
FIXED_CONFIG = {"architectures": [l2.ARCHITECTURE], "model_type": "llada2_moe",
                "norm_topk_prob": True, "score_function": "sigmoid",
                "moe_router_enable_expert_bias": True, "use_qkv_bias": False,
                "use_bias": False, "tie_word_embeddings": False, "rope_scaling": None,
                "routed_scaling_factor": 2.5, "partial_rotary_factor": 0.5,
                "rope_theta": 600000.0, "rms_norm_eps": 1e-6,
                "max_position_embeddings": 4096}
# ... the special ids of the bare preset (a --vocab may move them)
PRESET_IDS = {"mask_token_id": 1000, "eos_token_id": 1001, "pad_token_id": 1001}
ABSENT_CONFIG = ("use_qk_norm",)   # the HF default (true) is what is tested


@dataclass
class Case:
    """One random checkpoint and the batches run on it.

    sizes: the size flags given (empty: the bare tiny preset, so the preset itself is what
    is checked). batches: list of (block_length, [(length, rows), ...]); one batch is ONE
    `mosaic forward` call; rows may be "all". full_excluded: every block covers every
    sequence, so block-causal is full attention and that comparison is excluded."""
    name: str
    dtype: str
    seed: int
    batches: list
    sizes: dict = field(default_factory=dict)
    shards: int = 1
    full_excluded: bool = False
    notes: str = ""

    def size(self, key):
        """A size of the checkpoint: the flag given, else the preset's."""
        return self.sizes.get(key, TINY_PRESET[key])


CASES = [
    Case("llada2_tiny_preset_bf16", "bf16", 1,
         batches=[(4, [(1, [0]), (7, "all"), (33, [0, 3, 4, 31, 32])]),
                  (32, [(64, "all"), (19, [18, 0, 5]), (2, [1, 0])]),
                  (4, [(64, [0, 1, 2, 3, 4, 62, 63])]),
                  (32, [(31, "all"), (45, [0, 31, 32, 44])]),
                  (1, [(9, "all")])],
         notes="the bare preset: 16 experts top 4, 4 groups keep 2, B 4 / 32 / 1"),
    Case("llada2_gqa_fp32_b8", "fp32", 2,
         sizes=dict(layers=2, hidden=128, heads=8, kv_heads=2, experts=8, top_k=2,
                    groups=4, topk_groups=2, expert_ffn=32, ffn=192, vocab=1061),
         batches=[(8, [(17, "all"), (8, [0, 7]), (40, [0, 8, 15, 39])]),
                  (8, [(64, [63, 0, 31, 32])])],
         notes="8 q heads on 2 kv heads, head_dim 16, vocab 1061"),
    Case("llada2_plain_topk", "bf16", 3,
         sizes=dict(groups=1, topk_groups=1),
         batches=[(16, [(33, "all"), (5, [4, 0])]), (16, [(64, [0, 15, 16, 63])])],
         notes="n_group 1: plain top-4 of 16"),
    Case("llada2_2dense_sharded_fp16", "fp16", 4, shards=3,
         sizes=dict(layers=3, dense=2, ffn=160),
         batches=[(4, [(13, "all"), (1, [0])]), (32, [(50, [0, 31, 32, 49])])],
         notes="first_k_dense_replace 2, 3 shards"),
    Case("llada2_no_shared", "bf16", 5, sizes=dict(layers=2, shared=0),
         batches=[(8, [(11, "all"), (20, [0, 7, 8, 19])])],
         notes="num_shared_experts 0"),
    Case("llada2_block_covers_all", "bf16", 6, full_excluded=True,
         batches=[(64, [(64, [0, 63]), (17, "all")]), (48, [(33, [0, 32])])],
         notes="B >= L: block-causal == full, full comparison excluded"),
]


# ----------------------------------------------------------------------------------------
# The checkpoint
# ----------------------------------------------------------------------------------------

def make_model(mosaic, case, out_dir):
    """`mosaic make-test-model --family llada2 --preset tiny` for the case into out_dir
    (emptied first)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    argv = [mosaic, "make-test-model", "--family", "llada2", "--preset", "tiny"]
    for key, value in case.sizes.items():
        argv += [SIZE_FLAGS[key], str(value)]
    argv += ["--dtype", case.dtype, "--seed", str(case.seed), "--out", out_dir, "--quiet"]
    if case.shards > 1:
        argv += ["--shards", str(case.shards)]
    run_command(argv)


def config_differences(case, config, hp):
    """{field: (got, asked)} where the written config differs from the request."""
    asked = {"n_layers": case.size("layers"), "hidden": case.size("hidden"),
             "n_heads": case.size("heads"), "n_kv_heads": case.size("kv_heads"),
             "head_dim": case.size("hidden") // case.size("heads"),
             "n_experts": case.size("experts"), "experts_per_token": case.size("top_k"),
             "expert_ffn": case.size("expert_ffn"), "n_group": case.size("groups"),
             "topk_group": case.size("topk_groups"), "n_shared": case.size("shared"),
             "first_dense": case.size("dense"), "vocab": case.size("vocab"),
             "rotary_dim": case.size("hidden") // case.size("heads") // 2, "tied": False}
    wrong = {k: (hp[k], v) for k, v in asked.items() if hp[k] != v}
    fixed = dict(FIXED_CONFIG, torch_dtype=TORCH_DTYPE[case.dtype],
                 intermediate_size=case.size("ffn"),
                 head_dim=case.size("hidden") // case.size("heads"))
    if not case.sizes:
        fixed.update(PRESET_IDS)
    wrong.update({k: (config.get(k, "<absent>"), v) for k, v in fixed.items()
                  if config.get(k, "<absent>") != v})
    wrong.update({k: (config[k], "<absent>") for k in ABSENT_CONFIG if k in config})
    for key in ("mask_token_id", "eos_token_id"):
        value = config.get(key)
        if not isinstance(value, int) or not 0 <= value < case.size("vocab"):
            wrong[key] = (value, f"an id in [0, {case.size('vocab')})")
    return wrong


def check_tensors(case, model_dir, hp):
    """The exact tensor set and shapes of §2.2, the stored dtypes, the shard files."""
    dtypes = st.tensor_dtypes(model_dir)
    expected = l2.expected_shapes(hp)
    missing = sorted(set(expected) - set(dtypes))
    extra = sorted(set(dtypes) - set(expected))
    if missing or extra:
        raise CheckFailure(f"tensor set differs from moe-models.md §2.2: missing "
                           f"{missing[:6]}, unexpected {extra[:6]}")
    shapes = {}
    for path in st.model_files(model_dir):
        header, _, _, _ = st.read_header(path)
        shapes.update({n: tuple(info["shape"]) for n, info in header.items()})
    wrong_shape = [f"{n} {list(shapes[n])} (expected {list(s)})"
                   for n, s in expected.items() if shapes.get(n) != tuple(s)]
    if wrong_shape:
        raise CheckFailure(f"tensor shapes differ: {wrong_shape[:4]}")
    want = {n: EXPERT_BIAS_DTYPE if n.endswith(".mlp.gate.expert_bias")
            else STORED_DTYPE[case.dtype] for n in expected}
    wrong_dtype = sorted(f"{n}: {dtypes[n]} (expected {d})" for n, d in want.items()
                         if dtypes[n] != d)
    if wrong_dtype:
        raise CheckFailure(f"{len(wrong_dtype)} tensor(s) stored in another dtype (--dtype "
                           f"{case.dtype}, expert_bias {EXPERT_BIAS_DTYPE}): "
                           f"{wrong_dtype[:4]}")
    check_shards(case, model_dir)


def check_shards(case, model_dir):
    shard_files = {os.path.basename(p) for p in st.model_files(model_dir)}
    if case.shards > 1:
        if not os.path.exists(os.path.join(model_dir, st.INDEX_NAME)):
            raise CheckFailure(f"--shards {case.shards} wrote no {st.INDEX_NAME}")
        want_files = {f"model-{k:05d}-of-{case.shards:05d}.safetensors"
                      for k in range(1, case.shards + 1)}
        if shard_files != want_files:
            raise CheckFailure(f"shard files {sorted(shard_files)}, expected "
                               f"{sorted(want_files)}")
    elif shard_files != {st.SINGLE_NAME}:
        raise CheckFailure(f"expected one {st.SINGLE_NAME}, got {sorted(shard_files)}")


def check_model_folder(case, model_dir):
    """The written folder is the asked LLaDA 2.x: config values, tensors, dtypes, shards.
    Returns the reference's hyper-parameters."""
    config = st.load_config(model_dir)
    try:
        hp = l2.hparams_from_config(config)
    except ValueError as e:
        raise CheckFailure(f"make-test-model wrote a config the reference refuses: {e}")
    wrong = config_differences(case, config, hp)
    if wrong:
        raise CheckFailure("make-test-model wrote a config that differs from the request "
                           "(field: got, asked): " + ", ".join(
                               f"{k}: {g!r}, {a!r}" for k, (g, a) in wrong.items()))
    check_tensors(case, model_dir, hp)
    return hp


# ----------------------------------------------------------------------------------------
# Forward and comparison
# ----------------------------------------------------------------------------------------

def mosaic_forward(mosaic, model_dir, block_length, seqs, out_path):
    """One `mosaic forward --block-length B` call for the whole batch; its float32 logits."""
    argv = [mosaic, "forward", "--model", model_dir, "--block-length", str(block_length)]
    for ids, rows in seqs:
        argv += ["--ids", ",".join(map(str, ids)), "--rows", ",".join(map(str, rows))]
    argv += ["--logits-out", out_path]
    if os.path.exists(out_path):
        os.remove(out_path)
    run_command(argv)
    if not os.path.exists(out_path):
        raise CheckFailure(f"mosaic forward wrote no {out_path}")
    return np.load(out_path, allow_pickle=False)


def row_error(got, want):
    """max |got - want| / max |want| of one row (float64)."""
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


@dataclass
class SequenceResult:
    """One sequence of a batch: worst row error, routing margin, failing rows, and the
    largest distance from the full-attention reference over its rows outside the last
    block (None when it has none)."""
    worst: float
    margin: float
    excluded: bool
    failures: list
    full_distance: float = None


def compare_sequence(model, ids, rows, got, block_length, tol, tie_margin):
    """SequenceResult of one sequence's Mosaic rows `got` [len(rows), vocab]."""
    want, routing = l2.forward_with_routing(model, ids, rows, block_length)
    margin = l2.min_routing_margin(model, ids, block_length, routing)
    excluded = margin < tie_margin
    worst, failures = 0.0, []
    for k, row in enumerate(rows):
        m, r = got[k].astype(np.float64), want[k]
        err = row_error(m, r)
        worst = max(worst, err)
        if not err <= tol and not excluded:
            failures.append(f"    seq L={len(ids)} B={block_length} row {row}: err "
                            f"{err:.3e}; argmax mosaic {int(np.argmax(m))} ref "
                            f"{int(np.argmax(r))}; max|ref| {np.max(np.abs(r)):.3g}; "
                            f"routing margin {margin:.2e}")
    ends = l2.key_ends(len(ids), block_length)
    partial = [k for k, row in enumerate(rows) if ends[row] < len(ids)]
    full_distance = None
    if partial and not excluded:
        full = l2.forward(model, ids, [rows[k] for k in partial], None)
        full_distance = max(row_error(got[k].astype(np.float64), full[j])
                            for j, k in enumerate(partial))
    return SequenceResult(worst, margin, excluded, failures, full_distance)


def compare_batch(model, block_length, seqs, got, tol, tie_margin):
    """Per-sequence results of one batch (list of SequenceResult)."""
    total_rows = sum(len(rows) for _, rows in seqs)
    if got.dtype != np.float32:
        raise CheckFailure(f"logits dtype {got.dtype}, expected float32")
    if got.shape != (total_rows, model.vocab):
        raise CheckFailure(f"logits shape {got.shape}, expected ({total_rows}, {model.vocab})")
    if not np.all(np.isfinite(got)):
        raise CheckFailure("logits contain NaN or Inf")
    results, start = [], 0
    for ids, rows in seqs:
        results.append(compare_sequence(model, ids, rows, got[start:start + len(rows)],
                                        block_length, tol, tie_margin))
        start += len(rows)
    return results


@dataclass
class CaseTally:
    """A case's running totals over its batches."""
    worst: float = 0.0
    sequences: int = 0
    excluded: int = 0
    margin: float = np.inf
    rows_over_tol: int = 0
    full_distance: float = None
    lines: list = field(default_factory=list)

    def add(self, b, seqs, results, tol, tie_margin):
        for s, r in enumerate(results):
            self.sequences += 1
            self.margin = min(self.margin, r.margin)
            if r.excluded:
                self.excluded += 1
                self.lines.append(f"  note: batch {b} seq {s} (L={len(seqs[s][0])}) left out: "
                                  f"routing margin {r.margin:.2e} < {tie_margin:g} (its worst "
                                  f"err {r.worst:.3e})")
            else:
                self.worst = max(self.worst, r.worst)
            if r.full_distance is not None:
                self.full_distance = max(self.full_distance or 0.0, r.full_distance)
        failures = [f for r in results for f in r.failures]
        self.rows_over_tol += len(failures)
        if failures:
            lengths = ",".join(str(len(ids)) for ids, _ in seqs)
            self.lines.append(f"  batch {b} (lengths {lengths}): {len(failures)} row(s) over "
                              f"{tol:g}")
            self.lines += failures[:8] + ([f"    ... {len(failures) - 8} more"]
                                          if len(failures) > 8 else [])


def full_attention_verdict(case, tally, tol):
    """Report lines (empty = fine) of the block-causal vs full-attention discrimination."""
    if case.full_excluded:
        if tally.full_distance is not None:
            return ["  a case marked full_excluded has rows outside the last block"]
        return []
    if tally.full_distance is None:
        return ["  no row outside its sequence's last block: the case cannot tell "
                "block-causal from full attention"]
    if tally.full_distance <= FULL_DISTINCT * tol:
        return [f"  mosaic is within {tally.full_distance:.2e} of the FULL-attention "
                f"reference on every row outside the last block (needs > "
                f"{FULL_DISTINCT * tol:g} somewhere): the case cannot tell block-causal "
                f"from full attention"]
    return []


def run_case(mosaic, workdir, case, tol, tie_margin):
    """Make the checkpoint, run every batch, compare.

    Returns (ok, worst error over the checked sequences, report lines, CaseTally)."""
    model_dir = os.path.join(workdir, case.name)
    make_model(mosaic, case, model_dir)
    check_model_folder(case, model_dir)
    model = l2.load_model(model_dir)
    rng = np.random.default_rng(1000 + case.seed)
    tally = CaseTally()
    for b, (block_length, batch) in enumerate(case.batches):
        seqs = make_sequences(model, batch, rng)
        got = mosaic_forward(mosaic, model_dir, block_length, seqs,
                             os.path.join(workdir, f"{case.name}_{b}.npy"))
        tally.add(b, seqs, compare_batch(model, block_length, seqs, got, tol, tie_margin),
                  tol, tie_margin)
    bad = excluded_too_many(tally.excluded, tally.sequences)
    if bad:
        tally.lines.append(f"  {tally.excluded} of {tally.sequences} sequences on a routing "
                           f"near-tie (more than {MAX_EXCLUDED_FRACTION:.0%}): too few left "
                           f"to check")
    verdict = full_attention_verdict(case, tally, tol)
    tally.lines += verdict
    ok = not bad and not verdict and tally.rows_over_tol == 0
    return ok, tally.worst, tally.lines, tally


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
    parser.add_argument("--mosaic", required=True, help="path to the mosaic executable")
    parser.add_argument("--workdir", required=True, help="scratch folder (created)")
    parser.add_argument("--tol", type=float, default=1e-4,
                        help="max per-row max|diff| / max|ref| (default 1e-4)")
    parser.add_argument("--tie-margin", type=float, default=TIE_MARGIN,
                        help="leave out sequences whose smallest routing margin (selection-"
                             f"score units) is below this (default {TIE_MARGIN:g})")
    parser.add_argument("--cases", default="",
                        help="comma-separated case names to run (default: all)")
    args = parser.parse_args(argv)
    cases = select_cases(parser, args.cases)
    mosaic = os.path.abspath(args.mosaic)
    if not os.access(mosaic, os.X_OK):
        print(f"FAIL: mosaic executable not found or not executable: {mosaic}")
        return 1
    os.makedirs(args.workdir, exist_ok=True)

    failed = []
    for case in cases:
        t0 = time.monotonic()
        try:
            ok, worst, lines, tally = run_case(mosaic, args.workdir, case, args.tol,
                                               args.tie_margin)
        except (CheckFailure, ValueError) as e:   # ValueError: reader / reference rejects
            ok, worst, tally = False, float("nan"), None
            lines = ["  " + line for line in str(e).splitlines()]
        if tally is None:
            extra = "not run"
        else:
            full = "excluded" if case.full_excluded else (
                f"{tally.full_distance:.1e}" if tally.full_distance is not None else "-")
            extra = (f"near-ties {tally.excluded}/{tally.sequences}, min margin "
                     f"{tally.margin:.1e}, vs full {full}")
        print(f"{'PASS' if ok else 'FAIL'} {case.name:28s} worst {worst:.3e}  ({case.notes}; "
              f"{case.dtype}; {extra}; {time.monotonic() - t0:.1f} s)")
        for line in lines:
            print(line)
        if not ok:
            failed.append(case.name)
    if failed:
        print(f"\n{len(failed)} of {len(cases)} case(s) failed: {', '.join(failed)} "
              f"(tolerance {args.tol:g}, tie margin {args.tie_margin:g}; models kept in "
              f"{args.workdir})")
        return 1
    print(f"\nall {len(cases)} cases within {args.tol:g} (tie margin {args.tie_margin:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
