#!/usr/bin/python3
"""Load generator for `mosaic serve`: Poisson arrivals (or a closed loop) on loopback, bounded
by a request count and a time limit, that reports throughput, latency percentiles and errors as a
table and as JSON, and checks that nothing is lost or garbled.

    # open loop: Poisson arrivals at 20 requests/s, at most 400 requests or 60 s
    bench/load/serve_load.py --url http://127.0.0.1:8000 --rate 20 --requests 400 --duration 60
    # closed loop: 16 clients, each sending its next request when the last one is answered
    bench/load/serve_load.py --url ... --concurrency 16 --requests 256
    # measure capacity with a closed loop, then send Poisson arrivals at twice that rate
    bench/load/serve_load.py --url ... --capacity-concurrency 8 --overload 2 --requests 300

Every request uses one of a few prompts with a fixed seed, so each prompt has exactly one right
answer: a solo request per prompt is the reference (sent first, one at a time), and every answer
under load must equal it token for token (text and ids). Each request ends in one of: completed
(and checked), rejected (429, a clear "at capacity"), error (any other status, a transport
failure, a timeout) or garbled (a malformed body, a broken stream, or an answer that differs from
the reference). The exit status is 0 when there are no errors and nothing is garbled.
Standard library only (it also runs on the GPU machines' Python).
"""

import argparse
import http.client
import json
import math
import random
import statistics
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

DEFAULT_PROMPTS = [
    "The capital of France is",
    "Write a haiku about the sea.",
    "List three prime numbers:",
    "def fibonacci(n):",
    "Translate to German: good morning",
    "Once upon a time",
    "The mitochondria is",
    "Summarise: masked diffusion models denoise all positions at once.",
]


class Target:
    def __init__(self, url, endpoint, model, max_tokens, steps, block_length, temperature, stream, timeout):
        parsed = urllib.parse.urlparse(url)
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.endpoint, self.model, self.stream, self.timeout = endpoint, model, stream, timeout
        self.fields = {"max_tokens": max_tokens, "steps": steps, "temperature": temperature}
        if block_length:
            self.fields["block_length"] = block_length

    def path(self):
        return {"completions": "/v1/completions", "chat": "/v1/chat/completions", "generate": "/generate"}[self.endpoint]

    def body(self, prompt, seed):
        body = dict(self.fields, seed=seed, stream=self.stream)
        if self.model:
            body["model"] = self.model
        if self.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        elif self.endpoint == "generate":
            body["prompt"] = prompt
            body["gen_length"] = body.pop("max_tokens")
        else:
            body["prompt"] = prompt
        return json.dumps(body)


def make_prompts(count, token_length=0, vocab=1000):
    """`count` distinct prompts: the default texts, or lists of `token_length` token ids below
    min(vocab, 1000) (ordinary tokens in every vocabulary, well away from the special ids)."""
    if token_length <= 0:
        return DEFAULT_PROMPTS[:max(1, min(count, len(DEFAULT_PROMPTS)))]
    rng = random.Random(1234)
    top = max(20, min(vocab, 1000) - 64)
    return [[rng.randrange(10, top) for _ in range(token_length)] for _ in range(max(1, count))]


def served_vocab(target):
    """The vocabulary size /v1/models reports (1000 if it does not say)."""
    conn = http.client.HTTPConnection(target.host, target.port, timeout=target.timeout)
    try:
        conn.request("GET", "/v1/models")
        models = json.loads(conn.getresponse().read())
        return int(models["data"][0].get("mosaic", {}).get("vocab", 1000))
    except (OSError, ValueError, KeyError, IndexError, http.client.HTTPException):
        return 1000
    finally:
        conn.close()


def text_of(endpoint, body):
    if endpoint == "generate":
        return body["text"]
    choice = body["choices"][0]
    return choice["message"]["content"] if endpoint == "chat" else choice["text"]


