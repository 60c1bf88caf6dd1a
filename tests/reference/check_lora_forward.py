#!/usr/bin/python3
"""Cross-implementation test of LoRA adapters: `mosaic forward --adapter` vs the NumPy
reference applying the adapter the PEFT way (unmerged: x W^T + scaling (x A^T) B^T, lora_np).

    /usr/bin/python3 tests/reference/check_lora_forward.py --mosaic build/src/cli/mosaic \
        --workdir /tmp/check_lora [--tol 1e-4]

Every case makes a tiny random base (`mosaic make-test-model`) and a random adapter with
nonzero A and B (make_lora_adapter.py) in one of PEFT's key spellings, checks that the
adapter moves the reference's logits (so agreement is not agreement with the base alone), and
compares every requested row as check_forward.py does:

    err(row) = max |mosaic - ref| / max |ref|   must be <= tol (1e-4)

Exit status 0 when every case passes, 1 otherwise.
"""

import argparse
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_forward  # noqa: E402
import lora_np  # noqa: E402
import make_lora_adapter  # noqa: E402
import reference_forward as ref  # noqa: E402
from cli_runner import CheckFailure, run_command  # noqa: E402

# The adapter must change the logits by at least this much (relative), or the case proves nothing.
MIN_EFFECT = 1e-2


@dataclass
class LoraCase:
    base: check_forward.Case
    targets: tuple
    rank: int
    alpha: float
    keys: str = "peft"       # make_lora_adapter --keys
    dtype: str = "F32"       # the adapter's stored dtype
    rslora: bool = False
    regex: bool = False


def _base(name, family, dtype, seed, kv_heads=2, tied=False):
    return check_forward.Case(name, family, layers=2, hidden=64, heads=4, kv_heads=kv_heads, ffn=96,
                              vocab=1030, dtype=dtype, seed=seed,
                              batches=[[(7, "all")], [(19, [0, 5, 18]), (3, [2, 0])]],
                              extra_args=("--tied",) if tied else ())


CASES = [
    LoraCase(_base("llada_every_projection", "llada", "bf16", 11),
             ("q_proj", "k_proj", "v_proj", "attn_out", "ff_proj", "up_proj", "ff_out"), rank=4, alpha=8),
    LoraCase(_base("dream_attention_default_keys_rslora", "dream", "fp32", 12),
             ("q_proj", "k_proj", "v_proj", "o_proj"), rank=8, alpha=4, keys="default", dtype="BF16",
             rslora=True),
    LoraCase(_base("llada_regex_short_keys", "llada", "fp16", 13, kv_heads=4),
             ("q_proj", "v_proj", "up_proj"), rank=2, alpha=3, keys="short", dtype="F16", regex=True),
    LoraCase(_base("dream_mlp_and_head", "dream", "bf16", 14),
             ("gate_proj", "up_proj", "down_proj", "lm_head"), rank=3, alpha=6),
]


def mosaic_forward(mosaic, model_dir, adapter_dir, seqs, out_path):
    argv = [mosaic, "forward", "--model", model_dir, "--adapter", adapter_dir]
    for ids, rows in seqs:
        argv += ["--ids", ",".join(map(str, ids)), "--rows", ",".join(map(str, rows))]
    argv += ["--logits-out", out_path]
    if os.path.exists(out_path):
        os.remove(out_path)
    run_command(argv)
    return np.load(out_path, allow_pickle=False)


def run_case(mosaic, workdir, case, tol):
    model_dir = os.path.join(workdir, case.base.name)
    adapter_dir = model_dir + "_adapter"
    check_forward.make_model(mosaic, case.base, model_dir)
    make_lora_adapter.write_adapter(model_dir, adapter_dir, case.rank, case.alpha, list(case.targets),
                                    rslora=case.rslora, regex=case.regex, keys=case.keys, dtype=case.dtype,
                                    seed=case.base.seed)
    base = ref.load_model(model_dir)
    adapted = ref.load_model(model_dir)
    count = lora_np.apply_adapter(adapted, lora_np.read_adapter(adapter_dir))
    in_layers = [t for t in case.targets if t != "lm_head"]   # LLaDA's ff_out: the MLP down and the head
    expected = case.base.layers * len(in_layers) + (1 if {"lm_head", "ff_out"} & set(case.targets) else 0)
    if count != expected:
        raise CheckFailure(f"the reference adapted {count} projections, expected {expected}")
    rng = np.random.default_rng(2000 + case.base.seed)
    worst, lines = 0.0, []
    for b, batch in enumerate(case.base.batches):
        seqs = check_forward.make_sequences(case.base, batch, rng)
        ids, rows = seqs[0]
        plain, moved = ref.forward(base, ids, rows), ref.forward(adapted, ids, rows)
        effect = float(np.max(np.abs(moved - plain)) / np.max(np.abs(plain)))
        if effect < MIN_EFFECT:
            raise CheckFailure(f"the adapter changes the reference's logits by only {effect:.2e}")
        got = mosaic_forward(mosaic, model_dir, adapter_dir, seqs, os.path.join(workdir, f"{case.base.name}_{b}.npy"))
        err, failures = check_forward.compare_batch(adapted, seqs, got, tol)
        worst = max(worst, err)
        lines += failures[:8]
    return not lines, worst, lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mosaic", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--tol", type=float, default=1e-4)
    args = parser.parse_args(argv)
    mosaic = os.path.abspath(args.mosaic)
    os.makedirs(args.workdir, exist_ok=True)
    failed = []
    for case in CASES:
        t0 = time.monotonic()
        try:
            ok, worst, lines = run_case(mosaic, args.workdir, case, args.tol)
        except (CheckFailure, ValueError) as e:
            ok, worst, lines = False, float("nan"), ["  " + line for line in str(e).splitlines()]
        print(f"{'PASS' if ok else 'FAIL'} {case.base.name:38s} worst {worst:.3e}  (r {case.rank}, keys "
              f"{case.keys}, {case.dtype} adapter on a {case.base.dtype} base, {time.monotonic() - t0:.1f} s)")
        for line in lines:
            print(line)
        if not ok:
            failed.append(case.base.name)
    if failed:
        print(f"\n{len(failed)} of {len(CASES)} case(s) failed: {', '.join(failed)}")
        return 1
    print(f"\nall {len(CASES)} cases within {args.tol:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
