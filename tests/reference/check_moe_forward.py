#!/usr/bin/python3
"""Cross-implementation test of LLaDA-MoE: Mosaic's logits vs the independent NumPy reference.

    /usr/bin/python3 tests/reference/check_moe_forward.py --mosaic build/src/cli/mosaic \
        --workdir /tmp/check_moe_forward [--cases NAME,...] [--tol 1e-4] [--tie-margin 1e-6]

For every case it asks Mosaic for a random tiny LLaDA-MoE checkpoint (`mosaic make-test-model
--family llada-moe`), checks the folder is what was asked for (config values, the exact
tensor set and shapes, stored dtype, shard files), runs `mosaic forward` on batches of
several sequences with subsets of rows, and compares every requested row with llada_moe_np
(float64, each sequence on its own):

    err(row) = max |mosaic - ref| / max |ref|   must be <= tol (1e-4)

Routing near-ties. Mosaic computes in fp32, the reference in float64; where a row's k-th and
(k+1)-th router probabilities are within a hair of each other the two may legitimately pick
different experts, and since every row's MoE output feeds every other row's attention in the
later layers, that changes the whole sequence. So a sequence whose smallest routing margin
(llada_moe_np.routing_margins: (p_(k) - p_(k+1)) / p_(k), over every layer and row) is below
--tie-margin (1e-6) is left out of the tolerance check; such sequences are counted and
reported, and a case fails if more than a quarter of its sequences had to be left out.

Exit status 0 when every case passes, 1 otherwise (with a report of what failed).
"""

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_runner import CheckFailure, run_command  # noqa: E402
import llada_moe_np as moe  # noqa: E402
import safetensors_np as st  # noqa: E402

STORED_DTYPE = {"bf16": "BF16", "fp16": "F16", "fp32": "F32"}
TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}

# The tiny preset as the brief of `make-test-model --family llada-moe --preset tiny` states it.
TINY_PRESET = dict(hidden=128, layers=2, heads=4, kv_heads=4, experts=8, top_k=2,
                   expert_ffn=96, vocab=1024, mask=1000, eos=1001, rope_theta=50000.0,
                   eps=1e-5)

# Config values every llada-moe folder must carry (moe-models.md §1.2 and the brief's list).
FIXED_CONFIG = {"architectures": [moe.ARCHITECTURE], "model_type": "llada",
                "norm_topk_prob": False, "qk_layernorm": True, "partial_rotary_factor": 1.0,
                "rope_scaling": None, "attention_bias": False, "clip_qkv": None,
                "tie_word_embeddings": False, "hidden_act": "silu",
                "shared_expert_intermediate_size": None,
                "moe_router_enable_expert_bias": False}
PRESENT_CONFIG = ("max_position_embeddings", "pad_token_id", "eos_token_id", "mask_token_id")

# A case fails if more than this share of its sequences sit on a routing near-tie.
MAX_EXCLUDED_FRACTION = 0.25


@dataclass
class Case:
    """One random checkpoint and the batches run on it.

    batches: list of batches; a batch is a list of (length, rows) sequences sent in ONE
    `mosaic forward` call; rows may be "all". overrides: False = the bare tiny preset (no
    size flags), so the preset itself is what is checked.
    """
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    experts: int
    top_k: int
    expert_ffn: int
    vocab: int
    dtype: str
    seed: int
    batches: list
    shards: int = 1
    overrides: bool = True
    notes: str = ""


