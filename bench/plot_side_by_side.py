#!/usr/bin/env python3
"""Table (Markdown) and plots from bench/side_by_side.sh's JSON: Mosaic against the PyTorch
reference, step latency and activation memory against L, and L_max under the budget.

  plot_side_by_side.py RESULTS_DIR FAMILY IMAGE_DIR   (prints the Markdown tables)
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

GIB = 2**30
FLOOR_TFLOPS = 790.0  # dense bf16 the H200 sustains (issue 7)


def main():
    results, family, images = sys.argv[1], sys.argv[2], sys.argv[3]
    load = lambda name: json.load(open(os.path.join(results, name)))  # noqa: E731
    mosaic = load(f"mosaic-step-{family}.json")
    torch = load(f"torch-{family}.json")
    # L_max is optional (side_by_side.sh with BUDGET "none" measures latency and memory only).
    has_lmax = all(os.path.exists(os.path.join(results, f"mosaic-lmax-t{t}-{family}.json")) for t in (0, 1))
    lmax = {t: load(f"mosaic-lmax-t{t}-{family}.json") for t in (0, 1)} if has_lmax else {}
    by_length = {row["length"]: row for row in torch["steps"]}

    print("| L | Mosaic step ms | PyTorch step ms | speed-up | Mosaic TFLOP/s | compute floor ms | Mosaic / floor "
          "| host % | Mosaic peak GiB | PyTorch peak GiB | Mosaic PAR | PyTorch PAR | inflation |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m in mosaic["steps"]:
        t = by_length.get(m["length"], {})
        floor_ms = m["flops"] / (FLOOR_TFLOPS * 1e12) * 1e3
        speedup = t["median_ms"] / m["median_ms"] if "median_ms" in t else float("nan")
        print(f"| {m['length']:,} | {m['median_ms']:.1f} | {t.get('median_ms', float('nan')):.1f} | {speedup:.2f}× "
              f"| {m['flops'] / m['median_ms'] / 1e9:.0f} | {floor_ms:.1f} | {m['median_ms'] / floor_ms:.2f} "
              f"| {100 * m['median_host_ms'] / m['median_ms']:.1f} | {m['planned_peak_bytes'] / GIB:.3f} "
              f"| {t.get('activation_peak_bytes', float('nan')) / GIB:.3f} | {m['par']:.2f} | {t.get('par') or float('nan'):.2f} "
              f"| {m['inflation']:.3f} |")
    print()
    if has_lmax:
        print_lmax_table(lmax, torch)
    plot(family, mosaic, torch, by_length, images)


def print_lmax_table(lmax, torch):
    budget = lmax[0]["budget_bytes"] / GIB
    print(f"| L_max under {budget:.0f} GiB | temperature 0 | temperature 1 |")
    print("|---|---|---|")
    print(f"| Mosaic, planned | {lmax[0]['planned_l_max']:,} | {lmax[1]['planned_l_max']:,} |")
    print(f"| Mosaic, one full step run at | {lmax[0]['measured_length']:,} ({lmax[0]['step']['median_ms'] / 1e3:.0f} s, "
          f"{lmax[0]['bytes_used'] / GIB:.2f} GiB) | {lmax[1]['measured_length']:,} "
          f"({lmax[1]['step']['median_ms'] / 1e3:.0f} s, {lmax[1]['bytes_used'] / GIB:.2f} GiB) |")
    print(f"| PyTorch native, measured | {torch['l_max_t0']:,} | {torch['l_max_t1']:,} |")


def plot(family, mosaic, torch, by_length, images):
    lengths = [m["length"] for m in mosaic["steps"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(lengths, [m["median_ms"] for m in mosaic["steps"]], "o-", label="Mosaic")
    left.plot(lengths, [by_length[n]["median_ms"] for n in lengths], "s--", label="PyTorch native")
    left.plot(lengths, [m["flops"] / (FLOOR_TFLOPS * 1e12) * 1e3 for m in mosaic["steps"]], ":", label="compute floor")
    left.set(xscale="log", yscale="log", xlabel="sequence length L", ylabel="step latency (ms)",
             title=f"{family}: one denoising step")
    right.plot(lengths, [m["planned_peak_bytes"] / GIB for m in mosaic["steps"]], "o-", label="Mosaic")
    right.plot(lengths, [by_length[n]["activation_peak_bytes"] / GIB for n in lengths], "s--", label="PyTorch native")
    right.set(xscale="log", yscale="log", xlabel="sequence length L", ylabel="activation peak (GiB)",
              title="activation memory of the step")
    for axis in (left, right):
        axis.set_xticks(lengths, [f"{n // 1024}k" for n in lengths])
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    fig.suptitle(f"{torch['device']}, random bf16 weights, prompt L/2, L/2 masked, temperature 0")
    fig.tight_layout()
    os.makedirs(images, exist_ok=True)
    fig.savefig(os.path.join(images, f"side-by-side-{family}.png"), dpi=110)


if __name__ == "__main__":
    main()
