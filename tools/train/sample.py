#!/usr/bin/python3
"""LLaDA's generate() with low-confidence remasking, in PyTorch (shared/reference/sampling.md §1).

    /usr/bin/python3 tools/train/sample.py --model models/<name> --prompt "And it came to pass"

Canvas = prompt + gen_length masks, cut into blocks of block_length; each block gets
steps / num_blocks steps; step i of a block commits quota[i] of the block's masked positions
(base = M // S, the first M % S steps one more), the ones whose predicted token has the
highest softmax probability. temperature > 0 samples the token by LLaDA's Gumbel-max in
float64 (exp(logits) / (-ln u)^T); temperature 0 takes the argmax. No CFG, no EOS options.
"""

import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def transfer_quota(masked, steps):
    base, extra = divmod(masked, steps)
    return [base + 1 if i < extra else base for i in range(steps)]


@torch.no_grad()
def generate(model, prompt_ids, mask_id, gen_length=64, steps=64, block_length=32,
             temperature=0.0, generator=None):
    """Returns the canvas ids (prompt + generated) as a list of ints."""
    if gen_length % block_length or steps % (gen_length // block_length):
        raise ValueError("gen_length must be a multiple of block_length and steps of the "
                         "number of blocks")
    device = next(model.parameters()).device
    p = len(prompt_ids)
    x = torch.full((1, p + gen_length), mask_id, dtype=torch.long, device=device)
    x[0, :p] = torch.tensor(prompt_ids, dtype=torch.long, device=device)
    num_blocks = gen_length // block_length
    per_block = steps // num_blocks
    for b in range(num_blocks):
        lo, hi = p + b * block_length, p + (b + 1) * block_length
        quota = transfer_quota(int((x[0, lo:hi] == mask_id).sum()), per_block)
        for i in range(per_block):
            mask_index = x == mask_id
            logits = model(x).float()
            if temperature > 0:
                noise = torch.rand(logits.shape, dtype=torch.float64, device=device,
                                   generator=generator)
                noisy = logits.double().exp() / (-torch.log(noise)) ** temperature
            else:
                noisy = logits
            x0 = noisy.argmax(dim=-1)
            confidence = torch.softmax(logits, dim=-1).gather(-1, x0[..., None])[..., 0]
            confidence[:, hi:] = -float("inf")
            x0 = torch.where(mask_index, x0, x)
            confidence = torch.where(mask_index, confidence,
                                     torch.full_like(confidence, -float("inf")))
            if quota[i] > 0:
                chosen = torch.topk(confidence[0], quota[i]).indices
                x[0, chosen] = x0[0, chosen]
    return x[0].tolist()


def main():
    import byte_bpe
    from hf_folder import load_folder

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompt", action="append", required=True)
    parser.add_argument("--gen-length", type=int, default=64)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--block-length", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model = load_folder(args.model)
    tok = byte_bpe.Tokenizer.load(os.path.join(args.model, "tokenizer.json"))
    mask_id = model.args.mask_token_id
    g = torch.Generator().manual_seed(args.seed)
    for prompt in args.prompt:
        ids = tok.encode(prompt)
        out = generate(model, ids, mask_id, args.gen_length, args.steps, args.block_length,
                       args.temperature, g)
        print(prompt + "|" + tok.decode(out[len(ids):]))


if __name__ == "__main__":
    main()