_P = TINY_PRESET
CASES = [
    Case("moe_tiny_preset_bf16", layers=_P["layers"], hidden=_P["hidden"], heads=_P["heads"],
         kv_heads=_P["kv_heads"], experts=_P["experts"], top_k=_P["top_k"],
         expert_ffn=_P["expert_ffn"], vocab=_P["vocab"], dtype="bf16", seed=1,
         overrides=False,
         batches=[[(1, [0])], [(2, [0, 1])], [(7, [0, 3, 6])], [(64, "all")],
                  [(7, [6, 0, 3]), (33, [32, 0, 15]), (2, [1, 0]), (19, "all")]],
         notes="the bare tiny preset, 8 experts top 2, L = 1..64"),
    Case("moe_gqa_fp32_odd_vocab", layers=2, hidden=64, heads=4, kv_heads=2, experts=8,
         top_k=2, expert_ffn=48, vocab=1061, dtype="fp32", seed=2,
         batches=[[(33, [0, 1, 16, 31, 32]), (5, "all"), (1, [0])],
                  [(64, [63, 0, 40]), (12, [11, 2])], [(7, "all")]],
         notes="4 q heads on 2 kv heads, vocab 1061"),
    Case("moe_all_experts_chosen", layers=2, hidden=64, heads=4, kv_heads=1, experts=4,
         top_k=4, expert_ffn=40, vocab=1030, dtype="fp16", seed=3,
         batches=[[(9, "all"), (2, [1]), (40, [0, 39, 20])], [(64, [0, 63])],
                  [(17, [16, 3, 0])]],
         notes="top 4 of 4: routing cannot flip; MQA"),
    Case("moe_3layers_16experts_top4_sharded", layers=3, hidden=96, heads=6, kv_heads=2,
         experts=16, top_k=4, expert_ffn=32, vocab=1100, dtype="bf16", seed=4, shards=2,
         batches=[[(64, [0, 1, 2, 31, 62, 63]), (33, "all")],
                  [(7, [6, 0, 3]), (1, [0]), (20, [19, 0, 7]), (3, "all")]],
         notes="3 layers, 16 experts top 4, 2 shards"),
]


