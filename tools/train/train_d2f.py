#!/usr/bin/env python3
"""Train a D2F (Discrete Diffusion Forcing) LoRA adapter for Mosaic's built-in model.

    python3 tools/train/train_d2f.py --data tools/train/data --out $OUT/d2f --minutes 5.0

The recipe is D2F's (shared/reference/caches-and-d2f.md §1.2-1.4), at this model's scale:

  data     windows of --seq-len tokens at uniformly random offsets of the training split
           (tools/train/data, made by prepare.sh), each cut at a random point into a prompt
           (P ~ U{--prompt-min .. --prompt-max} tokens, never masked) and an answer; the answer
           is cut into blocks of --block (16) tokens starting at the prompt's end (the last
           block may be shorter).
  noise    per window, block mask ratios monotone non-decreasing: r_1 = p0 ~ U[0.2, 0.7), and
           r_j = min(1, p0 + sum_{i=2..j} u_i (0.7 - p0) / (n - 1)), u_i ~ U[0, 1), n the
           window's number of blocks; each answer token of block j is masked with prob. r_j.
  student  the base model plus LoRA on q_proj, k_proj, v_proj, attn_out (D2F's targets) under
           block-causal attention with the prompt as one block: a query in block j sees the
           keys of blocks 0..j (an additive -inf mask to scaled_dot_product_attention).
  teacher  the frozen base model without LoRA under full bidirectional attention, on the same
           noisy sequence.
  loss     over masked positions, the soft cross-entropy -sum_v p_teacher(v) log p_student(v),
           divided by the block's mask ratio; summed and divided by the number of answer
           tokens (so E[sum of 1/r over masked] = answer tokens: a per-answer-token average).
           KL(teacher || student) = loss term - teacher entropy is logged as well.

Only LoRA's A and B train (PEFT's initialisation: A kaiming-uniform(a=sqrt(5)), B zero, so the
student starts as the base under block-causal attention); the base is frozen and runs without
dropout; LoRA dropout on the adapter's input. AdamW, linear warm-up then cosine to
--min-lr-ratio; time-bounded like train.py (--minutes of wall clock from start-up; the step
count is fixed after 50 timed steps so the cosine ends in time; --steps N repeats a run).
The adapter with the best validation objective is written as a PEFT folder
(adapter_config.json, adapter_model.safetensors in F32, README.md) under --out/adapter, with
results.json, log.csv, eval.csv and train.log beside it.

Works with torch 1.13 on the CPU (smoke test) and torch 2.x on CUDA (bf16 autocast, the blocks
compiled one by one as train.py does).
"""

import argparse
import contextlib
import copy
import csv
import hashlib
import json
import math
import os
import platform
import sys
import time

START = time.time()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_folder  # noqa: E402
from hf_folder import safetensors_np  # noqa: E402
from train import BlockCompiler, Batcher, lr_at  # noqa: E402

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
TARGETS = ("q_proj", "k_proj", "v_proj", "attn_out")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", default=os.path.join(REPO, "models", "kjv-llada-12m"),
                   help="the base model folder (Hugging Face LLaDA)")
    p.add_argument("--base-name", default=None,
                   help="adapter_config.json's base_model_name_or_path (default: the folder's name)")
    p.add_argument("--data", default=os.path.join(HERE, "data"))
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", os.path.join(HERE, "out")), "d2f"))
    p.add_argument("--minutes", type=float, default=5.0, help="wall-clock budget to the end of training")
    p.add_argument("--steps", type=int, default=0, help="fixed number of steps (0: fit the budget)")
    # adapter
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=float, default=16.0, help="lora_alpha (scaling alpha / rank)")
    p.add_argument("--lora-dropout", type=float, default=0.1)
    p.add_argument("--targets", default=",".join(TARGETS))
    # the D2F objective
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--block", type=int, default=16, help="answer block length")
    p.add_argument("--prompt-min", type=int, default=1)
    p.add_argument("--prompt-max", type=int, default=192)
    p.add_argument("--ratio-low", type=float, default=0.2, help="first block's ratio ~ U[low, high)")
    p.add_argument("--ratio-high", type=float, default=0.7, help="... and the cap of the increments")
    # optimisation
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--grad-clip", type=float, default=1.0)
    # bookkeeping
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-windows", type=int, default=0,
                   help="evaluate on the first N windows only (0: all; for quick CPU tests)")
    p.add_argument("--eval-batch", type=int, default=64)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--compile", default="auto", choices=["auto", "on", "off"])
    a = p.parse_args(argv)
    if not 1 <= a.prompt_min <= a.prompt_max < a.seq_len:
        p.error("need 1 <= --prompt-min <= --prompt-max < --seq-len")
    if not 0.0 <= a.ratio_low <= a.ratio_high <= 1.0:
        p.error("need 0 <= --ratio-low <= --ratio-high <= 1")
    return a


