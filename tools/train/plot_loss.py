#!/usr/bin/python3
"""Loss curve of a training run: train loss and validation loss against tokens seen, with
the unigram baseline as a horizontal line.

    /usr/bin/python3 tools/train/plot_loss.py --run $OUT/train     # rewrites loss.png

Uses matplotlib when it is installed (loss.png); otherwise writes loss.svg with no
dependency, so a machine without matplotlib still records the curve.
"""

import argparse
import csv
import json
import os


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def series(log_csv, eval_csv):
    log, evals = read_csv(log_csv), read_csv(eval_csv)
    return ([(r["tokens"] / 1e6, r["train_loss"]) for r in log],
            [(r["tokens"] / 1e6, r["val_elbo"]) for r in evals])


def plot(log_csv, eval_csv, out_base, final=None):
    """Writes out_base + .png (matplotlib) or .svg; returns the file name."""
    train, val = series(log_csv, eval_csv)
    unigram = final["validation"]["unigram"]["elbo"] if final else None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return _svg(train, val, unigram, out_base + ".svg")
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    if train:
        ax.plot(*zip(*train), lw=1, label="train loss (LLaDA objective, batch)")
    if val:
        ax.plot(*zip(*val), "o-", ms=3, lw=1.5, label="validation loss (same objective)")
    if unigram is not None:
        ax.axhline(unigram, color="gray", ls="--", lw=1, label=f"unigram baseline ({unigram:.2f})")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("nats per token")
    ax.set_title("Mosaic default model: masked-diffusion loss")
    top = max([y for _, y in val] + ([unigram * 1.15] if unigram else []) or [10])
    ax.set_ylim(0, top)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_base + ".png")
    plt.close(fig)
    return os.path.basename(out_base + ".png")


def _svg(train, val, unigram, path):
    w, h, m = 800, 450, 60
    points = train + val
    if not points:
        return None
    x_max = max(x for x, _ in points) or 1
    y_max = max([y for _, y in val] + ([unigram * 1.15] if unigram else [])
                or [y for _, y in points])

    def xy(x, y):
        return m + (w - 2 * m) * x / x_max, h - m - (h - 2 * m) * min(y, y_max) / y_max

    def line(data, color):
        return (f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="'
                + " ".join("%.1f,%.1f" % xy(x, y) for x, y in data) + '"/>')

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
             f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 15}" text-anchor="middle">training tokens '
             f'(millions, max {x_max:.0f})</text>',
             f'<text x="15" y="{m - 20}">nats/token (max {y_max:.2f}); blue train, red '
             'validation, gray unigram</text>',
             line(train, "steelblue"), line(val, "firebrick")]
    if unigram:
        parts.append(line([(0, unigram), (x_max, unigram)], "gray"))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")
    return os.path.basename(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", required=True, help="the run's folder ($OUT/train)")
    parser.add_argument("--out", help="output base name (default RUN/loss)")
    args = parser.parse_args()
    with open(os.path.join(args.run, "results.json")) as f:
        final = json.load(f)["final_eval"]
    name = plot(os.path.join(args.run, "log.csv"), os.path.join(args.run, "eval.csv"),
                args.out or os.path.join(args.run, "loss"), final)
    print(name)


if __name__ == "__main__":
    main()