def make_model(mosaic, case, out_dir):
    """`mosaic make-test-model --family llada-moe` for the case into out_dir (emptied first)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    argv = [mosaic, "make-test-model", "--family", "llada-moe", "--preset", "tiny"]
    if case.overrides:
        argv += ["--layers", str(case.layers), "--hidden", str(case.hidden),
                 "--heads", str(case.heads), "--kv-heads", str(case.kv_heads),
                 "--vocab", str(case.vocab), "--experts", str(case.experts),
                 "--experts-per-token", str(case.top_k), "--expert-ffn", str(case.expert_ffn)]
    argv += ["--dtype", case.dtype, "--seed", str(case.seed), "--out", out_dir, "--quiet"]
    if case.shards > 1:
        argv += ["--shards", str(case.shards)]
    run_command(argv)


def check_model_folder(case, model_dir):
    """The written folder is the asked LLaDA-MoE: config values, tensors, dtype, shards."""
    config = st.load_config(model_dir)
    try:
        hp = moe.hparams_from_config(config)
    except ValueError as e:
        raise CheckFailure(f"make-test-model wrote a config the reference refuses: {e}")
    want = {"n_layers": case.layers, "hidden": case.hidden, "n_heads": case.heads,
            "n_kv_heads": case.kv_heads, "n_experts": case.experts,
            "experts_per_token": case.top_k, "expert_ffn": case.expert_ffn,
            "vocab": case.vocab, "tied": False}
    wrong = {k: (hp[k], v) for k, v in want.items() if hp[k] != v}
    fixed = dict(FIXED_CONFIG, moe_layer_freq=[1] * case.layers,
                 torch_dtype=TORCH_DTYPE[case.dtype])
    if not case.overrides:
        fixed.update(rope_theta=_P["rope_theta"], rms_norm_eps=_P["eps"],
                     mask_token_id=_P["mask"], eos_token_id=_P["eos"])
    wrong.update({k: (config.get(k, "<absent>"), v) for k, v in fixed.items()
                  if config.get(k, "<absent>") != v})
    wrong.update({k: ("<absent>", "present") for k in PRESENT_CONFIG if k not in config})
    mask = config.get("mask_token_id")
    if isinstance(mask, int) and not 0 <= mask < case.vocab:
        wrong["mask_token_id"] = (mask, f"in [0, {case.vocab})")
    if wrong:
        raise CheckFailure("make-test-model wrote a config that differs from the request "
                           "(field: got, asked): " + ", ".join(
                               f"{k}: {g!r}, {a!r}" for k, (g, a) in wrong.items()))
    dtypes = st.tensor_dtypes(model_dir)
    expected = moe.expected_shapes(hp)
    missing = sorted(set(expected) - set(dtypes))
    extra = sorted(set(dtypes) - set(expected))
    if missing or extra:
        raise CheckFailure(f"tensor set differs from moe-models.md §1.3: missing "
                           f"{missing[:6]}, unexpected {extra[:6]}")
    if set(dtypes.values()) != {STORED_DTYPE[case.dtype]}:
        raise CheckFailure(f"tensors stored as {sorted(set(dtypes.values()))}, asked "
                           f"--dtype {case.dtype}")
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


def make_sequences(case, batch, rng):
    """Concrete (ids, rows) per sequence; ids random in [0, vocab) with both ends used."""
    seqs = []
    for length, rows in batch:
        ids = rng.integers(0, case.vocab, size=length)
        ids[0] = case.vocab - 1
        if length > 2:
            ids[-1] = 0
        rows = list(range(length)) if rows == "all" else list(rows)
        seqs.append(([int(i) for i in ids], rows))
    return seqs


def mosaic_forward(mosaic, model_dir, seqs, out_path):
    """One `mosaic forward` call for the whole batch; returns its float32 logits."""
    argv = [mosaic, "forward", "--model", model_dir]
    for ids, rows in seqs:
        argv += ["--ids", ",".join(map(str, ids)), "--rows", ",".join(map(str, rows))]
    argv += ["--logits-out", out_path]
    if os.path.exists(out_path):
        os.remove(out_path)
    run_command(argv)
    if not os.path.exists(out_path):
        raise CheckFailure(f"mosaic forward wrote no {out_path}")
    return np.load(out_path, allow_pickle=False)


@dataclass
class SequenceResult:
    """One sequence of a batch: its worst row error, routing margin and failing rows."""
    worst: float
    margin: float
    excluded: bool
    failures: list


def compare_batch(model, seqs, got, tol, tie_margin):
    """Per-sequence results of one batch (list of SequenceResult)."""
    total_rows = sum(len(rows) for _, rows in seqs)
    if got.dtype != np.float32:
        raise CheckFailure(f"logits dtype {got.dtype}, expected float32")
    if got.shape != (total_rows, model.vocab):
        raise CheckFailure(f"logits shape {got.shape}, expected ({total_rows}, {model.vocab})")
    if not np.all(np.isfinite(got)):
        raise CheckFailure("logits contain NaN or Inf")
    results, start = [], 0
    for s, (ids, rows) in enumerate(seqs):
        want, routing = moe.forward_with_routing(model, ids, rows)
        margin = moe.min_routing_margin(model, ids, routing)
        excluded = margin < tie_margin
        worst, failures = 0.0, []
        for k, row in enumerate(rows):
            m, r = got[start + k].astype(np.float64), want[k]
            err = float(np.max(np.abs(m - r)) / max(np.max(np.abs(r)), 1e-30))
            worst = max(worst, err)
            if not err <= tol and not excluded:
                failures.append(
                    f"    seq {s} (L={len(ids)}) row {row}: err {err:.3e}; argmax mosaic "
                    f"{int(np.argmax(m))} ref {int(np.argmax(r))}; max|ref| "
                    f"{np.max(np.abs(r)):.3g}; routing margin {margin:.2e}")
        results.append(SequenceResult(worst, margin, excluded, failures))
        start += len(rows)
    return results


def excluded_too_many(n_excluded, n_sequences):
    """More than MAX_EXCLUDED_FRACTION of a case's sequences left out: the case proves little."""
    return n_excluded > MAX_EXCLUDED_FRACTION * n_sequences


