#!/usr/bin/python3
"""D2F on the built-in model, with and without the D2F adapter (models/kjv-llada-12m-d2f), on the CPU.

Prompts: the first words of every held-out chapter of the KJV corpus, as bench/cache_quality.py
picks them (its prompts_of). Every setting generates all prompts greedily in one `mosaic generate
--json` call (the command is recorded):

  - "llada": the base model without the adapter, LLaDA's low-confidence remasking, one token a step
    (steps = gen_length, blocks of --block-length, no cache): the reference;
  - "d2f base": `--d2f` without the adapter (the base under D2F's block-causal attention, which it was
    not trained for), at each threshold setting;
  - "d2f adapter": `--d2f --adapter DIR`, the same settings.

Per setting: tokens per forward (generated positions / forwards, summed over prompts), the mean
number of steps and forwards per prompt, the mean log-likelihood per generated token under the base
model without the adapter and without a cache (cache_quality.py's log_likelihood: block by block of
--block-length, later blocks masked), token agreement with the "llada" reference (share of positions
holding the same token; share of prompts generating exactly the same), and the share of prompts
whose output holds EOS. Then the distribution of step counts per request (the "levels") under the
serving characterization's settings (skip 1.0, tau_add 0.5, tau_act 0.9) for each --levels
GEN:BLOCK pair.

    PYTHONPATH=build/python bench/d2f_demo_quality.py --corpus tools/train/data/corpus \
        [--adapter models/kjv-llada-12m-d2f] [--json OUT.json]

Needs the mosaic binary (--mosaic), the mosaic Python module (for the uncached forwards) and numpy.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from cache_quality import log_likelihood, prompts_of  # noqa: E402

import mosaic  # noqa: E402

# (skip_threshold, block_add_threshold, decoded_token_threshold)
D2F_SETTINGS = ((0.9, 0.1, 0.95), (0.7, 0.1, 0.95), (0.5, 0.1, 0.95), (0.3, 0.1, 0.95))
CHARACTERIZATION = (1.0, 0.5, 0.9)


def rel(path):
    return os.path.relpath(path, REPO) if os.path.isabs(path) else path


def generate(binary, model, prompts, args, adapter=None):
    """(command, results) of one `mosaic generate --json` call over all prompts."""
    command = [binary, "generate", "--model", model, "--device", "cpu", "--json", "--quiet", *args]
    if adapter:
        command += ["--adapter", adapter]
    for p in prompts:
        command += ["--prompt", p]
    t = time.time()
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"mosaic generate failed ({proc.returncode}): {proc.stderr.strip()}")
    shown = " ".join(rel(c) if i in (0, 3) or c == adapter else c
                     for i, c in enumerate(command[:len(command) - 2 * len(prompts)]))
    return f"{shown} --prompt P ... ({len(prompts)} prompts)", json.loads(proc.stdout)["results"], time.time() - t


def d2f_args(gen, block, skip, add, act):
    return ["--gen-length", str(gen), "--d2f", "--block-length", str(block), "--skip-threshold", str(skip),
            "--block-add-threshold", str(add), "--decoded-token-threshold", str(act), "--cache", "auto"]


def summarize(label, command, results, reference, engine, block, mask_id, eos_id, seconds):
    same_tokens = same_prompts = tokens = forwards = steps = with_eos = 0
    likelihoods = []
    for ref, r in zip(reference, results):
        out = r["output_ids"]
        agree = sum(a == b for a, b in zip(ref["output_ids"], out))
        same_tokens += agree
        same_prompts += agree == len(out)
        tokens += len(out)
        forwards += r["forwards"]
        steps += r["steps"]
        with_eos += eos_id in out
        likelihoods.append(log_likelihood(engine, r["prompt_ids"], out, block, mask_id))
    n = len(results)
    return {"setting": label, "command": command, "prompts": n, "tokens_per_forward": tokens / forwards,
            "steps_per_prompt": steps / n, "forwards_per_prompt": forwards / n,
            "mean_log_likelihood": float(np.mean(likelihoods)), "token_agreement": same_tokens / tokens,
            "same_generations": same_prompts / n, "with_eos": with_eos / n,
            "steps_equal_forwards_plus_1": all(r["steps"] == r["forwards"] + 1 for r in results)
            if "d2f" in label else None, "seconds": round(seconds, 2),
            "samples": [r["text"] for r in results[:3]]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True, help="the folder prepare_corpus.py writes")
    parser.add_argument("--model", default=os.path.join(REPO, "models", "kjv-llada-12m"))
    parser.add_argument("--adapter", default=os.path.join(REPO, "models", "kjv-llada-12m-d2f"))
    parser.add_argument("--mosaic", default=os.path.join(REPO, "build", "src", "cli", "mosaic"))
    parser.add_argument("--words", type=int, default=8, help="prompt: the chapter's first words")
    parser.add_argument("--gen-length", type=int, default=64)
    parser.add_argument("--block-length", type=int, default=16)
    parser.add_argument("--levels", default="64:16,192:32",
                        help="GEN:BLOCK pairs for the step-count distribution at the characterization settings")
    parser.add_argument("--max-prompts", type=int, default=0, help="the first N prompts only (0: all)")
    parser.add_argument("--json")
    args = parser.parse_args()
    engine = mosaic.Engine(args.model, device="cpu")
    mask_id, eos_id = engine.info["mask_token_id"], engine.info["eos_token_id"]
    prompts = prompts_of(args.corpus, args.words)
    if args.max_prompts:
        prompts = prompts[:args.max_prompts]
    gen, block = args.gen_length, args.block_length

    command, reference, secs = generate(args.mosaic, args.model, prompts,
                                        ["--gen-length", str(gen), "--steps", str(gen), "--block-length",
                                         str(block), "--cache", "none"])
    rows = [summarize("llada (base, one token a step)", command, reference, reference, engine, block, mask_id,
                      eos_id, secs)]
    for skip, add, act in D2F_SETTINGS + (CHARACTERIZATION,):
        for adapter in (None, args.adapter):
            label = f"d2f {'adapter' if adapter else 'base'} skip {skip} add {add} act {act}"
            command, results, secs = generate(args.mosaic, args.model, prompts,
                                              d2f_args(gen, block, skip, add, act), adapter)
            rows.append(summarize(label, command, results, reference, engine, block, mask_id, eos_id, secs))
            print(f"{label}: {rows[-1]['tokens_per_forward']:.2f} tokens/forward, "
                  f"log p {rows[-1]['mean_log_likelihood']:.4f}", flush=True)

    levels = []
    for pair in args.levels.split(","):
        lg, lb = (int(v) for v in pair.split(":"))
        for adapter in (None, args.adapter):
            command, results, secs = generate(args.mosaic, args.model, prompts, d2f_args(lg, lb, *CHARACTERIZATION),
                                              adapter)
            counts = collections.Counter(r["steps"] for r in results)
            levels.append({"gen_length": lg, "block_length": lb, "adapter": bool(adapter), "command": command,
                           "steps_histogram": {str(k): counts[k] for k in sorted(counts)},
                           "forwards_equal_steps_minus_1": all(r["steps"] == r["forwards"] + 1 for r in results),
                           "with_eos": sum(eos_id in r["output_ids"] for r in results) / len(results)})

    print(f"\n{len(prompts)} prompts (first {args.words} words of each held-out chapter), {gen} tokens, block {block}, "
          "greedy, CPU; log p under the base model without adapter or cache, block by block")
    print(f"{'setting':<46} {'tok/fwd':>7} {'steps':>6} {'log p':>8} {'= llada':>8} {'same':>6} {'eos':>5}")
    for r in rows:
        print(f"{r['setting']:<46} {r['tokens_per_forward']:>7.2f} {r['steps_per_prompt']:>6.1f} "
              f"{r['mean_log_likelihood']:>8.4f} {r['token_agreement']:>7.1%} {r['same_generations']:>6.1%} "
              f"{r['with_eos']:>5.1%}")
    print("\nsteps per request at skip 1.0, add 0.5, act 0.9:")
    for lv in levels:
        print(f"  gen {lv['gen_length']} block {lv['block_length']} {'adapter' if lv['adapter'] else 'base   '}: "
              f"{lv['steps_histogram']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": rel(args.model), "adapter": rel(args.adapter),
                       "options": {k: (rel(v) if k in ("corpus", "model", "adapter", "mosaic", "json") else v)
                                   for k, v in vars(args).items()},
                       "prompts": prompts, "rows": rows, "levels": levels}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
