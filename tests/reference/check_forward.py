#!/usr/bin/python3
"""Cross-implementation test: Mosaic's logits vs the independent NumPy reference.

    /usr/bin/python3 tests/reference/check_forward.py --mosaic build/src/cli/mosaic \
        --workdir /tmp/check_forward [--cases NAME,...] [--tol 1e-4]

For every case it asks Mosaic for a random tiny checkpoint (`mosaic make-test-model`),
checks the folder is what was asked for (family, sizes, stored dtype, shard count), reads it
with safetensors_np, runs `mosaic forward` on one or more batches and compares every
requested row with reference_forward (float64, each sequence on its own):

    err(row) = max |mosaic - ref| / max |ref|   must be <= tol (1e-4)

Vocabulary sizes are >= 1024 so the tiny preset's special ids (mask 1000, eos 1001) stay
in range, and all but one are not multiples of 64, so vocabulary tiles have a ragged tail.

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
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402

STORED_DTYPE = {"bf16": "BF16", "fp16": "F16", "fp32": "F32"}


@dataclass
class Case:
    """One random checkpoint and the batches run on it.

    batches: list of batches; a batch is a list of (length, rows) sequences sent in ONE
    `mosaic forward` call. rows may be "all" for every position.
    """
    name: str
    family: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    dtype: str
    seed: int
    batches: list
    shards: int = 1
    notes: str = ""
    extra_args: tuple = ()  # further make-test-model flags (--tied, --qkv-bias, --rope-theta)
    forward_args: tuple = ()  # further `mosaic forward` flags (--tensor-parallel N)


CASES = [
    Case("llada_mha_bf16", "llada", layers=2, hidden=64, heads=4, kv_heads=4, ffn=128,
         vocab=1024, dtype="bf16", seed=1,
         batches=[[(1, [0])], [(2, [0, 1])], [(7, [0, 3, 6])], [(64, "all")]],
         notes="MHA, L = 1, 2, 7, 64"),
    Case("llada_gqa_fp32_sharded", "llada", layers=2, hidden=128, heads=8, kv_heads=2,
         ffn=192, vocab=1031, dtype="fp32", seed=2, shards=3,
         batches=[[(33, [0, 1, 16, 31, 32])], [(7, "all")]],
         notes="n_kv_heads < n_heads, 3 shards, odd vocab"),
    Case("dream_gqa2_fp16", "dream", layers=2, hidden=64, heads=4, kv_heads=2, ffn=96,
         vocab=1113, dtype="fp16", seed=3,
         batches=[[(1, [0])], [(2, [1, 0])], [(7, [0, 1, 6])], [(33, [0, 17, 32])]],
         notes="GQA 2, logit shift incl. rows 0 and 1"),
    Case("dream_gqa7_bf16_sharded", "dream", layers=2, hidden=224, heads=14, kv_heads=2,
         ffn=320, vocab=1100, dtype="bf16", seed=4, shards=3,
         batches=[[(64, [0, 1, 2, 31, 62, 63])], [(33, "all")]],
         notes="7 q heads per kv head like Dream-7B, 3 shards"),
    Case("llada_batch_mixed_lengths", "llada", layers=2, hidden=96, heads=6, kv_heads=3,
         ffn=160, vocab=1061, dtype="bf16", seed=5,
         batches=[[(7, [6, 0, 3]), (1, [0]), (33, [32, 0, 15]), (2, [0, 1]),
                   (64, [0, 63, 40])],
                  [(7, [6, 0, 3])], [(33, [32, 0, 15])]],
         notes="5 sequences of lengths 7,1,33,2,64 in one call; unsorted rows"),
    Case("dream_batch_mixed_lengths", "dream", layers=2, hidden=112, heads=7, kv_heads=1,
         ffn=144, vocab=1089, dtype="fp32", seed=6,
         batches=[[(64, [63, 0]), (2, [1]), (33, [0, 1, 2, 32]), (1, [0]), (7, "all")]],
         notes="5 sequences in one call, 7 q heads on 1 kv head"),
    Case("llada_tied_qkv_bias", "llada", layers=2, hidden=64, heads=4, kv_heads=2, ffn=96,
         vocab=1030, dtype="bf16", seed=7,
         batches=[[(19, "all"), (4, [3, 0])]],
         extra_args=("--tied", "--qkv-bias", "--rope-theta", "10000"),
         notes="weight_tying, include_qkv_bias, rope_theta 1e4"),
    Case("dream_tied", "dream", layers=3, hidden=64, heads=4, kv_heads=1, ffn=80,
         vocab=1025, dtype="fp32", seed=8,
         batches=[[(12, "all")]], extra_args=("--tied",),
         notes="tie_word_embeddings, 3 layers"),
    # Tensor parallelism (docs/design/tensor-parallel.md): the ranks' shards, all-reduces and the
    # vocabulary columns side by side must give the one-device logits.
    Case("llada_tp2_batch", "llada", layers=2, hidden=64, heads=4, kv_heads=2, ffn=128,
         vocab=1062, dtype="bf16", seed=9,
         batches=[[(7, [6, 0, 3]), (1, [0]), (33, [32, 0, 15])], [(64, "all")]],
         forward_args=("--tensor-parallel", "2"),
         notes="2 ranks, 3 sequences in one call, ragged vocabulary tiles"),
    Case("dream_tp4_shared_kv", "dream", layers=2, hidden=64, heads=4, kv_heads=2, ffn=96,
         vocab=1112, dtype="fp32", seed=10,
         batches=[[(2, [1, 0]), (33, [0, 1, 2, 32])]],
         forward_args=("--tensor-parallel", "4"),
         notes="4 ranks on 2 kv heads (pairs share one), biases, logit shift"),
    Case("llada_tp4_tied_bias", "llada", layers=2, hidden=64, heads=4, kv_heads=4, ffn=96,
         vocab=1032, dtype="bf16", seed=11,
         batches=[[(19, "all"), (4, [3, 0])]],
         extra_args=("--tied", "--qkv-bias"), forward_args=("--tensor-parallel", "4"),
         notes="4 ranks, tied embedding split by vocabulary, q/k/v biases"),
    # Context parallelism (docs/design/context-parallel.md): each rank's rows against every rank's
    # keys and values, ghost rows past the batch's end, predictions put back in order.
    Case("llada_cp3_batch", "llada", layers=2, hidden=96, heads=6, kv_heads=3, ffn=160,
         vocab=1061, dtype="bf16", seed=12,
         batches=[[(7, [6, 0, 3]), (1, [0]), (33, [32, 0, 15]), (2, [0, 1])], [(64, "all")], [(1, [0])]],
         forward_args=("--context-parallel", "3"),
         notes="3 ranks, sequences across rank boundaries, unsorted rows, L = 1 (ghost-only ranks)"),
    Case("dream_cp2_shift", "dream", layers=2, hidden=64, heads=4, kv_heads=2, ffn=96,
         vocab=1113, dtype="fp32", seed=13,
         batches=[[(2, [1, 0]), (33, [0, 1, 2, 32])], [(12, "all")]],
         forward_args=("--context-parallel", "2"),
         notes="2 ranks, logit shift (row p - 1 may lie on the rank before)"),
]


def make_model(mosaic, case, out_dir):
    """`mosaic make-test-model` for the case into out_dir (emptied first)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    argv = [mosaic, "make-test-model", "--family", case.family, "--preset", "tiny",
            "--layers", str(case.layers), "--hidden", str(case.hidden),
            "--heads", str(case.heads), "--kv-heads", str(case.kv_heads),
            "--ffn", str(case.ffn), "--vocab", str(case.vocab), "--dtype", case.dtype,
            "--seed", str(case.seed), "--out", out_dir]
    if case.shards > 1:
        argv += ["--shards", str(case.shards)]
    argv += list(case.extra_args)
    run_command(argv)