def elapsed():
    return time.time() - START


# -- LoRA ------------------------------------------------------------------------------------

class LoRALinear(nn.Module):
    """y = base(x) + scaling * B(A(dropout(x))), PEFT's LoRA layer on a frozen nn.Linear."""

    def __init__(self, base: nn.Linear, rank, alpha, dropout, generator):
        super().__init__()
        self.base = base
        out_features, in_features = base.weight.shape
        # PEFT: nn.init.kaiming_uniform_(A, a=sqrt(5)) -> U(-1/sqrt(in), 1/sqrt(in)); B = 0.
        bound = 1.0 / math.sqrt(in_features)
        a = (torch.rand(rank, in_features, generator=generator) * 2 - 1) * bound
        self.lora_A = nn.Parameter(a.to(base.weight.device))
        self.lora_B = nn.Parameter(torch.zeros(out_features, rank, device=base.weight.device))
        self.scaling = alpha / rank
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(self.dropout(x), self.lora_A), self.lora_B) * self.scaling


def add_lora(model, targets, rank, alpha, dropout, seed):
    """Wraps every targeted projection of every block; returns {module path: LoRALinear}."""
    g = torch.Generator().manual_seed(seed)
    wrapped = {}
    for i, block in enumerate(model.model.transformer["blocks"]):
        for name in targets:
            layer = LoRALinear(getattr(block, name), rank, alpha, dropout, g)
            setattr(block, name, layer)
            wrapped[f"model.transformer.blocks.{i}.{name}"] = layer
    return wrapped


def adapter_state(wrapped):
    """PEFT's save_pretrained keys: base_model.model.<module>.lora_{A,B}.weight."""
    out = {}
    for module, layer in wrapped.items():
        out[f"base_model.model.{module}.lora_A.weight"] = layer.lora_A.detach().float().cpu().clone()
        out[f"base_model.model.{module}.lora_B.weight"] = layer.lora_B.detach().float().cpu().clone()
    return out


def load_adapter_state(wrapped, state):
    with torch.no_grad():
        for module, layer in wrapped.items():
            layer.lora_A.copy_(state[f"base_model.model.{module}.lora_A.weight"])
            layer.lora_B.copy_(state[f"base_model.model.{module}.lora_B.weight"])


def adapter_config(a, targets):
    return {
        "peft_type": "LORA", "task_type": None, "r": a.rank, "lora_alpha": a.alpha,
        "lora_dropout": a.lora_dropout, "bias": "none", "lora_bias": False, "fan_in_fan_out": False,
        "use_dora": False, "use_rslora": False, "init_lora_weights": True,
        "target_modules": sorted(targets), "alpha_pattern": {}, "rank_pattern": {},
        "layers_to_transform": None, "layers_pattern": None, "modules_to_save": None,
        "exclude_modules": None, "layer_replication": None,
        "base_model_name_or_path": a.base_name or os.path.basename(os.path.normpath(a.base)),
        "auto_mapping": {"base_model_class": "LLaDAModelLM", "parent_library": "modeling_llada"},
    }


# -- the D2F batch and loss --------------------------------------------------------------------

