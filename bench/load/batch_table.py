#!/usr/bin/python3
"""Throughput of `mosaic serve` against batch size: for each B, a server with --max-batch B and B
closed-loop clients sending short prompts (token ids, so a checkpoint without a tokenizer works),
after one warm-up request. Prints a Markdown table and writes JSON; checks the issue's target
(batch 16 >= 14x batch 1) when both sizes are measured.

    bench/load/batch_table.py --mosaic build/src/cli/mosaic --model /tmp/llada-8b \\
        --batches 1,4,16,32 --gen-length 64 --steps 64 --prompt-tokens 32 --rounds 3 --json out.json

Each answer is checked as serve_load.py does (the first answer to each prompt is the one every
later answer must equal, token for token): a row with errors or garbled answers is reported as such.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_load  # noqa: E402


def start_server(args, batch):
    command = [args.mosaic, "serve", "--model", args.model, "--port", "0", "--max-batch", str(batch),
               "--max-queue", str(4 * batch + 8), "--device", args.device]
    if args.budget:
        command += ["--budget", args.budget]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + args.start_timeout
    for line in proc.stderr:
        sys.stderr.write(line)
        match = re.search(r"listening on http://[\d.]+:(\d+)", line)
        if match:
            threading.Thread(target=lambda: [sys.stderr.write(rest) for rest in proc.stderr], daemon=True).start()
            return proc, int(match.group(1))
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise SystemExit(f"batch_table: mosaic serve did not start (exit {proc.wait()})")


def measure(args, batch):
    proc, port = start_server(args, batch)
    try:
        target = serve_load.Target(f"http://127.0.0.1:{port}", "completions", "", args.gen_length, args.steps,
                                   args.block_length, 0.0, False, args.timeout)
        prompts = serve_load.make_prompts(max(batch, 1) * 2, args.prompt_tokens, serve_load.served_vocab(target))
        warm = serve_load.send(target, prompts[0], seed=0)
        if warm["outcome"] != "completed":
            raise SystemExit(f"batch_table: the warm-up request failed: {warm['detail']}")
        requests = max(args.rounds * batch, args.min_requests)
        summary = serve_load.closed_loop(target, prompts, {}, batch, requests, args.duration, f"batch {batch}")
        summary["batch"] = batch
        return summary
    finally:
        proc.terminate()
        proc.wait(timeout=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mosaic", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--batches", default="1,4,16,32")
    parser.add_argument("--gen-length", type=int, default=64)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--block-length", type=int, default=0)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="requests per client")
    parser.add_argument("--min-requests", type=int, default=8, help="at least this many requests per batch size")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--budget", default="")
    parser.add_argument("--duration", type=float, default=600.0, help="at most this long per batch size")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--start-timeout", type=float, default=600.0)
    parser.add_argument("--json")
    args = parser.parse_args()

    rows = [measure(args, int(b)) for b in args.batches.split(",")]
    base = next((r for r in rows if r["batch"] == 1), None)
    print("| batch | requests | req/s | generated tok/s | p50 latency | p99 latency | speedup vs batch 1 | problems |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        speedup = r["throughput_rps"] / base["throughput_rps"] if base and base["throughput_rps"] else None
        r["speedup"] = speedup
        problems = f"{r['error']} errors, {r['garbled']} garbled" if r["error"] or r["garbled"] else "none"
        print(f"| {r['batch']} | {r['completed']} | {r['throughput_rps']:.3f} | {r['generated_tokens_per_second']:.1f} "
              f"| {r['latency_p50'] * 1000:.0f} ms | {r['latency_p99'] * 1000:.0f} ms "
              f"| {'-' if speedup is None else f'{speedup:.2f}x'} | {problems} |")
    status = 0
    sixteen = next((r for r in rows if r["batch"] == 16), None)
    if base and sixteen:
        ok = sixteen["speedup"] >= 14
        print(f"\nbatch 16 / batch 1 = {sixteen['speedup']:.2f}x (target >= 14x): {'met' if ok else 'NOT met'}")
        status = 0 if ok else 1
    if any(r["error"] or r["garbled"] for r in rows):
        status = 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return status


if __name__ == "__main__":
    sys.exit(main())
