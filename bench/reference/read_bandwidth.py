#!/usr/bin/env python3
"""How fast the GPU reads its own memory: the floor under a step that only has to read weights.

    python3 bench/reference/read_bandwidth.py [--gib 16] [--repeats 5] [--json out.json]

Reads a --gib GiB bf16 tensor with one reduction (torch.sum into fp32), median of --repeats
after a warm-up; prints GB/s and GiB/s. Needs PyTorch with CUDA (the GPU machine has it).
"""
import argparse
import json
import statistics

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=16.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    elements = int(args.gib * (1 << 30)) // 2
    x = torch.ones(elements, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    times = []
    for i in range(args.repeats + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.sum(x, dtype=torch.float32)
        end.record()
        torch.cuda.synchronize()
        if i > 0:
            times.append(start.elapsed_time(end) / 1e3)
    seconds = statistics.median(times)
    report = {"device": torch.cuda.get_device_name(), "bytes": elements * 2, "seconds": seconds,
              "GB_per_s": elements * 2 / seconds / 1e9, "GiB_per_s": elements * 2 / seconds / (1 << 30)}
    print(f"read {report['bytes'] / (1 << 30):.1f} GiB in {seconds * 1e3:.2f} ms: "
          f"{report['GB_per_s']:.0f} GB/s ({report['GiB_per_s']:.0f} GiB/s) on {report['device']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
