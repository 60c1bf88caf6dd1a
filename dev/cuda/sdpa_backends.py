#!/usr/bin/env python3
"""What PyTorch's attention backends reach at Mosaic's shapes on this GPU.

The yardstick for dev/cuda/attention_bench.cu: the same problem (one sequence, bidirectional,
bf16, head_dim 128, LLaDA-8B's 32/32 heads and Dream-7B's 28/4; or 32/32 heads at --head-dims) through
torch.nn.functional.scaled_dot_product_attention with each backend PyTorch has here (FlashAttention-2,
cuDNN's fused attention, memory-efficient) and with PyTorch's own choice. Two timings per case,
like the workbench: "sustained" (back-to-back calls, the GPU at its power-limited clock, as in a
step) and "isolated" (one call after an idle pause). Prints a table and writes JSON.

    python3 dev/cuda/sdpa_backends.py --json-out sdpa.json
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "default": None,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def time_call(fn, repeats):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / repeats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="4096,16384,32768")
    parser.add_argument("--head-dims", help="32/32 heads at each of these head dims instead of the models' 128")
    parser.add_argument("--json-out")
    args = parser.parse_args()
    shapes = [("LLaDA-8B", 32, 32, 128), ("Dream-7B", 28, 4, 128)]
    if args.head_dims:
        shapes = [(f"32/32 x {d}", 32, 32, d) for d in (int(x) for x in args.head_dims.split(","))]
    results = []
    print(f"{'shape':12} {'L':>6} {'backend':10} {'sustained ms':>12} {'TFLOP/s':>8} "
          f"{'isolated ms':>12} {'TFLOP/s':>8}")
    for length in [int(x) for x in args.lengths.split(",")]:
        for name, q_heads, kv_heads, head_dim in shapes:
            gen = torch.Generator(device="cuda").manual_seed(1)
            q = torch.rand(1, q_heads, length, head_dim, device="cuda", generator=gen).mul_(4).sub_(2).bfloat16()
            k = torch.rand(1, kv_heads, length, head_dim, device="cuda", generator=gen).mul_(4).sub_(2).bfloat16()
            v = torch.rand(1, kv_heads, length, head_dim, device="cuda", generator=gen).mul_(4).sub_(2).bfloat16()
            flops = 4.0 * length * length * head_dim * q_heads
            for backend, which in BACKENDS.items():
                def call():
                    if which is None:
                        return F.scaled_dot_product_attention(q, k, v, enable_gqa=kv_heads != q_heads)
                    with sdpa_kernel([which]):
                        return F.scaled_dot_product_attention(q, k, v, enable_gqa=kv_heads != q_heads)
                try:
                    call()
                    torch.cuda.synchronize()
                except RuntimeError as error:  # backend refuses this shape or is absent
                    print(f"{name:12} {length:6} {backend:10} unavailable: {str(error).splitlines()[0][:80]}")
                    results.append({"shape": name, "length": length, "backend": backend, "error": str(error)[:200]})
                    continue
                sustained = time_call(call, 3 if length >= 16384 else 10)
                time.sleep(1.0)  # let the clock recover
                isolated = time_call(call, 1)
                print(f"{name:12} {length:6} {backend:10} {sustained:12.3f} {flops / sustained / 1e9:8.1f} "
                      f"{isolated:12.3f} {flops / isolated / 1e9:8.1f}")
                results.append({"shape": name, "length": length, "backend": backend, "sustained_ms": sustained,
                                "isolated_ms": isolated, "sustained_tflops": flops / sustained / 1e9,
                                "isolated_tflops": flops / isolated / 1e9})
            del q, k, v
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "results": results}, out, indent=1)


if __name__ == "__main__":
    main()
