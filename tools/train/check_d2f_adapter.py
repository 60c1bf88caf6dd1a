#!/usr/bin/env python3
"""Checks a D2F adapter folder written by train_d2f.py in Mosaic:

 1. files    adapter_config.json and adapter_model.safetensors present, PEFT keys and shapes
             (A [r, in], B [out, r]) for every targeted projection; the folder at most --max-mb MB.
 2. load     `mosaic forward --adapter --json` merges it: one adapted projection per tensor pair.
 3. logits   Mosaic's CPU logits (merged, fp32) vs PyTorch's unmerged LoRA branch
             (train_d2f.LoRALinear, fp32, full attention as `mosaic forward` runs) on three
             sequences: max|d| / max|logit| <= 1e-4 and the same argmax in every row.
 4. d2f      `mosaic generate --adapter --d2f` decodes: steps == forwards + 1 (d2f-decoding.md).
 5. mask     train_d2f's block-causal training mask is the inference mask: key k visible to query q
             iff k < end(q) of tests/reference/reference_forward.key_end("prompt", q, P, B, L).

    /usr/bin/python3 tools/train/check_d2f_adapter.py --adapter models/kjv-llada-12m-d2f \
        --mosaic build/src/cli/mosaic
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_folder  # noqa: E402
from hf_folder import safetensors_np  # noqa: E402
from train_d2f import REPO, add_lora, block_causal_mask, load_adapter_state  # noqa: E402
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))
import reference_forward  # noqa: E402


def mosaic(binary, *args):
    proc = subprocess.run([binary, *args], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"mosaic {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--adapter", required=True)
    p.add_argument("--base", default=os.path.join(REPO, "models", "kjv-llada-12m"))
    p.add_argument("--mosaic", default=os.path.join(REPO, "build", "src", "cli", "mosaic"))
    p.add_argument("--max-mb", type=float, default=4.0)
    a = p.parse_args()
    failures = []

    def report(name, ok, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {name:<7} {detail}", flush=True)
        if not ok:
            failures.append(name)

    # 1. files
    with open(os.path.join(a.adapter, "adapter_config.json")) as f:
        config = json.load(f)
    tensors = safetensors_np.load_file(os.path.join(a.adapter, "adapter_model.safetensors"))
    size = sum(os.path.getsize(os.path.join(a.adapter, n)) for n in os.listdir(a.adapter))
    teacher = hf_folder.load_folder(a.base)
    student = teacher  # LoRA wraps in place; the base is not used afterwards
    wrapped = add_lora(student, config["target_modules"], config["r"], config["lora_alpha"], 0.0, 0)
    expected = {f"base_model.model.{m}.lora_{ab}.weight": tuple(getattr(layer, f"lora_{ab}").shape)
                for m, layer in wrapped.items() for ab in "AB"}
    got = {k: tuple(v.shape) for k, v in tensors.items()}
    report("files", got == expected and size <= a.max_mb * 1e6 and not config.get("fan_in_fan_out"),
           f"{len(got)} tensors (expected {len(expected)}), r {config['r']}, alpha {config['lora_alpha']}, "
           f"{size / 1e6:.2f} MB (limit {a.max_mb} MB)")
    load_adapter_state(wrapped, {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()})
    student.eval()

    # 2. load
    info = json.loads(mosaic(a.mosaic, "forward", "--model", a.base, "--adapter", a.adapter,
                             "--ids", "1,4095", "--json"))
    adapted = info.get("adapter", {}).get("adapted_projections")
    report("load", adapted == len(expected) // 2, f"mosaic adapted {adapted} projections")

    # 3. logits
    mask_id = hf_folder.safetensors_np.load_config(a.base)["mask_token_id"]
    g = np.random.default_rng(7)
    worst, same = 0.0, True
    with tempfile.TemporaryDirectory() as tmp:
        for length, masked in ((12, 4), (80, 40), (200, 150)):
            ids = g.integers(0, mask_id, length)
            ids[g.choice(length, masked, replace=False)] = mask_id
            rows = list(range(length))
            out = os.path.join(tmp, "logits.npy")
            mosaic(a.mosaic, "forward", "--model", a.base, "--adapter", a.adapter, "--ids",
                   ",".join(map(str, ids)), "--rows", ",".join(map(str, rows)), "--logits-out", out)
            theirs = np.load(out).astype(np.float64)
            with torch.no_grad():
                ours = student(torch.from_numpy(ids)[None]).double()[0].numpy()
            worst = max(worst, float(np.abs(theirs - ours).max() / np.abs(ours).max()))
            same = same and bool((theirs.argmax(1) == ours.argmax(1)).all())
    report("logits", worst <= 1e-4 and same, f"max|d|/max|logit| = {worst:.2e} (bound 1e-4), same argmax: {same}")

    # 4. d2f
    out = json.loads(mosaic(a.mosaic, "generate", "--model", a.base, "--adapter", a.adapter, "--d2f",
                            "--prompt", "And it came to pass", "--gen-length", "64", "--block-length", "16",
                            "--skip-threshold", "0.9", "--block-add-threshold", "0.1",
                            "--decoded-token-threshold", "0.95", "--json", "--quiet"))
    r = out["results"][0]
    report("d2f", r["steps"] == r["forwards"] + 1 and len(r["output_ids"]) == 64,
           f"{r['steps']} steps, {r['forwards']} forwards, {64 / r['forwards']:.2f} tokens/forward: {r['text'][:80]!r}")

    # 5. mask
    L, B, same = 256, 16, True
    for P in (1, 7, 16, 100, 192):
        pos = torch.arange(L)
        block_id = torch.where(pos >= P, 1 + (pos - P).clamp(min=0) // B, torch.zeros_like(pos))
        ours = torch.isfinite(block_causal_mask(block_id[None], torch.float32))[0, 0].numpy()
        end = reference_forward.key_end("prompt", np.arange(L), P, B, L)
        same = same and bool((ours == (np.arange(L)[None, :] < end[:, None])).all())
    report("mask", same, "training mask == reference key_end('prompt') for P in 1, 7, 16, 100, 192 (B 16, L 256)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