def d2f_noise(x, a, mask_id, generator=None):
    """Prompt lengths, block ids, per-position mask ratios and masks for windows x [b, L].
    Returns (noisy, masked, ratio, answer, block_id); draws from `generator` (or the global
    generator of x's device)."""
    b, length = x.shape
    dev = x.device

    def rand(*shape):
        return torch.rand(*shape, device=dev, generator=generator)

    prompt = torch.randint(a.prompt_min, a.prompt_max + 1, (b,), device=dev, generator=generator)
    pos = torch.arange(length, device=dev)[None, :]
    answer = pos >= prompt[:, None]
    block_id = torch.where(answer, 1 + (pos - prompt[:, None]).clamp(min=0) // a.block,
                           torch.zeros_like(pos))
    n_blocks = (length - prompt + a.block - 1) // a.block             # >= 1
    max_blocks = (length - a.prompt_min + a.block - 1) // a.block
    p0 = a.ratio_low + (a.ratio_high - a.ratio_low) * rand(b, 1)
    u = rand(b, max_blocks)
    u[:, 0] = 0.0
    step = (a.ratio_high - p0) / (n_blocks[:, None] - 1).clamp(min=1).to(p0.dtype)
    block_ratio = (p0 + (u * step).cumsum(dim=1)).clamp(max=1.0)      # [b, max_blocks]
    ratio = block_ratio.gather(1, (block_id - 1).clamp(min=0))         # [b, L]
    masked = answer & (rand(b, length) < ratio)
    noisy = torch.where(masked, torch.full_like(x, mask_id), x)
    return noisy, masked, ratio, answer, block_id


def block_causal_mask(block_id, dtype):
    """Additive [b, 1, L, L] mask: query q sees key k iff block(k) <= block(q)."""
    allowed = block_id[:, None, :] <= block_id[:, :, None]
    mask = torch.zeros(allowed.shape, dtype=dtype, device=block_id.device)
    return mask.masked_fill(~allowed, float("-inf"))[:, None]


def autocast(device, dtype):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def soft_ce_terms(student_logits, teacher_logits):
    """Per position: soft CE -sum p_t log p_s and the teacher's entropy (fp32)."""
    t_logp = F.log_softmax(teacher_logits.float(), dim=-1)
    s_logp = F.log_softmax(student_logits.float(), dim=-1)
    p_t = t_logp.exp()
    return -(p_t * s_logp).sum(-1), -(p_t * t_logp).sum(-1)


def d2f_loss(student, teacher, x, a, mask_id, autocast_dtype, generator=None):
    noisy, masked, ratio, answer, block_id = d2f_noise(x, a, mask_id, generator)
    mask = block_causal_mask(block_id, autocast_dtype or torch.float32)
    with torch.no_grad(), autocast(x.device, autocast_dtype):
        t_logits = teacher(noisy)
    with autocast(x.device, autocast_dtype):
        s_logits = student(noisy, mask)
    ce, entropy = soft_ce_terms(s_logits, t_logits)
    m = masked.float()
    loss = (ce * m / ratio.clamp(min=1e-6)).sum() / answer.sum()
    kl = ((ce - entropy).detach() * m).sum() / m.sum().clamp(min=1)
    return loss, kl


