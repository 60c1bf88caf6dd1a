#!/usr/bin/python3
"""Stand-in for the `mosaic` CLI commands check_moe_forward.py and check_moe_generate.py use
(test helper).

It implements the CLI contract with the NumPy code of this folder so that the plumbing of
check_moe_forward.py (arguments, folder checks, .npy layout, near-tie bookkeeping, report)
and of check_moe_generate.py is tested without Mosaic:

    fake_moe_mosaic.py make-test-model --family llada-moe --preset tiny [--layers N]
        [--hidden H] [--heads A] [--kv-heads B] [--vocab V] [--experts E]
        [--experts-per-token K] [--expert-ffn F] [--dtype bf16|fp16|fp32] [--shards N]
        --seed S --out DIR [--quiet]
    fake_moe_mosaic.py forward --model DIR --ids 1,2,3 --rows 0,2 [--ids .. --rows ..]
        --logits-out FILE.npy
    fake_moe_mosaic.py generate --model DIR --ids 1,2,3 [--ids ..] --gen-length G --steps S
        [the other `mosaic generate` flags of generate_np's parser] --seed N --json

forward runs llada_moe_np in float32; generate runs generate_np's LLaDA sampler on
llada_moe_np.GenerationModel in float32. FAKE_MOSAIC_BUG injects a bug, to check that the
checks notice: renormalize_topk (the k weights divided by their sum), no_qk_norm (q and k not
normalised), fp16_torch_dtype (config.json says float16 whatever was asked); for generate
also shift (position p decoded from row p - 1, Dream's shift), cache_ignored (every step an
exact full forward whatever --cache says; the reported cache mode unchanged) and token (the
last generated id of the last prompt + 1).
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_np as gen  # noqa: E402
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


class _BuggyGeneration(moe.GenerationModel):
    """GenerationModel with a generation bug: "shift" or "cache_ignored"."""

    def __init__(self, model, bug):
        super().__init__(model)
        self.bug = bug

    def forward(self, model, ids, rows):
        if self.bug == "shift":
            rows = [max(int(q) - 1, 0) for q in rows]
        return super().forward(model, ids, rows)

    def forward_rows(self, model, ids, c0, c1, ranges, cache, rows):
        if self.bug == "cache_ignored":
            return self.forward(model, ids, rows)
        if self.bug == "shift":
            rows = [max(int(q) - 1, c0) for q in rows]
        return super().forward_rows(model, ids, c0, c1, ranges, cache, rows)


def generate(argv):
    """`mosaic generate ... --json` through generate_np (its parser is the CLI's)."""
    bug = os.environ.get("FAKE_MOSAIC_BUG", "")
    inject_bug(bug)
    args = gen.build_arg_parser().parse_args(argv)
    model = _BuggyGeneration(moe.load_model(args.model, dtype=np.float32), bug)
    try:
        params = gen.params_from_args(args, model.family)
        ids = gen.special_ids_from_folder(args.model, args.eot_id)
        results = gen.generate_batch(model, args.ids, params, ids)
    except gen.GenerationError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    out = gen.result_json(results)
    if bug == "token":
        out["results"][-1]["output_ids"][-1] += 1
    print(json.dumps(out))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "generate":
        generate(sys.argv[2:])
        return
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