def check_model_folder(case, model_dir):
    """The written folder has the asked family, sizes, stored dtype and shard layout."""
    config = st.load_config(model_dir)
    hp = ref.hparams_from_config(config)
    want = {"family": case.family, "n_layers": case.layers, "hidden": case.hidden,
            "n_heads": case.heads, "n_kv_heads": case.kv_heads, "ffn": case.ffn,
            "vocab": case.vocab}
    wrong = {k: (hp[k], v) for k, v in want.items() if hp[k] != v}
    if wrong:
        raise CheckFailure("make-test-model wrote a config that differs from the request "
                           "(field: got, asked): " + ", ".join(
                               f"{k}: {g!r}, {a!r}" for k, (g, a) in wrong.items()))
    dtypes = set(st.tensor_dtypes(model_dir).values())
    if dtypes != {STORED_DTYPE[case.dtype]}:
        raise CheckFailure(f"tensors stored as {sorted(dtypes)}, asked --dtype {case.dtype}")
    shard_files = st.model_files(model_dir)
    if case.shards > 1:
        if not os.path.exists(os.path.join(model_dir, st.INDEX_NAME)):
            raise CheckFailure(f"--shards {case.shards} wrote no {st.INDEX_NAME}")
        expected = {f"model-{k:05d}-of-{case.shards:05d}.safetensors"
                    for k in range(1, case.shards + 1)}
        got = {os.path.basename(p) for p in shard_files}
        if got != expected:
            raise CheckFailure(f"shard files {sorted(got)}, expected {sorted(expected)}")
    elif list(map(os.path.basename, shard_files)) != [st.SINGLE_NAME]:
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