@torch.no_grad()
def evaluate(student, teacher, windows, a, mask_id, device, autocast_dtype, seed=1234,
             with_base=False):
    """Fixed prompts and masks (CPU generator `seed`) over `windows` [n, L]. Returns the
    objective, KL(teacher || student) and top-1 agreement per masked token, and the data CE
    (-log p(true token)) of student and teacher; with_base: the same for the base under
    block-causal attention (= the student before training)."""
    was = student.training
    student.eval()
    g = torch.Generator().manual_seed(seed)
    sums = {k: 0.0 for k in ("obj", "kl", "agree", "ce_student", "ce_teacher", "kl_base",
                             "agree_base", "ce_base", "obj_base")}
    masked_n = answer_n = 0
    for start in range(0, windows.shape[0], a.eval_batch):
        x = windows[start:start + a.eval_batch]
        noisy, masked, ratio, answer, block_id = d2f_noise(x, a, mask_id, g)
        noisy, masked, ratio, answer, block_id, x = (t.to(device) for t in
                                                     (noisy, masked, ratio, answer, block_id, x))
        mask = block_causal_mask(block_id, autocast_dtype or torch.float32)
        with autocast(device, autocast_dtype):
            t_logits = teacher(noisy).float()
            runs = [("", student(noisy, mask).float())]
            if with_base:
                runs.append(("_base", teacher(noisy, mask).float()))
        m = masked.float()
        t_top = t_logits.argmax(-1)
        sums["ce_teacher"] += float((F.cross_entropy(t_logits.flatten(0, 1), x.flatten(),
                                                     reduction="none").view(x.shape) * m).sum())
        for suffix, s_logits in runs:
            ce, entropy = soft_ce_terms(s_logits, t_logits)
            sums["obj" + suffix] += float((ce * m / ratio.clamp(min=1e-6)).sum())
            sums["kl" + suffix] += float(((ce - entropy) * m).sum())
            sums["agree" + suffix] += float(((s_logits.argmax(-1) == t_top).float() * m).sum())
            name = "ce_student" if suffix == "" else "ce_base"
            sums[name] += float((F.cross_entropy(s_logits.flatten(0, 1), x.flatten(),
                                                 reduction="none").view(x.shape) * m).sum())
        masked_n += int(masked.sum())
        answer_n += int(answer.sum())
    student.train(was)
    out = {"windows": int(windows.shape[0]), "answer_tokens": answer_n, "masked_tokens": masked_n,
           "objective": sums["obj"] / answer_n, "kl": sums["kl"] / masked_n,
           "top1_agreement": sums["agree"] / masked_n, "ce_student": sums["ce_student"] / masked_n,
           "ce_teacher": sums["ce_teacher"] / masked_n}
    if with_base:
        out.update(objective_base=sums["obj_base"] / answer_n, kl_base=sums["kl_base"] / masked_n,
                   top1_agreement_base=sums["agree_base"] / masked_n, ce_base=sums["ce_base"] / masked_n)
    return out


def split_windows(ids, seq_len, limit):
    n = len(ids) // seq_len
    w = torch.from_numpy(np.asarray(ids[: n * seq_len], dtype=np.int64)).view(n, seq_len)
    return w[:limit] if limit else w


# -- the run -----------------------------------------------------------------------------------

