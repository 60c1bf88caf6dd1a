#!/usr/bin/python3
"""Stand-in for the two `mosaic` CLI commands check_moe_forward.py uses (test helper).

It implements the CLI contract with the NumPy code of this folder so that the plumbing of
check_moe_forward.py (arguments, folder checks, .npy layout, near-tie bookkeeping, report) is
tested without Mosaic:

    fake_moe_mosaic.py make-test-model --family llada-moe --preset tiny [--layers N]
        [--hidden H] [--heads A] [--kv-heads B] [--vocab V] [--experts E]
        [--experts-per-token K] [--expert-ffn F] [--dtype bf16|fp16|fp32] [--shards N]
        --seed S --out DIR [--quiet]
    fake_moe_mosaic.py forward --model DIR --ids 1,2,3 --rows 0,2 [--ids .. --rows ..]
        --logits-out FILE.npy

forward runs llada_moe_np in float32. FAKE_MOSAIC_BUG injects a bug, to check that
check_moe_forward.py notices: renormalize_topk (the k weights divided by their sum),
no_qk_norm (q and k not normalised), fp16_torch_dtype (config.json says float16 whatever
was asked).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llada_moe_np as moe  # noqa: E402
import safetensors_np as st  # noqa: E402
from tiny_checkpoint_np import tiny_moe_config, tiny_moe_tensors  # noqa: E402

TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def int_list(text):
    return [int(x) for x in text.split(",") if x != ""]


def make_test_model(args):
    bug = os.environ.get("FAKE_MOSAIC_BUG", "")
    config = tiny_moe_config(layers=args.layers, hidden=args.hidden, heads=args.heads,
                             kv_heads=args.kv_heads, experts=args.experts,
                             experts_per_token=args.experts_per_token,
                             expert_ffn=args.expert_ffn, vocab=args.vocab,
                             rope_theta=50000.0, eps=1e-5)
    # The tiny preset's special ids (mask 1000, eos 1001), as Mosaic's preset has them.
    config.update(mask_token_id=1000, eos_token_id=1001, pad_token_id=1001,
                  max_position_embeddings=8192,
                  torch_dtype="float16" if bug == "fp16_torch_dtype"
                  else TORCH_DTYPE[args.dtype])
    tensors = tiny_moe_tensors(config, args.seed)
    dtype = {"bf16": "BF16", "fp16": "F16", "fp32": "F32"}[args.dtype]
    st.save_model_dir(args.out, config, tensors, dtype, shards=args.shards)


def inject_bug(bug):
    """Replace one piece of llada_moe_np with a wrong one (this process only)."""
    if bug == "renormalize_topk":
        right = moe.top_k_experts

        def renormalised(probs, k):
            experts, weights = right(probs, k)
            return experts, weights / weights.sum(axis=-1, keepdims=True)
        moe.top_k_experts = renormalised
    elif bug == "no_qk_norm":
        moe.qk_norm = lambda x, weight, eps: x


def forward(args):
    if len(args.ids) != len(args.rows):
        sys.exit("forward: every --ids needs a --rows")
    inject_bug(os.environ.get("FAKE_MOSAIC_BUG", ""))
    model = moe.load_model(args.model, dtype=np.float32)
    out = [moe.forward(model, ids, rows) for ids, rows in zip(args.ids, args.rows)]
    np.save(args.logits_out, np.concatenate(out).astype(np.float32))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make-test-model")
    make.add_argument("--family", choices=["llada-moe"], required=True)
    make.add_argument("--preset", choices=["tiny"], default="tiny")
    make.add_argument("--layers", type=int, default=2)
    make.add_argument("--hidden", type=int, default=128)
    make.add_argument("--heads", type=int, default=4)
    make.add_argument("--kv-heads", type=int, default=4)
    make.add_argument("--vocab", type=int, default=1024)
    make.add_argument("--experts", type=int, default=8)
    make.add_argument("--experts-per-token", type=int, default=2)
    make.add_argument("--expert-ffn", type=int, default=96)
    make.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    make.add_argument("--shards", type=int, default=1)
    make.add_argument("--seed", type=int, required=True)
    make.add_argument("--out", required=True)
    make.add_argument("--quiet", action="store_true")
    fwd = sub.add_parser("forward")
    fwd.add_argument("--model", required=True)
    fwd.add_argument("--ids", type=int_list, action="append", required=True)
    fwd.add_argument("--rows", type=int_list, action="append", required=True)
    fwd.add_argument("--logits-out", required=True)
    args = parser.parse_args()
    if args.command == "make-test-model":
        make_test_model(args)
    else:
        forward(args)


if __name__ == "__main__":
    main()
