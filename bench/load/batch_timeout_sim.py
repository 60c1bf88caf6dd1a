#!/usr/bin/python3
"""Discrete-event simulation of fixed-fill batching under Poisson arrivals, for the start rules of
docs/design/batch-timeout.md: `auto` (wait for k* = min(N, ceil(lambda*S0)) requests or
T = (k* - 1)/lambda, S0 the shared part of a batch's service time), starting at once (T = 0), and
fixed timeouts. Prints the tables quoted there.

    bench/load/batch_timeout_sim.py [--requests 50000] [--max-batch 16]
"""

import argparse
import math
import random


def auto_rule(rate, service, max_batch):
    fill = min(max_batch, max(1, math.ceil(rate * service)))
    return fill, (fill - 1) / rate


def simulate(rate, service_of, max_batch, rule, requests, seed=1):
    """Mean and p99 latency (in units of the batch service time at full load), mean batch size,
    and the fraction of time the server computes."""
    rng = random.Random(seed)
    arrivals, t = [], 0.0
    for _ in range(requests):
        t += rng.expovariate(rate)
        arrivals.append(t)
    latencies, batches, busy, free, i = [], 0, 0.0, 0.0, 0
    service_estimate = service_of(1)
    while i < requests:
        since = max(free, arrivals[i])
        fill, timeout = rule(rate, service_estimate, max_batch)
        fill = min(fill, max_batch)
        kth = arrivals[i + fill - 1] if i + fill - 1 < requests else math.inf
        start = max(since, min(kth, since + timeout))
        j = i
        while j < requests and arrivals[j] <= start and j - i < max_batch:
            j += 1
        service = service_of(j - i)
        service_estimate = 0.7 * service_estimate + 0.3 * service  # as LoadEstimator smooths it
        end = start + service
        latencies.extend(end - arrivals[q] for q in range(i, j))
        batches, busy, free, i = batches + 1, busy + service, end, j
    latencies.sort()
    return (sum(latencies) / len(latencies), latencies[int(0.99 * len(latencies))], requests / batches, busy / free)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=50000)
    parser.add_argument("--max-batch", type=int, default=16)
    args = parser.parse_args()
    n = args.max_batch
    # service time of a batch of b, and its shared part (what a batch amortises)
    models = {
        "GPU-like: S(b) = S (dispatch-bound)": (lambda b: 1.0, 1.0),
        "GPU, some compute: S(b) = S (0.8 + 0.2 b / N)": (lambda b: 0.8 + 0.2 * b / n, 0.8),
        "CPU-like: S(b) = S (0.2 + 0.8 b)": (lambda b: 0.2 + 0.8 * b, 0.2),
    }
    rules = {
        "auto": None,
        "T = 0": lambda rate, service, max_batch: (1, 0.0),
        "T = S/2": lambda rate, service, max_batch: (max_batch, 0.5 * service),
        "T = S": lambda rate, service, max_batch: (max_batch, service),
    }
    for title, (service_of, shared) in models.items():
        rules["auto"] = lambda rate, service, max_batch, shared=shared: auto_rule(rate, shared, max_batch)
        capacity = n / service_of(n)  # requests per S(1) when every batch is full
        print(f"\n{title}, N = {n}, capacity {capacity:.3g} requests per S(1).")
        print("Per rule: mean latency / p99 latency (in S(1)) / mean batch / busy fraction; auto is given the")
        print(f"shared part of the service time, {shared:g} S(1), as the estimator measures it.\n")
        print("| load | " + " | ".join(rules) + " |")
        print("|---:|" + "---|" * len(rules))
        for load in (0.05, 0.2, 0.4, 0.6, 0.8, 0.95):
            cells = []
            for rule in rules.values():
                mean, p99, batch, busy = simulate(load * capacity, service_of, n, rule, args.requests)
                cells.append(f"{mean:.2f} / {p99:.2f} / {batch:.1f} / {busy:.2f}")
            print(f"| {load:g} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
