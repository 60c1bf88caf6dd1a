#!/usr/bin/python3
"""Stand-in for the `mosaic` CLI commands check_llada2_forward.py and check_llada2_generate.py
use (test helper).

It implements the CLI contract those checks expect with the NumPy code of this folder, so
that their plumbing (arguments, folder checks, .npy layout, near-tie bookkeeping, the
full-attention discrimination, JSON reading, report) is tested without Mosaic:

    fake_llada2_mosaic.py make-test-model --family llada2 --preset tiny [--layers N]
        [--hidden H] [--heads NH] [--kv-heads NKV] [--vocab V] [--experts E]
        [--experts-per-token K] [--expert-ffn F] [--ffn I] [--groups G] [--topk-groups TG]
        [--shared-experts S] [--dense-layers D] [--dtype bf16|fp16|fp32] [--shards N]
        --seed S --out DIR [--quiet]
    fake_llada2_mosaic.py forward --model DIR --block-length B --ids 1,2,3 --rows 0,2
        [--ids .. --rows ..] --logits-out FILE.npy
    fake_llada2_mosaic.py generate --model DIR --ids 1,2,3 [--ids ..] --gen-length N
        --block-length B --steps S --threshold T --temperature 0 --json

make-test-model writes the tiny preset of the brief (hidden 128, 3 layers, 4 heads on 2 kv
heads, 16 experts top 4 in 4 groups keep 2, one shared expert, layer 0 dense, ...) with
the tensors of test_llada2_reference_self.tiny_tensors, every tensor in --dtype except
expert_bias (always F32). forward runs llada2_np in float32; generate runs llada2_np.generate
in float32 and prints {"results": [{"prompt_ids", "output_ids" (the first gen_length
generated ids), "forwards", "steps"}]}.

FAKE_MOSAIC_BUG injects a bug, to check that the checks notice: perturb (one logit of each
call's first row moved by 1e-2 of the row's largest), full_attention (--block-length
ignored), no_expert_bias (selection without the bias), bias_bf16 (expert_bias stored as
--dtype), token (the last generated id of the last prompt + 1).
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llada2_np as l2  # noqa: E402
import safetensors_np as st  # noqa: E402
from test_llada2_reference_self import tiny_config, tiny_tensors  # noqa: E402

TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
STORED = {"bf16": "BF16", "fp16": "F16", "fp32": "F32"}


def int_list(text):
    return [int(x) for x in text.split(",") if x != ""]


def preset_config(args):
    """The tiny preset's config.json with the size flags applied."""
    config = tiny_config(layers=args.layers, hidden=args.hidden, heads=args.heads,
                         kv_heads=args.kv_heads, experts=args.experts,
                         experts_per_token=args.experts_per_token,
                         expert_ffn=args.expert_ffn, ffn=args.ffn, groups=args.groups,
                         topk_groups=args.topk_groups, shared=args.shared_experts,
                         dense=args.dense_layers, vocab=args.vocab, rope_theta=600000,
                         eps=1e-6, rotary=0.5, scaling=2.5, mask=1000, eos=1001)
    config.update(max_position_embeddings=4096, torch_dtype=TORCH_DTYPE[args.dtype])
    for key in ("norm_head", "router_dtype", "use_sliding_window", "sliding_window"):
        del config[key]
    return config