def mosaic_forward(mosaic, model_dir, seqs, out_path, extra=()):
    """One `mosaic forward` call for the whole batch; returns its float32 logits."""
    argv = [mosaic, "forward", "--model", model_dir, *extra]
    for ids, rows in seqs:
        argv += ["--ids", ",".join(map(str, ids)), "--rows", ",".join(map(str, rows))]
    argv += ["--logits-out", out_path]
    if os.path.exists(out_path):
        os.remove(out_path)
    run_command(argv)
    if not os.path.exists(out_path):
        raise CheckFailure(f"mosaic forward wrote no {out_path}")
    return np.load(out_path, allow_pickle=False)


def compare_batch(model, seqs, got, tol):
    """Per-row errors of a batch; returns (worst error, report lines of failing rows)."""
    total_rows = sum(len(rows) for _, rows in seqs)
    if got.dtype != np.float32:
        raise CheckFailure(f"logits dtype {got.dtype}, expected float32")
    if got.shape != (total_rows, model.vocab):
        raise CheckFailure(f"logits shape {got.shape}, expected ({total_rows}, {model.vocab})")
    if not np.all(np.isfinite(got)):
        raise CheckFailure("logits contain NaN or Inf")
    worst, failures, start = 0.0, [], 0
    for s, (ids, rows) in enumerate(seqs):
        want = ref.forward(model, ids, rows)
        for k, row in enumerate(rows):
            m, r = got[start + k].astype(np.float64), want[k]
            err = float(np.max(np.abs(m - r)) / max(np.max(np.abs(r)), 1e-30))
            worst = max(worst, err)
            if not err <= tol:
                failures.append(
                    f"    seq {s} (L={len(ids)}) row {row}: err {err:.3e}; argmax mosaic "
                    f"{int(np.argmax(m))} ref {int(np.argmax(r))}; max|ref| "
                    f"{np.max(np.abs(r)):.3g}")
        start += len(rows)
    return worst, failures


def run_case(mosaic, workdir, case, tol):
    """Make the checkpoint, run every batch, compare; returns (ok, worst error, lines)."""
    model_dir = os.path.join(workdir, case.name)
    make_model(mosaic, case, model_dir)
    check_model_folder(case, model_dir)
    model = ref.load_model(model_dir)
    rng = np.random.default_rng(1000 + case.seed)
    worst, lines = 0.0, []
    for b, batch in enumerate(case.batches):
        seqs = make_sequences(case, batch, rng)
        got = mosaic_forward(mosaic, model_dir, seqs,
                             os.path.join(workdir, f"{case.name}_{b}.npy"), case.forward_args)
        err, failures = compare_batch(model, seqs, got, tol)
        worst = max(worst, err)
        if failures:
            lengths = ",".join(str(len(ids)) for ids, _ in seqs)
            lines.append(f"  batch {b} (lengths {lengths}): {len(failures)} row(s) over "
                         f"{tol:g}")
            lines += failures[:8] + ([f"    ... {len(failures) - 8} more"]
                                     if len(failures) > 8 else [])
    return not lines, worst, lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mosaic", required=True, help="path to the mosaic executable")
    parser.add_argument("--workdir", required=True, help="scratch folder (created)")
    parser.add_argument("--tol", type=float, default=1e-4,
                        help="max per-row max|diff| / max|ref| (default 1e-4)")
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
            ok, worst, lines = run_case(mosaic, args.workdir, case, args.tol)
        except (CheckFailure, ValueError) as e:   # ValueError: reader / reference rejects
            ok, worst, lines = False, float("nan"), ["  " + line for line in
                                                     str(e).splitlines()]
        status = "PASS" if ok else "FAIL"
        print(f"{status} {case.name:28s} worst {worst:.3e}  ({case.notes}; "
              f"{case.dtype}, {time.monotonic() - t0:.1f} s)")
        for line in lines:
            print(line)
        if not ok:
            failed.append(case.name)
    if failed:
        print(f"\n{len(failed)} of {len(cases)} case(s) failed: {', '.join(failed)} "
              f"(tolerance {args.tol:g}; models kept in {args.workdir})")
        return 1
    print(f"\nall {len(cases)} cases within {args.tol:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
