#!/usr/bin/env python3
"""Fast-dLLM's own dual-cache generation, run unmodified, as the baseline of Mosaic's cached decoding.

NVlabs/Fast-dLLM's LLaDA code (v1/llada: generate.py and model/, upstream commit a9b81e4) is
fetched into an ignored folder by bench/fetch_fast_dllm.sh and never committed; this script only
imports it, loads the same Hugging Face folder Mosaic loads (LLaDA-8B's configuration with random
bf16 weights from `mosaic make-test-model`), and times `generate_with_dual_cache` on random prompts.

  fast_dllm_dual.py --fast-dllm DIR/v1/llada --model MODEL --prompt-len 1024 --gen-length 256 \
                    --steps 256 --block-length 32 --batch 1,8 [--json OUT.json]

Prints one row per batch size: wall seconds (CUDA-synchronised), forwards (Fast-dLLM's nfe), ms
per forward, generated tokens per second.

Fast-dLLM's model class was written for transformers 4.x; the GPU machine has transformers 5, whose
from_pretrained expects attributes that class never sets. Rather than touch its code, the harness
builds the model the way its own __init__ does (LLaDAModelLM(LLaDAConfig(config.json)), bf16) and
loads the folder's safetensors into it with load_state_dict (every tensor and every parameter), and gives the
config the one transformers-4 attribute its forward reads (use_return_dict) when transformers 5
lacks it.
"""
import argparse
import json
import os
import sys
import time

import torch


def load_model(folder, config, config_class, model_class):
    from safetensors.torch import load_file
    hf_config = config_class(**{k: v for k, v in config.items() if k not in ("architectures", "auto_map")})
    try:
        hf_config.use_return_dict  # noqa: B018  (transformers 4 has it)
    except AttributeError:
        hf_config.use_return_dict = True
    torch.set_default_dtype(torch.bfloat16)
    model = model_class(hf_config, init_params=False)
    torch.set_default_dtype(torch.float32)
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    state = {}
    for name in files:
        state.update(load_file(os.path.join(folder, name)))
    loaded = model.load_state_dict({k: v.to(torch.bfloat16) for k, v in state.items()}, strict=False)
    parameters = {name for name, _ in model.named_parameters()}
    missing = [k for k in loaded.missing_keys if k in parameters]
    if loaded.unexpected_keys or missing:  # every weight of the folder, and every parameter, once
        raise SystemExit(f"fast_dllm_dual: checkpoint and model disagree: unexpected {loaded.unexpected_keys[:5]}, "
                         f"missing {missing[:5]}")
    return model.to("cuda").eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fast-dllm", required=True, help="the fetched v1/llada folder")
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompt-len", type=int, default=1024)
    parser.add_argument("--gen-length", type=int, default=256)
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--block-length", type=int, default=32)
    parser.add_argument("--batch", default="1,8")
    parser.add_argument("--warmup", type=int, default=1, help="untimed generations first")
    parser.add_argument("--json")
    args = parser.parse_args()

    sys.path.insert(0, args.fast_dllm)
    from generate import generate_with_dual_cache  # noqa: E402  (Fast-dLLM's, unmodified)
    from model.configuration_llada import LLaDAConfig  # noqa: E402
    from model.modeling_llada import LLaDAModelLM  # noqa: E402

    config = json.load(open(f"{args.model}/config.json"))
    model = load_model(args.model, config, LLaDAConfig, LLaDAModelLM)
    mask_id, vocab = config.get("mask_token_id", 126336), config["vocab_size"]
    rows = []
    for batch in [int(b) for b in args.batch.split(",")]:
        generator = torch.Generator().manual_seed(args.prompt_len)
        prompt = torch.randint(0, vocab, (batch, args.prompt_len), generator=generator)
        prompt[prompt == mask_id] = 0
        prompt = prompt.to("cuda")
        for _ in range(args.warmup):
            generate_with_dual_cache(model, prompt, steps=args.steps, gen_length=args.gen_length,
                                     block_length=args.block_length, temperature=0.0, mask_id=mask_id)
        torch.cuda.synchronize()
        start = time.perf_counter()
        _, nfe = generate_with_dual_cache(model, prompt, steps=args.steps, gen_length=args.gen_length,
                                          block_length=args.block_length, temperature=0.0, mask_id=mask_id)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        row = {"batch": batch, "prompt_length": args.prompt_len, "gen_length": args.gen_length, "steps": args.steps,
               "block_length": args.block_length, "seconds": seconds, "forwards": int(nfe),
               "ms_per_forward": 1e3 * seconds / int(nfe),
               "tokens_per_second": batch * args.gen_length / seconds}
        rows.append(row)
        print(f"Fast-dLLM dual cache: batch {batch}, prompt {args.prompt_len}, {args.gen_length} tokens in "
              f"{args.steps} steps, block {args.block_length}: {seconds:.3f} s, {nfe} forwards, "
              f"{row['ms_per_forward']:.2f} ms per forward, {row['tokens_per_second']:.1f} tokens/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"fast_dllm": rows}, f, indent=2)


if __name__ == "__main__":
    main()
