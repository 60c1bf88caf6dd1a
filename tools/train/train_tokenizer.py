#!/usr/bin/python3
"""Train the byte-level BPE on the training split and tokenize every split.

    /usr/bin/python3 tools/train/train_tokenizer.py --corpus tools/train/data/corpus \
        --out tools/train/data --vocab-size 4096

Writes into --out:
    tokenizer/tokenizer.json, tokenizer/tokenizer_config.json
    tokens/{train,validation,test}.npy   uint16 ids: each chapter, then EOS
    tokens/prompts.json                  the sample prompts of prompts.txt, encoded
    tokens/tokens.json                   counts, checksums, vocabulary facts
Every split is checked to decode back to its exact text.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import byte_bpe  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SPLITS = ("train", "validation", "test")


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def read_prompts(path):
    return [line.rstrip("\n") for line in open(path, encoding="utf-8")
            if line.strip() and not line.startswith("#")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--corpus", default=os.path.join(HERE, "data", "corpus"))
    parser.add_argument("--out", default=os.path.join(HERE, "data"))
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--max-length", type=int, default=256,
                        help="model_max_length written to tokenizer_config.json")
    parser.add_argument("--prompts", default=os.path.join(HERE, "prompts.txt"))
    args = parser.parse_args()

    chapters = {s: read_lines(os.path.join(args.corpus, f"{s}.txt")) for s in SPLITS}
    start = time.time()
    tok = byte_bpe.train(
        chapters["train"], args.vocab_size,
        progress=lambda m, v: print(f"  {m} merges, {v} tokens", flush=True))
    print(f"trained {len(tok.merges)} merges, vocabulary {len(tok)} in {time.time() - start:.1f} s")
    if len(tok) != args.vocab_size:
        sys.exit(f"train_tokenizer: vocabulary has {len(tok)} entries, asked {args.vocab_size}")

    tok_dir = os.path.join(args.out, "tokenizer")
    os.makedirs(tok_dir, exist_ok=True)
    tok.save(os.path.join(tok_dir, "tokenizer.json"))
    byte_bpe.write_tokenizer_config(tok, os.path.join(tok_dir, "tokenizer_config.json"),
                                    args.max_length)
    # Encode through the saved file, so the ids come from exactly what ships.
    tok = byte_bpe.Tokenizer.load(os.path.join(tok_dir, "tokenizer.json"))
    eos = tok.token_id(byte_bpe.EOS_TOKEN)

    tokens_dir = os.path.join(args.out, "tokens")
    os.makedirs(tokens_dir, exist_ok=True)
    facts = {"vocab_size": len(tok), "merges": len(tok.merges), "eos_token_id": eos,
             "mask_token_id": tok.token_id(byte_bpe.MASK_TOKEN),
             "layout": "each chapter's ids followed by eos_token_id", "splits": {}}
    for split in SPLITS:
        ids = []
        for text in chapters[split]:
            piece = tok.encode(text)
            if tok.decode(piece) != text:
                sys.exit(f"train_tokenizer: {split}: decode(encode(x)) != x for {text[:60]!r}")
            ids.extend(piece)
            ids.append(eos)
        array = np.asarray(ids, dtype=np.uint16)
        path = os.path.join(tokens_dir, f"{split}.npy")
        np.save(path, array)
        n_bytes = sum(len(t.encode("utf-8")) for t in chapters[split])
        facts["splits"][split] = {"file": f"{split}.npy", "tokens": int(array.size),
                                  "bytes_per_token": round(n_bytes / array.size, 3),
                                  "sha256": hashlib.sha256(array.tobytes()).hexdigest()}
        print(f"{split:>10}: {array.size} tokens ({n_bytes / array.size:.2f} bytes/token)")

    prompts = read_prompts(args.prompts)
    with open(os.path.join(tokens_dir, "prompts.json"), "w", encoding="utf-8") as f:
        json.dump([{"text": p, "ids": tok.encode(p)} for p in prompts], f, indent=1)
    with open(os.path.join(tokens_dir, "tokens.json"), "w", encoding="utf-8") as f:
        json.dump(facts, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