def save_file(path, tensors, dtype_of):
    """safetensors_np.save_file with a dtype per tensor (dtype_of(name))."""
    header, chunks, offset = {}, [], 0
    for name, values in tensors.items():
        raw = st.encode_tensor(values, dtype_of(name))
        header[name] = {"dtype": dtype_of(name), "shape": list(np.shape(values)),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    raw_header = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw_header += b" " * ((-(8 + len(raw_header))) % 8)
    with open(path, "wb") as f:
        f.write(len(raw_header).to_bytes(8, "little"))
        f.write(raw_header)
        for raw in chunks:
            f.write(raw)


def save_folder(out, config, tensors, dtype_of, shards):
    """config.json and one file, or `shards` files plus the index (as save_model_dir)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    if shards <= 1:
        save_file(os.path.join(out, st.SINGLE_NAME), tensors, dtype_of)
        return
    names, weight_map = list(tensors), {}
    for k in range(shards):
        shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        save_file(os.path.join(out, shard), {n: tensors[n] for n in names[k::shards]},
                  dtype_of)
        weight_map.update({n: shard for n in names[k::shards]})
    with open(os.path.join(out, st.INDEX_NAME), "w", encoding="utf-8") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)


def make_test_model(args, bug):
    config = preset_config(args)
    tensors = tiny_tensors(config, args.seed)

    def dtype_of(name):
        if name.endswith("expert_bias") and bug != "bias_bf16":
            return "F32"
        return STORED[args.dtype]
    save_folder(args.out, config, tensors, dtype_of, args.shards)


def inject_bug(bug):
    """Replace one piece of llada2_np with a wrong one (this process only)."""
    if bug == "full_attention":
        l2.key_ends = lambda length, block_length: np.full(length, length, dtype=np.int64)
    elif bug == "no_expert_bias":
        right = l2.route

        def unbiased(model, mlp, m):
            return right(model, l2.MoeMlp(**{**vars(mlp),
                                             "expert_bias": np.zeros_like(mlp.expert_bias)}),
                         m)
        l2.route = unbiased


def forward(args, bug):
    if len(args.ids) != len(args.rows):
        sys.exit("forward: every --ids needs a --rows")
    inject_bug(bug)
    model = l2.load_model(args.model, dtype=np.float32)
    out = np.concatenate([l2.forward(model, ids, rows, args.block_length)
                          for ids, rows in zip(args.ids, args.rows)]).astype(np.float32)
    if bug == "perturb":
        out[0, 3] += 1e-2 * np.max(np.abs(out[0]))
    np.save(args.logits_out, out)


def generate(args, bug):
    if args.temperature != 0:
        sys.exit("generate: the fake does temperature 0 only")
    inject_bug(bug)
    model = l2.load_model(args.model, dtype=np.float32)
    results = []
    for prompt in args.ids:
        canvas, forwards = l2.generate(model, prompt, args.gen_length, args.block_length,
                                       args.steps, args.threshold)
        out = [int(t) for t in canvas[len(prompt):len(prompt) + args.gen_length]]
        results.append({"prompt_ids": prompt, "output_ids": out, "forwards": forwards,
                        "steps": forwards})
    if bug == "token":
        results[-1]["output_ids"][-1] += 1
    print(json.dumps({"results": results}))


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make-test-model")
    make.add_argument("--family", choices=["llada2"], required=True)
    make.add_argument("--preset", choices=["tiny"], default="tiny")
    for flag, default in (("--layers", 3), ("--hidden", 128), ("--heads", 4),
                          ("--kv-heads", 2), ("--vocab", 1024), ("--experts", 16),
                          ("--experts-per-token", 4), ("--expert-ffn", 64), ("--ffn", 256),
                          ("--groups", 4), ("--topk-groups", 2), ("--shared-experts", 1),
                          ("--dense-layers", 1), ("--shards", 1)):
        make.add_argument(flag, type=int, default=default)
    make.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    make.add_argument("--seed", type=int, required=True)
    make.add_argument("--out", required=True)
    make.add_argument("--quiet", action="store_true")
    fwd = sub.add_parser("forward")
    fwd.add_argument("--model", required=True)
    fwd.add_argument("--block-length", type=int, required=True)
    fwd.add_argument("--ids", type=int_list, action="append", required=True)
    fwd.add_argument("--rows", type=int_list, action="append", required=True)
    fwd.add_argument("--logits-out", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--model", required=True)
    gen.add_argument("--ids", type=int_list, action="append", required=True)
    gen.add_argument("--gen-length", type=int, required=True)
    gen.add_argument("--block-length", type=int, required=True)
    gen.add_argument("--steps", type=int, required=True)
    gen.add_argument("--threshold", type=float, required=True)
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--json", action="store_true", required=True)
    return parser


def main():
    args = build_parser().parse_args()
    bug = os.environ.get("FAKE_MOSAIC_BUG", "")
    {"make-test-model": make_test_model, "forward": forward,
     "generate": generate}[args.command](args, bug)


if __name__ == "__main__":
    main()