def main(argv=None):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    device = torch.device("cuda" if a.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if a.device == "auto" else a.device))
    autocast_dtype = torch.bfloat16 if device.type == "cuda" else None
    deadline = START + a.minutes * 60
    targets = [t for t in a.targets.split(",") if t]

    with open(os.path.join(a.data, "tokens", "tokens.json")) as f:
        token_facts = json.load(f)
    splits = {s: np.load(os.path.join(a.data, "tokens", f"{s}.npy")) for s in ("train", "validation", "test")}
    for s, ids in splits.items():
        if hashlib.sha256(ids.tobytes()).hexdigest() != token_facts["splits"][s]["sha256"]:
            sys.exit(f"train_d2f: {s}.npy does not match tokens.json; rerun tools/train/prepare.sh")
    with open(os.path.join(a.base, "config.json")) as f:
        base_config = json.load(f)
    mask_id = base_config["mask_token_id"]
    if mask_id != token_facts["mask_token_id"] or base_config["vocab_size"] != token_facts["vocab_size"]:
        sys.exit("train_d2f: the base model's vocabulary is not the data's")
    if a.seq_len > base_config["max_sequence_length"]:
        sys.exit("train_d2f: --seq-len exceeds the base model's context")
    held_out = {s: split_windows(splits[s], a.seq_len, a.eval_windows) for s in ("validation", "test")}

    # The base: the shipped bf16 weights widened to fp32, frozen. Teacher = it; student = a
    # copy of it with LoRA.
    teacher = hf_folder.load_folder(a.base, device)
    for p in teacher.parameters():
        p.requires_grad_(False)
    student = copy.deepcopy(teacher)
    wrapped = add_lora(student, targets, a.rank, a.alpha, a.lora_dropout, a.seed)
    student.to(device).train()   # LoRA dropout on; the base has no dropout (ModelArgs.dropout 0)
    params = [p for layer in wrapped.values() for p in (layer.lora_A, layer.lora_B)]
    n_lora = sum(p.numel() for p in params)
    kwargs = {"lr": a.lr, "betas": (a.beta1, a.beta2), "eps": 1e-8, "weight_decay": a.weight_decay}
    if device.type == "cuda":
        import inspect
        if "fused" in inspect.signature(torch.optim.AdamW).parameters:
            kwargs["fused"] = True
    optimizer = torch.optim.AdamW(params, **kwargs)
    print(f"[{elapsed():6.1f}s] base {a.base}: {teacher.num_parameters() / 1e6:.2f}M frozen; LoRA r={a.rank} "
          f"alpha={a.alpha} on {','.join(targets)}: {n_lora} trainable ({n_lora * 4 / 1e6:.2f} MB F32) "
          f"on {device}", flush=True)

    batcher = Batcher(splits["train"], device, a.seed + 1)
    compilers = [BlockCompiler(student, a.compile), BlockCompiler(teacher, a.compile)]
    t0 = time.time()
    try:
        loss, _ = d2f_loss(student, teacher, batcher(a.batch_size, a.seq_len), a, mask_id, autocast_dtype)
        loss.backward()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
    except Exception as error:  # a compiler problem must not cost the run
        if not any(c.active for c in compilers):
            raise
        print(f"torch.compile failed ({type(error).__name__}: {error}); training eagerly", flush=True)
        for c in compilers:
            c.disable()
        optimizer.zero_grad(set_to_none=True)
    compile_s = time.time() - t0
    compiled = any(c.active for c in compilers)
    batcher = Batcher(splits["train"], device, a.seed + 1)   # the run depends only on the seed
    torch.manual_seed(a.seed + 2)
    print(f"[{elapsed():6.1f}s] warm-up done in {compile_s:.1f}s (compiled: {compiled})", flush=True)

    def compilers_off():
        for c in compilers:
            c.off()

    def compilers_on():
        for c in compilers:
            c.on()

    eval_rows, log_rows = [], []
    best = {"objective": float("inf"), "step": -1, "state": adapter_state(wrapped)}
    eval_seconds = 0.0

    def run_eval(step, with_base=False):
        nonlocal eval_seconds
        t = time.time()
        compilers_off()
        r = evaluate(student, teacher, held_out["validation"], a, mask_id, device, autocast_dtype,
                     with_base=with_base)
        compilers_on()
        eval_seconds += time.time() - t
        row = {"step": step, "elapsed_s": round(elapsed(), 2), "val_objective": r["objective"],
               "val_kl": r["kl"], "val_top1_agreement": r["top1_agreement"], "val_ce": r["ce_student"]}
        eval_rows.append(row)
        if r["objective"] < best["objective"]:
            best.update(objective=r["objective"], step=step, state=adapter_state(wrapped))
        extra = (f" | base block-causal: objective {r['objective_base']:.4f} kl {r['kl_base']:.4f} "
                 f"agree {r['top1_agreement_base']:.3f}; teacher ce {r['ce_teacher']:.4f}") if with_base else ""
        print(f"[{elapsed():6.1f}s] step {step:6d} val objective {r['objective']:.4f} kl {r['kl']:.4f} "
              f"agree {r['top1_agreement']:.3f} ce {r['ce_student']:.4f} (best {best['objective']:.4f} "
              f"@ {best['step']}){extra}", flush=True)
        return r

    initial = run_eval(0, with_base=True)
    total_steps = a.steps if a.steps > 0 else 10 ** 9
    calibrate_at = 50
    step, stopped_by = 0, "steps"
    running = torch.zeros((), device=device)
    running_kl = torch.zeros((), device=device)
    running_n = 0
    t_train = time.time()

    def train_step(x):
        loss, kl = d2f_loss(student, teacher, x, a, mask_id, autocast_dtype)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, a.grad_clip)
        optimizer.step()
        return loss, kl, grad_norm

    while step < total_steps:
        if a.steps <= 0 and time.time() > deadline:
            stopped_by = "time"
            break
        lr = lr_at(step, total_steps, a)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x = batcher(a.batch_size, a.seq_len)
        try:
            loss, kl, grad_norm = train_step(x)
        except Exception as error:  # a late compiler failure: go on eagerly
            if not compiled:
                raise
            print(f"compiled step failed ({type(error).__name__}: {error}); going on eagerly", flush=True)
            for c in compilers:
                c.disable()
            compiled = False
            loss, kl, grad_norm = train_step(x)
        running += loss.detach()
        running_kl += kl
        running_n += 1
        step += 1
        if step == calibrate_at and a.steps <= 0:
            if device.type == "cuda":
                torch.cuda.synchronize()
            per_step = (time.time() - t_train - eval_seconds) / step * 1.03
            total_steps = step + max(0, int((deadline - time.time()) / per_step))
            total_steps = max(total_steps, a.warmup_steps + 1)
            print(f"[{elapsed():6.1f}s] {per_step * 1000:.1f} ms/step -> {total_steps} steps", flush=True)
        if step % a.log_every == 0 or step == total_steps:
            row = {"step": step, "elapsed_s": round(elapsed(), 2), "lr": lr,
                   "train_loss": float(running) / running_n, "train_kl": float(running_kl) / running_n,
                   "grad_norm": float(grad_norm)}
            log_rows.append(row)
            running.zero_()
            running_kl.zero_()
            running_n = 0
            print(f"[{elapsed():6.1f}s] step {step:6d}/{total_steps} loss {row['train_loss']:.4f} "
                  f"kl {row['train_kl']:.4f} lr {lr:.2e} |g| {row['grad_norm']:.3f}", flush=True)
        if step % a.eval_every == 0 or step == total_steps:
            run_eval(step)
    if eval_rows[-1]["step"] != step:
        run_eval(step)
    train_s = time.time() - t_train
    print(f"[{elapsed():6.1f}s] trained {step} steps in {train_s:.1f}s ({stopped_by}); best validation "
          f"objective {best['objective']:.4f} at step {best['step']}", flush=True)

    # -- export the best adapter; final evaluation in fp32 (as Mosaic merges: fp32) -------------
    for c in compilers:
        c.disable()
    load_adapter_state(wrapped, best["state"])
    folder = os.path.join(a.out, "adapter")
    os.makedirs(folder, exist_ok=True)
    config = adapter_config(a, targets)
    with open(os.path.join(folder, "adapter_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    tensors = {k: v.numpy() for k, v in best["state"].items()}
    safetensors_np.save_file(os.path.join(folder, "adapter_model.safetensors"), tensors, dtype="F32")
    # Read back what was written, so the final numbers are the file's.
    load_adapter_state(wrapped, {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in
                                 safetensors_np.load_file(os.path.join(folder, "adapter_model.safetensors")).items()})
    final = {s: evaluate(student, teacher, held_out[s], a, mask_id, device, None, with_base=True)
             for s in ("validation", "test")}
    for s, r in final.items():
        print(f"{s} (fp32): objective {r['objective']:.4f} (base block-causal {r['objective_base']:.4f}), "
              f"kl {r['kl']:.4f} ({r['kl_base']:.4f}), top-1 agreement {r['top1_agreement']:.3f} "
              f"({r['top1_agreement_base']:.3f}), data ce {r['ce_student']:.4f} ({r['ce_base']:.4f}; "
              f"teacher {r['ce_teacher']:.4f})", flush=True)

    results = {
        "what": "D2F LoRA adapter for Mosaic's built-in model (tools/train/train_d2f.py)",
        "base": {"path": a.base, "config_sha256": hashlib.sha256(
            open(os.path.join(a.base, "config.json"), "rb").read()).hexdigest(),
            "weights_sha256": hashlib.sha256(open(os.path.join(a.base, "model.safetensors"), "rb").read()).hexdigest()},
        "adapter_config": config,
        "hyperparameters": vars(a),
        "command": " ".join(["python3 tools/train/train_d2f.py"] + list(argv if argv is not None else sys.argv[1:])),
        "trainable_parameters": n_lora,
        "data": {"tokens": token_facts},
        "training": {"steps": step, "planned_steps": total_steps, "stopped_by": stopped_by,
                     "windows_seen": step * a.batch_size, "best_step": best["step"],
                     "best_val_objective_during_training": best["objective"], "train_seconds": train_s,
                     "compile_seconds": compile_s, "compiled": compiled,
                     "eval_seconds_during_training": eval_seconds, "fused_adamw": kwargs.get("fused", False),
                     "first_log": log_rows[0] if log_rows else None, "last_log": log_rows[-1] if log_rows else None},
        "initial_eval": initial,
        "final_eval_fp32": final,
        "files": {},
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
                        "host": platform.node()},
    }
    with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as f:
        f.write(model_card(results))
    results["files"] = {n: os.path.getsize(os.path.join(folder, n)) for n in sorted(os.listdir(folder))}
    results["wall_seconds"] = elapsed()
    for name, rows in (("log.csv", log_rows), ("eval.csv", eval_rows)):
        with open(os.path.join(a.out, name), "w", newline="") as f:
            if rows:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
    with open(os.path.join(a.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    print(f"[{elapsed():6.1f}s] wrote {folder} ({sum(results['files'].values()) / 1e6:.2f} MB)", flush=True)


def model_card(r):
    """README.md of the adapter folder, from results (measured numbers only)."""
    h, t, c = r["hyperparameters"], r["training"], r["adapter_config"]
    rows = []
    for split, e in r["final_eval_fp32"].items():
        rows.append(f"| {split} | {e['masked_tokens']} | {e['objective']:.4f} | {e['objective_base']:.4f} | "
                    f"{e['kl']:.4f} | {e['kl_base']:.4f} | {e['top1_agreement']:.3f} | "
                    f"{e['top1_agreement_base']:.3f} | {e['ce_student']:.4f} | {e['ce_base']:.4f} | "
                    f"{e['ce_teacher']:.4f} |")
    first, last = t["first_log"] or {}, t["last_log"] or {}
    return f"""# kjv-llada-12m-d2f: a D2F LoRA adapter for Mosaic's built-in model

A PEFT LoRA adapter (r = {c['r']}, lora_alpha = {c['lora_alpha']}, on {', '.join(c['target_modules'])} of all
12 blocks) that makes `{c['base_model_name_or_path']}` decode under D2F's block-causal attention (the prompt
one block, then blocks of {h['block']} from the prompt's end). Use it with `mosaic generate --adapter
models/kjv-llada-12m-d2f --d2f ...` (docs/default-model.md, "D2F adapter"; docs/design/d2f-decoding.md).

- **data**: windows of {h['seq_len']} tokens at random offsets of the KJV training split (tools/train/data,
  `tools/train/prepare.sh`); prompt length ~ U{{{h['prompt_min']}..{h['prompt_max']}}}, never masked; the answer in
  blocks of {h['block']} with monotone non-decreasing mask ratios (first ~ U[{h['ratio_low']}, {h['ratio_high']}),
  cumulative increments up to {h['ratio_high']}).
- **objective** (D2F's self-distillation): soft cross-entropy from the student (base + LoRA, block-causal) to
  the teacher (the frozen base, full attention, same noisy sequence) on masked positions, each divided by its
  block's mask ratio, summed and divided by the number of answer tokens.
- **optimiser**: AdamW lr {h['lr']} (warm-up {h['warmup_steps']}, cosine to {h['min_lr_ratio']}x), betas
  ({h['beta1']}, {h['beta2']}), weight decay {h['weight_decay']}, clip {h['grad_clip']}, LoRA dropout
  {h['lora_dropout']}, batch {h['batch_size']} windows; seed {h['seed']} (LoRA init {h['seed']}, batches
  {h['seed'] + 1}, masks and dropout {h['seed'] + 2}; evaluation masks CPU seed 1234).
- **run**: {t['steps']} steps ({t['stopped_by']}), {t['train_seconds']:.0f} s of training on
  {r['environment']['device']}, torch {r['environment']['torch']}; exported the best-validation step
  {t['best_step']}. Training loss {first.get('train_loss', float('nan')):.4f} (first {h['log_every']} steps) ->
  {last.get('train_loss', float('nan')):.4f} (last logged); KL {first.get('train_kl', float('nan')):.4f} ->
  {last.get('train_kl', float('nan')):.4f}.
- **command**: `{r['command']}` (through `tools/train/run_d2f_on_gpu.sh`).

Held-out evaluation in fp32 on the stored adapter (same D2F noise, fixed seed): objective as trained, KL(teacher ‖
student) per masked token in nats, top-1 agreement with the teacher, and the data cross-entropy of the true
token; "base" = the base model without the adapter under the same block-causal attention (what `--d2f` without
the adapter runs):

| split | masked tokens | objective | base | KL | base | top-1 agree | base | data CE | base | teacher (full attn) |
|---|---|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}
"""


if __name__ == "__main__":
    main()
