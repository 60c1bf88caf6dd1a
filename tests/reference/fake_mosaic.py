#!/usr/bin/python3
"""Stand-in for the two `mosaic` CLI commands check_forward.py uses (test helper).

It implements the CLI contract with the NumPy code of this folder so that the plumbing of
check_forward.py (arguments, folders, .npy layout, reporting) is tested without Mosaic:

    fake_mosaic.py make-test-model --family llada|dream --preset tiny [--layers N]
        [--hidden H] [--heads A] [--kv-heads B] [--ffn F] [--vocab V]
        [--dtype bf16|fp16|fp32] [--shards N] --seed S --out DIR
    fake_mosaic.py forward --model DIR --ids 1,2,3 --rows 0,2 [--ids .. --rows ..]
        --logits-out FILE.npy

forward runs the reference in float32. FAKE_MOSAIC_BUG=no_dream_shift or =sorted_rows
injects a bug, to check that check_forward.py notices.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402
from tiny_checkpoint_np import tiny_model  # noqa: E402


def int_list(text):
    return [int(x) for x in text.split(",") if x != ""]


def make_test_model(args):
    config, tensors = tiny_model(args.family, seed=args.seed, layers=args.layers,
                                 hidden=args.hidden, heads=args.heads,
                                 kv_heads=args.kv_heads, ffn=args.ffn, vocab=args.vocab,
                                 rope_theta=5e5 if args.family == "llada" else 1e6)
    dtype = {"bf16": "BF16", "fp16": "F16", "fp32": "F32"}[args.dtype]
    st.save_model_dir(args.out, config, tensors, dtype, shards=args.shards)


def forward(args):
    if len(args.ids) != len(args.rows):
        sys.exit("forward: every --ids needs a --rows")
    model = ref.load_model(args.model, dtype=np.float32)
    bug = os.environ.get("FAKE_MOSAIC_BUG", "")
    if bug == "no_dream_shift":
        model.family = ref.FAMILY_LLADA
    out = []
    for ids, rows in zip(args.ids, args.rows):
        out.append(ref.forward(model, ids, sorted(rows) if bug == "sorted_rows" else rows))
    np.save(args.logits_out, np.concatenate(out).astype(np.float32))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make-test-model")
    make.add_argument("--family", choices=["llada", "dream"], required=True)
    make.add_argument("--preset", choices=["tiny"], default="tiny")
    make.add_argument("--layers", type=int, default=2)
    make.add_argument("--hidden", type=int, default=64)
    make.add_argument("--heads", type=int, default=4)
    make.add_argument("--kv-heads", type=int, default=None)
    make.add_argument("--ffn", type=int, default=128)
    make.add_argument("--vocab", type=int, default=256)
    make.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    make.add_argument("--shards", type=int, default=1)
    make.add_argument("--seed", type=int, required=True)
    make.add_argument("--out", required=True)
    fwd = sub.add_parser("forward")
    fwd.add_argument("--model", required=True)
    fwd.add_argument("--ids", type=int_list, action="append", required=True)
    fwd.add_argument("--rows", type=int_list, action="append", required=True)
    fwd.add_argument("--logits-out", required=True)
    fwd.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.command == "make-test-model":
        make_test_model(args)
    else:
        forward(args)


if __name__ == "__main__":
    main()
