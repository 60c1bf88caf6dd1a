#!/usr/bin/python3
"""How approximate Fast-dLLM's prefix and dual caches are, on the built-in model (CPU).

For every held-out chapter of the KJV corpus (validation and test books: tools/train/prepare_corpus.py),
its first words are a prompt; each prompt is generated with --cache none, prefix and dual under the
same options (greedy; one token a step by LLaDA's schedule, and Fast-dLLM's threshold rule). For
each cached generation it reports

  - token agreement with the uncached generation: the share of generated positions holding the
    same token, and the share of prompts whose whole generation is the same;
  - the mean log-likelihood per generated token under the model *without* a cache, block by
    block as the generation was decoded: for block b, the canvas with blocks b.. masked, and
    log p(token) at block b's positions (one uncached forward per block).

    bench/cache_quality.py --corpus /tmp/kjv-corpus [--model models/kjv-llada-12m] [--json OUT]

Needs the mosaic Python module (PYTHONPATH=build/python) and numpy.
"""
import argparse
import json
import os
import sys

import numpy as np

import mosaic

MODES = ("none", "prefix", "dual")


def prompts_of(corpus, words):
    """The first `words` words of every held-out chapter (validation, then test)."""
    prompts = []
    for split in ("validation", "test"):
        with open(os.path.join(corpus, f"{split}.txt")) as f:
            for line in f:
                text = " ".join(line.split()[:words])
                if text:
                    prompts.append(text)
    return prompts


def log_likelihood(engine, prompt_ids, output_ids, block, mask_id):
    """Mean log p(token) over the generated positions, block by block without a cache."""
    total, count = 0.0, 0
    P, G = len(prompt_ids), len(output_ids)
    for begin in range(0, G, block):
        canvas = list(prompt_ids) + list(output_ids[:begin]) + [mask_id] * (G - begin)
        rows = list(range(P + begin, P + min(begin + block, G)))
        logits = np.asarray(engine.forward(canvas, rows), dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        for i, row in enumerate(rows):
            total += log_probs[i, output_ids[row - P]]
            count += 1
    return total / count


def measure(engine, prompts, options, mask_id, label):
    block = options["block_length"]
    results = {mode: engine.generate(prompts, chat=False, cache=mode, **options) for mode in MODES}
    rows = []
    for mode in MODES:
        same_tokens = same_prompts = tokens = 0
        likelihoods, forwards = [], 0
        for reference, result in zip(results["none"], results[mode]):
            agree = sum(a == b for a, b in zip(reference.output_ids, result.output_ids))
            same_tokens += agree
            tokens += len(result.output_ids)
            same_prompts += agree == len(result.output_ids)
            likelihoods.append(log_likelihood(engine, result.prompt_ids, result.output_ids, block, mask_id))
            forwards += result.forwards
        rows.append({"rule": label, "cache": mode, "prompts": len(prompts),
                     "token_agreement": same_tokens / tokens, "same_generations": same_prompts / len(prompts),
                     "mean_log_likelihood": float(np.mean(likelihoods)),
                     "forwards_per_prompt": forwards / len(prompts)})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True, help="the folder prepare_corpus.py writes")
    parser.add_argument("--model", default=os.path.join(os.path.dirname(__file__), "..", "models", "kjv-llada-12m"))
    parser.add_argument("--words", type=int, default=8, help="prompt: the chapter's first words")
    parser.add_argument("--gen-length", type=int, default=64)
    parser.add_argument("--block-length", type=int, default=16)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--json")
    args = parser.parse_args()
    engine = mosaic.Engine(args.model, device="cpu")
    mask_id = engine.info["mask_token_id"]
    prompts = prompts_of(args.corpus, args.words)
    base = dict(gen_length=args.gen_length, block_length=args.block_length)
    rows = measure(engine, prompts, dict(base, steps=args.gen_length), mask_id, "top-k, one token a step")
    rows += measure(engine, prompts, dict(base, steps=args.gen_length, threshold=args.threshold), mask_id,
                    f"threshold {args.threshold}")
    print(f"{len(prompts)} prompts (first {args.words} words of each held-out chapter), {args.gen_length} tokens, "
          f"block {args.block_length}, greedy; log-likelihood under the model without a cache, block by block")
    print(f"{'rule':<26} {'cache':<7} {'tokens = none':>14} {'same text':>10} {'mean log p':>11} {'forwards':>9}")
    for r in rows:
        print(f"{r['rule']:<26} {r['cache']:<7} {r['token_agreement']:>13.1%} {r['same_generations']:>10.1%} "
              f"{r['mean_log_likelihood']:>11.4f} {r['forwards_per_prompt']:>9.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "options": vars(args), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
