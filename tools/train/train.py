#!/usr/bin/env python3
"""Train Mosaic's default model: a small LLaDA (masked diffusion LM) on the KJV Bible.

    python3 tools/train/train.py --data tools/train/data --out $OUT/train --minutes 3.0

Objective (LLaDA pre-training): per sequence t ~ U(eps, 1) (stratified over the batch),
each token masked with probability t, loss = sum over masked tokens of CE / t, divided by
the number of tokens. Batches are windows at uniformly random offsets of the training token
stream (chapters separated by EOS); every --short-every-th step uses windows of a quarter
of the length (four times as many) so the model also sees short canvases.

Time-bounded: --minutes is the wall-clock budget of the whole process up to the end of
training, counted from start-up. After compilation the step time is measured and the
number of steps fixed so the cosine schedule ends within the budget (the step count is
recorded; --steps N repeats a run with a fixed count). The model with the best validation
loss is exported: $OUT/train/model (Hugging Face LLaDA folder, bf16), then evaluated
(validation and test vs a unigram baseline), sampled, and plotted. Everything is written
under --out: results.json, log.csv, loss.png, samples.txt, model/.
"""

import argparse
import csv
import hashlib
import inspect
import json
import math
import os
import platform
import sys
import time

START = time.time()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import byte_bpe  # noqa: E402
import masked_eval as ev  # noqa: E402
import hf_folder  # noqa: E402
import model_card  # noqa: E402
import plot_loss  # noqa: E402
import sample  # noqa: E402
from model import LLaDAModelLM, ModelArgs  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--data", default=os.path.join(HERE, "data"))
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", os.path.join(HERE, "out")),
                                                  "train"))
    p.add_argument("--minutes", type=float, default=3.0, help="wall-clock budget to the end of training")
    p.add_argument("--steps", type=int, default=0, help="fixed number of steps (0: fit the budget)")
    # model
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--n-layers", type=int, default=12)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--mlp-hidden", type=int, default=704)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--dropout", type=float, default=0.1)
    # optimisation
    p.add_argument("--batch-size", type=int, default=128, help="sequences of --seq-len per step")
    p.add_argument("--lr", type=float, default=1.5e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup-steps", type=int, default=300)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--eps", type=float, default=1e-3, help="smallest masking ratio")
    p.add_argument("--short-every", type=int, default=8, help="0: never use short windows")
    # bookkeeping
    p.add_argument("--eval-every", type=int, default=400)
    p.add_argument("--eval-levels", type=int, default=4, help="masking ratios during training")
    p.add_argument("--final-eval-levels", type=int, default=16)
    p.add_argument("--eval-windows", type=int, default=0,
                   help="evaluate on the first N windows only (0: all; for quick CPU tests)")
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--compile", default="auto", choices=["auto", "on", "off"],
                   help="torch.compile each block (torch >= 2.5 on CUDA when auto)")
    p.add_argument("--gen-length", type=int, default=64)
    p.add_argument("--gen-steps", type=int, default=64)
    p.add_argument("--gen-block", type=int, default=32)
    return p.parse_args()


def elapsed():
    return time.time() - START


def lr_at(step, total, a):
    if step < a.warmup_steps:
        return a.lr * (step + 1) / a.warmup_steps
    progress = min(1.0, (step - a.warmup_steps) / max(1, total - a.warmup_steps))
    return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


class Batcher:
    """Random windows of the training stream, drawn on the device (no host sync per step)."""

    def __init__(self, ids, device, seed):
        self.ids = torch.from_numpy(ids.astype(np.int64)).to(device)
        self.g = torch.Generator(device=device).manual_seed(seed)
        self.device = device

    def __call__(self, batch, length):
        starts = torch.randint(0, self.ids.numel() - length, (batch,), generator=self.g,
                               device=self.device)
        return self.ids[starts[:, None] + torch.arange(length, device=self.device)]