def send(target, prompt, seed):
    """One request. Returns a dict: outcome, latency, ttft, text, ids, detail."""
    start = time.monotonic()
    result = {"outcome": "error", "latency": None, "ttft": None, "text": None, "ids": None, "detail": ""}
    conn = http.client.HTTPConnection(target.host, target.port, timeout=target.timeout)
    try:
        conn.request("POST", target.path(), body=target.body(prompt, seed),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status == 429:
            error = json.loads(response.read())
            result["outcome"] = "rejected" if error.get("error", {}).get("code") == "queue_full" else "garbled"
            return result
        if response.status != 200:
            result["detail"] = f"HTTP {response.status}: {response.read()[:200]!r}"
            return result
        if not target.stream:
            body = json.loads(response.read())
            result["text"], result["ids"] = text_of(target.endpoint, body), body.get("mosaic", body).get("output_ids")
            result["ttft"] = body.get("mosaic", body).get("first_token_seconds")
        else:
            pieces, done, last = [], False, None
            for raw in response:
                line = raw.decode("utf-8").rstrip("\r\n")
                if not line:
                    continue
                if not line.startswith("data: "):
                    raise ValueError(f"not an SSE data line: {line[:80]!r}")
                data = line[len("data: "):]
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    raise RuntimeError(f"stream error: {chunk['error']}")
                if target.endpoint == "generate":
                    delta = chunk.get("text", "")
                elif target.endpoint == "chat":
                    delta = chunk["choices"][0]["delta"].get("content", "")
                else:
                    delta = chunk["choices"][0]["text"]
                if delta and result["ttft"] is None:
                    result["ttft"] = time.monotonic() - start
                pieces.append(delta)
                last = chunk
            if not done or last is None:
                result["outcome"], result["detail"] = "garbled", "the stream ended without [DONE]"
                return result
            result["text"] = "".join(pieces)
            result["ids"] = last.get("mosaic", last).get("output_ids")
        result["latency"] = time.monotonic() - start
        result["outcome"] = "completed"
    except (ValueError, KeyError, TypeError, json.JSONDecodeError) as error:
        result["outcome"], result["detail"] = "garbled", f"{type(error).__name__}: {error}"
    except (OSError, http.client.HTTPException, RuntimeError) as error:
        result["detail"] = f"{type(error).__name__}: {error}"
    finally:
        conn.close()
    return result


def percentile(values, q):
    if not values:
        return None
    values = sorted(values)  # nearest rank
    return values[min(len(values) - 1, max(0, math.ceil(q / 100 * len(values)) - 1))]


class Run:
    """Sends requests, checks answers against the references, and sums up."""

    def __init__(self, target, prompts, references):
        self.target, self.prompts, self.references = target, prompts, references
        self.results, self.lock = [], threading.Lock()

    def one(self, index):
        prompt_index = index % len(self.prompts)
        result = send(self.target, self.prompts[prompt_index], seed=prompt_index)
        result["prompt"] = prompt_index
        with self.lock:
            reference = self.references.get(prompt_index)
            if result["outcome"] == "completed":
                if reference is None:  # no solo reference: the first answer is the one all must match
                    self.references[prompt_index] = result
                elif result["text"] != reference["text"] or result["ids"] != reference["ids"]:
                    result["outcome"] = "garbled"
                    result["detail"] = f"the answer to prompt {prompt_index} differs from its reference"
            self.results.append(result)
        return result

    def summary(self, wall, label):
        counts = {k: sum(r["outcome"] == k for r in self.results) for k in ("completed", "rejected", "error", "garbled")}
        latencies = [r["latency"] for r in self.results if r["outcome"] == "completed"]
        ttfts = [r["ttft"] for r in self.results if r["outcome"] == "completed" and r["ttft"] is not None]
        tokens = sum(len(r["ids"] or []) for r in self.results if r["outcome"] == "completed")
        details = sorted({r["detail"] for r in self.results if r["outcome"] in ("error", "garbled")})
        return {"label": label, "sent": len(self.results), **counts, "wall_seconds": wall,
                "throughput_rps": counts["completed"] / wall if wall > 0 else 0.0,
                "generated_tokens_per_second": tokens / wall if wall > 0 else 0.0,
                "latency_p50": percentile(latencies, 50), "latency_p99": percentile(latencies, 99),
                "latency_mean": statistics.mean(latencies) if latencies else None,
                "ttft_p50": percentile(ttfts, 50), "ttft_p99": percentile(ttfts, 99),
                "problems": details[:10]}


def references_for(target, prompts):
    references = {}
    for index, prompt in enumerate(prompts):
        result = send(target, prompt, seed=index)
        if result["outcome"] != "completed":
            raise SystemExit(f"serve_load: the solo reference for prompt {index} failed: {result['outcome']} "
                             f"{result['detail']}")
        references[index] = result
    return references


def closed_loop(target, prompts, references, concurrency, requests, duration, label):
    run = Run(target, prompts, references)
    counter, lock = [0], threading.Lock()
    deadline = time.monotonic() + duration

    def client():
        while time.monotonic() < deadline:
            with lock:
                if counter[0] >= requests:
                    return
                index = counter[0]
                counter[0] += 1
            run.one(index)

    start = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return run.summary(time.monotonic() - start, label)


def open_loop(target, prompts, references, rate, requests, duration, seed, label):
    run = Run(target, prompts, references)
    rng = random.Random(seed)
    start = time.monotonic()
    arrival = 0.0
    with ThreadPoolExecutor(max_workers=512) as pool:
        futures = []
        for index in range(requests):
            arrival += rng.expovariate(rate)
            if arrival > duration:
                break
            delay = start + arrival - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(run.one, index))
        for future in futures:
            future.result()
    summary = run.summary(time.monotonic() - start, label)
    summary["offered_rps"] = rate
    return summary


