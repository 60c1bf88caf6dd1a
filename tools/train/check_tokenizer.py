#!/usr/bin/python3
"""Cross-implementation check of the project's tokenizer: the ids the model was trained on
(byte_bpe.py, Python) against Mosaic's C++ tokenizer reading the same tokenizer.json.

    /usr/bin/python3 tools/train/check_tokenizer.py [--data tools/train/data] \
        [--tokenizer DIR/tokenizer.json] [--mosaic build/src/cli/mosaic]

Mosaic's ids are the prompt ids `mosaic generate --json` reports (Engine::encode, the path a
user's prompt takes), on a throw-away tiny random checkpoint that carries the tokenizer
(`mosaic make-test-model --tokenizer`, one layer of width 64); one generated token per
prompt keeps it cheap (about a minute for the corpus).
Compared: every chapter of every split (the training ids are the .npy streams cut at EOS),
and a set of texts that reach what the Bible does not (Unicode, digits, whitespace runs,
contractions, special tokens inside text). Also decode(encode(x)) == x in Python.
Exit status 0 when all agree.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import byte_bpe  # noqa: E402

EXTRA_TEXTS = [
    "Hello, world! It's 2024; they'll say \"we've\" and I'm sure you'd agree.",
    "naïve café — ünïcödé ✓ 中文 日本語 한국어 emoji 👍🏽 and ﬁ ligature",
    "  leading spaces,\ttabs\t\tand\n\nnewlines   \n trailing  ",
    "numbers 3.14159 1,000,000 0x1F 12345678901234567890",
    "code: def f(x): return x**2 + 1  # comment",
    "special <|endoftext|> inside<|mdm_mask|>text",
    "ALL CAPS AND MiXeD cAsE, O LORD, Selah.",
    "a", " ", "\n",
]
ARGV_BUDGET = 900_000  # bytes of prompt text per mosaic call (Linux ARG_MAX is 2 MiB)


def mosaic_ids(mosaic, model_dir, texts):
    out = []
    batch, size = [], 0
    for text in texts + [None]:
        if text is None or (batch and size + len(text.encode()) > ARGV_BUDGET):
            cmd = [mosaic, "generate", "--model", model_dir, "--gen-length", "1", "--steps", "1",
                   "--json", "--quiet", "--allow-long-context"]
            for t in batch:
                cmd += ["--prompt", t]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"check_tokenizer: mosaic failed: {run.stderr.strip()[-1000:]}")
            out += [r["prompt_ids"] for r in json.loads(run.stdout)["results"]]
            batch, size = [], 0
        if text is not None:
            batch.append(text)
            size += len(text.encode())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.path.join(HERE, "data"))
    parser.add_argument("--tokenizer", help="default: DATA/tokenizer/tokenizer.json")
    parser.add_argument("--mosaic", default="build/src/cli/mosaic")
    parser.add_argument("--workdir", default="/tmp/check_tokenizer")
    args = parser.parse_args()
    tokenizer_json = args.tokenizer or os.path.join(args.data, "tokenizer", "tokenizer.json")
    tok = byte_bpe.Tokenizer.load(tokenizer_json)
    eos = tok.token_id(byte_bpe.EOS_TOKEN)

    model_dir = os.path.join(args.workdir, "model")
    shutil.rmtree(model_dir, ignore_errors=True)
    subprocess.run([args.mosaic, "make-test-model", "--family", "llada", "--preset", "tiny",
                    "--layers", "1", "--hidden", "64", "--heads", "1", "--ffn", "64",
                    "--tokenizer", tokenizer_json, "--seed", "0", "--out", model_dir],
                   check=True, capture_output=True)

    failures, chapters, tokens = [], 0, 0
    for split in ("train", "validation", "test"):
        with open(os.path.join(args.data, "corpus", f"{split}.txt"), encoding="utf-8") as f:
            texts = [line.rstrip("\n") for line in f]
        stream = np.load(os.path.join(args.data, "tokens", f"{split}.npy")).astype(np.int64)
        trained = [list(map(int, c[:-1])) for c in np.split(stream, np.flatnonzero(stream == eos) + 1)[:-1]]
        if len(trained) != len(texts):
            failures.append(f"{split}: {len(texts)} chapters but {len(trained)} EOS in the ids")
            continue
        theirs = mosaic_ids(args.mosaic, model_dir, texts)
        for k, (text, mine, cpp) in enumerate(zip(texts, trained, theirs)):
            chapters += 1
            tokens += len(mine)
            if mine != cpp:
                first = next((i for i, (a, b) in enumerate(zip(mine, cpp)) if a != b),
                             min(len(mine), len(cpp)))
                failures.append(f"{split} chapter {k}: first difference at token {first}")
        print(f"{split}: {len(texts)} chapters compared", flush=True)

    theirs = mosaic_ids(args.mosaic, model_dir, EXTRA_TEXTS)
    for text, cpp in zip(EXTRA_TEXTS, theirs):
        mine = tok.encode(text)
        if mine != cpp:
            failures.append(f"text {text!r}: python {mine} vs mosaic {cpp}")
        if tok.decode(mine, skip_special_tokens=False) != text:
            failures.append(f"text {text!r}: python decode(encode(x)) != x")

    print(f"{chapters} chapters ({tokens} tokens) and {len(EXTRA_TEXTS)} further texts: "
          f"{len(failures)} mismatches")
    for f in failures[:20]:
        print("  " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