def llada_loss(model, x, mask_id, eps, autocast_dtype):
    """LLaDA's masked-diffusion loss; t stratified over the batch (still U(eps, 1) each)."""
    b, length = x.shape
    u = (torch.rand(1, device=x.device) + torch.arange(b, device=x.device) / b) % 1.0
    t = eps + (1 - eps) * u
    masked = torch.rand(b, length, device=x.device) < t[:, None]
    noisy = torch.where(masked, torch.full_like(x, mask_id), x)
    with torch.autocast(device_type=x.device.type, dtype=autocast_dtype,
                        enabled=autocast_dtype is not None):
        logits = model(noisy)
    ce = F.cross_entropy(logits.float().flatten(0, 1), x.flatten(), reduction="none")
    weight = masked.float() / t[:, None]
    return (ce.view(b, length) * weight).sum() / (b * length)


def make_optimizer(model, a, device):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": a.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    kwargs = {"lr": a.lr, "betas": (a.beta1, a.beta2), "eps": 1e-8}
    if device.type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters:
        kwargs["fused"] = True
    return torch.optim.AdamW(groups, **kwargs), kwargs.get("fused", False)


class BlockCompiler:
    """Regional compilation: every block's forward compiled on its own. The blocks share one
    code object, so Dynamo compiles it once per shape and reuses it for all of them, far
    faster than compiling the whole model. Evaluation runs the eager forward (switch off),
    so no-grad/eval graphs are never compiled."""

    def __init__(self, model, mode):
        self.blocks = list(model.model.transformer["blocks"])
        self.compiled = []
        version = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
        wanted = mode == "on" or (mode == "auto" and version >= (2, 5)
                                  and next(model.parameters()).device.type == "cuda")
        if not wanted or not hasattr(torch, "compile"):
            return
        import torch._dynamo as dynamo
        for name in ("cache_size_limit", "recompile_limit"):
            if hasattr(dynamo.config, name):
                setattr(dynamo.config, name, 64)
        self.compiled = [torch.compile(b.forward) for b in self.blocks]
        self.on()

    @property
    def active(self):
        return bool(self.compiled)

    def on(self):
        for block, fn in zip(self.blocks, self.compiled):
            block.forward = fn

    def off(self):
        for block in self.blocks:
            block.__dict__.pop("forward", None)

    def disable(self):
        self.off()
        self.compiled = []