def fmt(value, unit=""):
    if value is None:
        return "-"
    return f"{value * 1000:.1f} ms" if unit == "ms" else f"{value:.2f}"


def print_table(summaries, out=sys.stdout):
    header = ["run", "offered/s", "sent", "ok", "429", "errors", "garbled", "req/s", "tok/s",
              "p50", "p99", "ttft p50", "ttft p99"]
    rows = [[s["label"], fmt(s.get("offered_rps")), str(s["sent"]), str(s["completed"]), str(s["rejected"]),
             str(s["error"]), str(s["garbled"]), fmt(s["throughput_rps"]), fmt(s["generated_tokens_per_second"]),
             fmt(s["latency_p50"], "ms"), fmt(s["latency_p99"], "ms"), fmt(s["ttft_p50"], "ms"),
             fmt(s["ttft_p99"], "ms")] for s in summaries]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths]] + rows:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths)), file=out)
    for s in summaries:
        for problem in s["problems"]:
            print(f"  {s['label']}: {problem}", file=out)


def float_list(text):
    """"2" or "0.5,1,2": positive numbers."""
    values = [float(x) for x in text.split(",")]
    if not values or any(not (v > 0) for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers separated by commas, got {text!r}")
    return values


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8000")
    parser.add_argument("--endpoint", choices=["completions", "chat", "generate"], default="completions")
    parser.add_argument("--model", default="", help="model name to send (default: none)")
    parser.add_argument("--rate", type=float_list,
                        help="open loop: Poisson arrivals per second (a comma list: one run at each rate)")
    parser.add_argument("--concurrency", type=int, help="closed loop: clients")
    parser.add_argument("--capacity-concurrency", type=int,
                        help="measure capacity with this many closed-loop clients first, then run Poisson "
                             "arrivals at --overload times it")
    parser.add_argument("--overload", type=float_list, default=[2.0],
                        help="multiples of the measured capacity (a comma list: one Poisson run at each)")
    parser.add_argument("--requests", type=int, default=200, help="at most this many requests per run")
    parser.add_argument("--duration", type=float, default=60.0, help="at most this many seconds per run")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--block-length", type=int, default=0)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--prompts", type=int, default=len(DEFAULT_PROMPTS), help="how many distinct prompts")
    parser.add_argument("--token-prompts", type=int, default=0,
                        help="send prompts of this many token ids instead of text (models without a tokenizer)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=300.0, help="per request, seconds")
    parser.add_argument("--no-reference", action="store_true",
                        help="no solo references first: the first answer to each prompt is the one the others "
                             "must equal")
    parser.add_argument("--json", help="write the summaries here")
    args = parser.parse_args(argv)
    if sum(x is not None for x in (args.rate, args.concurrency, args.capacity_concurrency)) != 1:
        parser.error("give exactly one of --rate, --concurrency, --capacity-concurrency")
    if args.token_prompts and args.endpoint == "chat":
        parser.error("--token-prompts needs --endpoint completions or generate (chat messages are text)")

    target = Target(args.url, args.endpoint, args.model, args.max_tokens, args.steps, args.block_length,
                    args.temperature, args.stream, args.timeout)
    prompts = make_prompts(args.prompts, args.token_prompts, served_vocab(target) if args.token_prompts else 1000)
    references = {} if args.no_reference else references_for(target, prompts)
    summaries = []
    if args.concurrency:
        summaries.append(closed_loop(target, prompts, references, args.concurrency, args.requests, args.duration,
                                     f"closed x{args.concurrency}"))
    elif args.rate:
        for rate in args.rate:
            summaries.append(open_loop(target, prompts, references, rate, args.requests, args.duration, args.seed,
                                       f"poisson {rate:g}/s"))
    else:
        capacity = closed_loop(target, prompts, references, args.capacity_concurrency,
                               max(args.requests // 2, 4 * args.capacity_concurrency), args.duration,
                               f"capacity x{args.capacity_concurrency}")
        summaries.append(capacity)
        for overload in args.overload:
            rate = overload * capacity["throughput_rps"]
            summaries.append(open_loop(target, prompts, references, rate, args.requests, args.duration, args.seed,
                                       f"poisson {overload:g}x capacity"))
    print_table(summaries)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summaries, f, indent=2)
    bad = sum(s["error"] + s["garbled"] for s in summaries)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