def run_case(mosaic, workdir, case, tol, tie_margin):
    """Make the checkpoint, run every batch, compare.

    Returns (ok, worst error over the checked sequences, report lines, summary dict)."""
    model_dir = os.path.join(workdir, case.name)
    make_model(mosaic, case, model_dir)
    check_model_folder(case, model_dir)
    model = moe.load_model(model_dir)
    rng = np.random.default_rng(1000 + case.seed)
    worst, lines, n_seqs, n_excluded, min_margin = 0.0, [], 0, 0, np.inf
    rows_over_tol = 0
    for b, batch in enumerate(case.batches):
        seqs = make_sequences(case, batch, rng)
        got = mosaic_forward(mosaic, model_dir, seqs,
                             os.path.join(workdir, f"{case.name}_{b}.npy"))
        results = compare_batch(model, seqs, got, tol, tie_margin)
        failures = [f for r in results for f in r.failures]
        for s, r in enumerate(results):
            n_seqs += 1
            min_margin = min(min_margin, r.margin)
            if r.excluded:
                n_excluded += 1
                lines.append(f"  note: batch {b} seq {s} (L={len(seqs[s][0])}) left out: "
                             f"routing margin {r.margin:.2e} < {tie_margin:g} (its worst "
                             f"err {r.worst:.3e})")
            else:
                worst = max(worst, r.worst)
        rows_over_tol += len(failures)
        if failures:
            lengths = ",".join(str(len(ids)) for ids, _ in seqs)
            lines.append(f"  batch {b} (lengths {lengths}): {len(failures)} row(s) over "
                         f"{tol:g}")
            lines += failures[:8] + ([f"    ... {len(failures) - 8} more"]
                                     if len(failures) > 8 else [])
    too_many = excluded_too_many(n_excluded, n_seqs)
    if too_many:
        lines.append(f"  {n_excluded} of {n_seqs} sequences on a routing near-tie (more than "
                     f"{MAX_EXCLUDED_FRACTION:.0%}): too few left to check")
    if case.top_k == case.experts and n_excluded:
        lines.append("  top k == num_experts cannot tie, yet sequences were left out")
        too_many = True
    ok = not too_many and rows_over_tol == 0
    return ok, worst, lines, dict(sequences=n_seqs, excluded=n_excluded, margin=min_margin)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mosaic", required=True, help="path to the mosaic executable")
    parser.add_argument("--workdir", required=True, help="scratch folder (created)")
    parser.add_argument("--tol", type=float, default=1e-4,
                        help="max per-row max|diff| / max|ref| (default 1e-4)")
    parser.add_argument("--tie-margin", type=float, default=1e-6,
                        help="leave out sequences whose smallest relative gap between the "
                             "k-th and (k+1)-th router probability is below this "
                             "(default 1e-6)")
    parser.add_argument("--cases", default="",
                        help="comma-separated case names to run (default: all)")
    args = parser.parse_args(argv)

    cases = CASES
    if args.cases:
        names = args.cases.split(",")
        unknown = set(names) - {c.name for c in CASES}
        if unknown:
            parser.error(f"unknown cases {sorted(unknown)}; known: "
                         f"{[c.name for c in CASES]}")
        cases = [c for c in CASES if c.name in names]
    mosaic = os.path.abspath(args.mosaic)
    if not os.access(mosaic, os.X_OK):
        print(f"FAIL: mosaic executable not found or not executable: {mosaic}")
        return 1
    os.makedirs(args.workdir, exist_ok=True)

    failed = []
    for case in cases:
        t0 = time.monotonic()
        try:
            ok, worst, lines, summary = run_case(mosaic, args.workdir, case, args.tol,
                                                 args.tie_margin)
        except (CheckFailure, ValueError) as e:   # ValueError: reader / reference rejects
            ok, worst, summary = False, float("nan"), None
            lines = ["  " + line for line in str(e).splitlines()]
        status = "PASS" if ok else "FAIL"
        ties = (f"near-ties {summary['excluded']}/{summary['sequences']}, min margin "
                f"{summary['margin']:.1e}" if summary else "not run")
        print(f"{status} {case.name:36s} worst {worst:.3e}  ({case.notes}; {case.dtype}; "
              f"{ties}; {time.monotonic() - t0:.1f} s)")
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