def main():
    a = parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    device = torch.device("cuda" if a.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if a.device == "auto" else a.device))
    autocast_dtype = torch.bfloat16 if device.type == "cuda" else None
    deadline = START + a.minutes * 60

    # -- data ------------------------------------------------------------------------------
    with open(os.path.join(a.data, "tokens", "tokens.json")) as f:
        token_facts = json.load(f)
    with open(os.path.join(a.data, "corpus", "corpus.json")) as f:
        corpus_facts = json.load(f)
    splits = {s: np.load(os.path.join(a.data, "tokens", f"{s}.npy"))
              for s in ("train", "validation", "test")}
    for s, ids in splits.items():  # a stale or partial copy of the data must not train
        if hashlib.sha256(ids.tobytes()).hexdigest() != token_facts["splits"][s]["sha256"]:
            sys.exit(f"train: {s}.npy does not match tokens.json; rerun tools/train/prepare.sh")
    vocab, mask_id, eos_id = (token_facts["vocab_size"], token_facts["mask_token_id"],
                              token_facts["eos_token_id"])
    unigram = ev.unigram_log_probs(splits["train"], vocab, mask_id)
    held_out = {s: splits[s][: a.eval_windows * a.seq_len] if a.eval_windows else splits[s]
                for s in ("validation", "test")}
    batcher = Batcher(splits["train"], device, a.seed + 1)

    # -- model -----------------------------------------------------------------------------
    margs = ModelArgs(vocab_size=vocab, d_model=a.d_model, n_layers=a.n_layers,
                      n_heads=a.n_heads, mlp_hidden_size=a.mlp_hidden,
                      max_sequence_length=a.seq_len, rope_theta=a.rope_theta,
                      mask_token_id=mask_id, eos_token_id=eos_id, dropout=a.dropout)
    model = LLaDAModelLM(margs)
    model.init_weights(a.seed)
    model.to(device).train()
    optimizer, fused = make_optimizer(model, a, device)
    n_params = model.num_parameters()
    print(f"[{elapsed():6.1f}s] {n_params / 1e6:.2f}M parameters on {device}; "
          f"train {len(splits['train'])} tokens", flush=True)

    def shape_of(step):
        if a.short_every and step % a.short_every == a.short_every - 1:
            return a.batch_size * 4, a.seq_len // 4
        return a.batch_size, a.seq_len

    # -- compile and warm up both shapes (forward + backward, no update) ---------------------
    compiler = BlockCompiler(model, a.compile)
    t0 = time.time()
    try:
        for shape in {shape_of(0), shape_of(a.short_every - 1 if a.short_every else 0)}:
            loss = llada_loss(model, batcher(*shape), mask_id, a.eps, autocast_dtype)
            loss.backward()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
    except Exception as error:  # a compiler problem must not cost the run
        if not compiler.active:
            raise
        print(f"torch.compile failed ({type(error).__name__}: {error}); training eagerly",
              flush=True)
        compiler.disable()
        optimizer.zero_grad(set_to_none=True)
    compile_s = time.time() - t0
    compiled = compiler.active
    # The warm-up drew batches; restart the stream so the run depends only on the seed.
    batcher = Batcher(splits["train"], device, a.seed + 1)
    torch.manual_seed(a.seed + 2)
    print(f"[{elapsed():6.1f}s] warm-up done in {compile_s:.1f}s (compiled: {compiled})", flush=True)

    # -- train -----------------------------------------------------------------------------
    total_steps = a.steps if a.steps > 0 else 10 ** 9
    calibrate_at = 50
    log_rows, eval_rows = [], []
    best = {"elbo": float("inf"), "step": -1, "state": None}
    running, running_n, tokens_seen = torch.zeros((), device=device), 0, 0
    step, t_train = 0, time.time()
    interval_start, interval_tokens = time.time(), 0
    eval_seconds = 0.0
    stopped_by = "steps"

    def run_eval(step):
        nonlocal eval_seconds
        t = time.time()
        compiler.off()
        r = ev.evaluate(model, held_out["validation"], a.seq_len, mask_id, unigram,
                        k=a.eval_levels, batch_size=128, device=device,
                        autocast_dtype=autocast_dtype)
        compiler.on()
        eval_seconds += time.time() - t
        row = {"step": step, "tokens": tokens_seen, "elapsed_s": round(elapsed(), 2),
               "val_elbo": r["model"]["elbo"], "val_masked_ce": r["model"]["masked_ce"]}
        eval_rows.append(row)
        if r["model"]["elbo"] < best["elbo"]:
            best.update(elbo=r["model"]["elbo"], step=step,
                        state={k: v.detach().clone() for k, v in model.state_dict().items()})
        print(f"[{elapsed():6.1f}s] step {step:6d} val elbo {row['val_elbo']:.4f} "
              f"masked ce {row['val_masked_ce']:.4f} (best {best['elbo']:.4f} @ {best['step']})",
              flush=True)

    def train_step(x):
        loss = llada_loss(model, x, mask_id, a.eps, autocast_dtype)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        optimizer.step()
        return loss, grad_norm

    while step < total_steps:
        if a.steps <= 0 and time.time() > deadline:
            stopped_by = "time"
            break
        lr = lr_at(step, total_steps, a)
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch, length = shape_of(step)
        x = batcher(batch, length)
        try:
            loss, grad_norm = train_step(x)
        except Exception as error:  # a late compiler failure: go on eagerly
            if not compiler.active:
                raise
            print(f"compiled step failed ({type(error).__name__}: {error}); going on eagerly",
                  flush=True)
            compiler.disable()
            loss, grad_norm = train_step(x)
        running += loss.detach()
        running_n += 1
        tokens_seen += batch * length
        interval_tokens += batch * length
        step += 1

        if step == calibrate_at and a.steps <= 0:
            if device.type == "cuda":
                torch.cuda.synchronize()
            per_step = (time.time() - t_train) / step
            per_step *= 1 + 0.02  # evaluation and logging overhead
            remaining = deadline - time.time()
            total_steps = step + max(0, int(remaining / per_step))
            total_steps = max(total_steps, a.warmup_steps + 1)
            print(f"[{elapsed():6.1f}s] {per_step * 1000:.1f} ms/step -> {total_steps} steps",
                  flush=True)
        if step % a.log_every == 0 or step == total_steps:
            now = time.time()
            row = {"step": step, "tokens": tokens_seen, "epochs": tokens_seen / len(splits["train"]),
                   "elapsed_s": round(elapsed(), 2), "lr": lr,
                   "train_loss": float(running) / running_n, "grad_norm": float(grad_norm),
                   "tokens_per_s": interval_tokens / (now - interval_start)}
            log_rows.append(row)
            running.zero_()
            running_n, interval_start, interval_tokens = 0, now, 0
            print(f"[{elapsed():6.1f}s] step {step:6d}/{total_steps} loss {row['train_loss']:.4f} "
                  f"lr {lr:.2e} {row['tokens_per_s'] / 1e6:.2f}M tok/s", flush=True)
        if step % a.eval_every == 0 or step == total_steps:
            run_eval(step)
    if not eval_rows or eval_rows[-1]["step"] != step:
        run_eval(step)
    train_s = time.time() - t_train
    print(f"[{elapsed():6.1f}s] trained {step} steps in {train_s:.1f}s ({stopped_by}); "
          f"best validation elbo {best['elbo']:.4f} at step {best['step']}", flush=True)

    # -- export the best weights, then measure the exported model ----------------------------
    model.load_state_dict(best["state"])
    compiler.disable()
    model_dir = os.path.join(a.out, "model")
    files = hf_folder.save_folder(model, model_dir, os.path.join(a.data, "tokenizer"))
    shipped = hf_folder.load_folder(model_dir, device)  # bf16 weights, fp32 compute
    final = {}
    for split in ("validation", "test"):
        final[split] = ev.evaluate(shipped, held_out[split], a.seq_len, mask_id, unigram,
                                   k=a.final_eval_levels, device=device)
        m, u = final[split]["model"], final[split]["unigram"]
        print(f"{split}: masked ce {m['masked_ce']:.4f} vs unigram {u['masked_ce']:.4f}; "
              f"elbo {m['elbo']:.4f} vs {u['elbo']:.4f}", flush=True)

    tok = byte_bpe.Tokenizer.load(os.path.join(model_dir, "tokenizer.json"))
    samples = make_samples(shipped, tok, a, mask_id, eos_id, device)
    hf_check = check_hf_tokenizer(model_dir, a.data, tok, splits, eos_id)

    results = {
        "model_name": "mosaic default (LLaDA architecture, KJV)",
        "parameters": n_params,
        "architecture": hf_folder.llada_config(margs),
        "hyperparameters": vars(a),
        "data": {"corpus": corpus_facts, "tokens": token_facts},
        "training": {
            "steps": step, "planned_steps": total_steps, "stopped_by": stopped_by,
            "tokens_seen": tokens_seen, "epochs": tokens_seen / len(splits["train"]),
            "best_step": best["step"], "best_val_elbo_during_training": best["elbo"],
            "train_seconds": train_s, "compile_seconds": compile_s, "compiled": compiled,
            "eval_seconds_during_training": eval_seconds, "fused_adamw": fused,
        },
        "final_eval": final,
        "bits_per_byte": bits_per_byte(final, token_facts),
        "export": {"files": files, "total_bytes": sum(files.values())},
        "samples": samples,
        "hf_tokenizers_check": hf_check,
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
                        "host": platform.node()},
    }
    write_log(a.out, log_rows, eval_rows)
    results["plot"] = plot_loss.plot(os.path.join(a.out, "log.csv"),
                                     os.path.join(a.out, "eval.csv"),
                                     os.path.join(a.out, "loss"), final)
    with open(os.path.join(a.out, "samples.txt"), "w", encoding="utf-8") as f:
        f.write(model_card.samples_text(samples))
    with open(os.path.join(model_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write(model_card.card(results))
    results["export"]["files"] = {n: os.path.getsize(os.path.join(model_dir, n))
                                  for n in sorted(os.listdir(model_dir))}
    results["export"]["total_bytes"] = sum(results["export"]["files"].values())
    results["wall_seconds"] = elapsed()
    with open(os.path.join(a.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    print(f"[{elapsed():6.1f}s] wrote {a.out} (model {results['export']['total_bytes'] / 1e6:.2f} MB)",
          flush=True)


def bits_per_byte(final, token_facts):
    out = {}
    for split, r in final.items():
        bpt = token_facts["splits"][split]["bytes_per_token"]
        out[split] = {name: r[name]["elbo"] / math.log(2) / bpt for name in ("model", "unigram")}
    return out


def make_samples(model, tok, a, mask_id, eos_id, device):
    with open(os.path.join(a.data, "tokens", "prompts.json")) as f:
        prompts = json.load(f)
    # Greedy with semi-autoregressive blocks, greedy with one block (mosaic generate's
    # default block length), and sampled.
    settings = [{"temperature": 0.0, "seed": 0, "block_length": a.gen_block},
                {"temperature": 0.0, "seed": 0, "block_length": a.gen_length},
                {"temperature": 0.8, "seed": 1, "block_length": a.gen_block}]
    if a.gen_block == a.gen_length:
        del settings[1]
    out = []
    for s in settings:
        g = torch.Generator(device=device).manual_seed(s["seed"])
        for p in prompts:
            canvas = sample.generate(model, p["ids"], mask_id, a.gen_length, a.gen_steps,
                                     s["block_length"], s["temperature"], g)
            answer = canvas[len(p["ids"]):]
            if eos_id in answer:
                answer = answer[:answer.index(eos_id)]
            out.append({"prompt": p["text"], "prompt_ids": p["ids"], "output_ids": canvas[len(p["ids"]):],
                        "text": tok.decode(answer), "gen_length": a.gen_length,
                        "steps": a.gen_steps, **s})
    return out


def check_hf_tokenizer(model_dir, data_dir, tok, splits, eos_id):
    """Where Hugging Face `tokenizers` is installed (the GPU machine): its ids for every
    chapter must be the ones trained on (the .npy streams, cut at EOS), and its decoding
    must give the chapter back. Never fails the run; the verdict goes into results.json."""
    try:
        import tokenizers
        hf = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        mismatches, chapters = [], 0
        for split in ("train", "validation", "test"):
            with open(os.path.join(data_dir, "corpus", f"{split}.txt"), encoding="utf-8") as f:
                texts = [line.rstrip("\n") for line in f]
            stream = splits[split].astype(np.int64)
            cuts = np.flatnonzero(stream == eos_id)
            ours = np.split(stream, cuts + 1)[:-1]
            encoded = hf.encode_batch(texts, add_special_tokens=True)
            for k, (text, mine, theirs) in enumerate(zip(texts, ours, encoded)):
                chapters += 1
                if list(mine[:-1]) != theirs.ids or hf.decode(theirs.ids) != text:
                    mismatches.append(f"{split}:{k}")
            if len(texts) != len(ours):
                mismatches.append(f"{split}: {len(texts)} chapters, {len(ours)} EOS")
        extra = ["<|mdm_mask|> and <|endoftext|>", "naïve café, 3.14 — ünïcödé ✓ 中文",
                 "  a  b\n\nc ", "I'll say: \"it's 1,000,000!\""]
        try:
            for text in extra:
                if tok.encode(text) != hf.encode(text).ids:
                    mismatches.append(repr(text))
        except ImportError:  # byte_bpe's encoder needs the `regex` module
            extra = []
        return {"checked": True, "tokenizers_version": tokenizers.__version__,
                "chapters": chapters, "extra_texts": len(extra), "mismatches": mismatches[:20],
                "mismatch_count": len(mismatches)}
    except Exception as error:
        return {"checked": False, "reason": f"{type(error).__name__}: {error}"}


def write_log(out, log_rows, eval_rows):
    for name, rows in (("log.csv", log_rows), ("eval.csv", eval_rows)):
        with open(os.path.join(out, name), "w", newline="") as f:
            if rows:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)


if __name__ == "__main__":
    main()
