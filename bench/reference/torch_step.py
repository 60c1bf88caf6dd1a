#!/usr/bin/env python3
"""The PyTorch-native reference step of ARCHITECTURE.md ("Measuring"), for side-by-side numbers.

One denoising step as the reference LLaDA loop runs it: a full-sequence forward in bf16 with SDPA
attention, logits for all L positions, Gumbel-max in float64 when temperature > 0, softmax
confidence of the un-noised logits, top-k commit. Weights come from the same Hugging Face folder
Mosaic loads (LLaDA, Dream or LLaDA-MoE naming; made by `mosaic make-test-model`). LLaDA-MoE runs
its reference's forward (moe-models.md 1.4): per-head q/k RMSNorm before RoPE, a bf16 router,
fp32 softmax, top-k without renormalisation, and the loop over experts adding each one's
weighted output into a bf16 accumulator with index_add.

  torch_step.py --model DIR --seq-len 4096,16384,32768 [--temperature T] [--lmax-budget 24GiB]
                [--json OUT.json]

Needs torch (CUDA) and safetensors. Prints a table; --json writes every number.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def parse_bytes(text):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
    for unit, scale in units.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * scale)
    return int(text)


class Reference:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        arch = cfg["architectures"][0]
        self.family = "dream" if arch.startswith("Dream") else "llada-moe" if arch == "LLaDAMoEModelLM" else "llada"
        weights = {}
        index = os.path.join(folder, "model.safetensors.index.json")
        files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
        for name in files:
            weights.update(load_file(os.path.join(folder, name), device="cuda"))
        self.w = {k: v.to(torch.bfloat16) for k, v in weights.items()}
        if self.family == "llada":
            self.hidden = cfg["d_model"]
            self.layers = cfg["n_layers"]
            self.heads = cfg["n_heads"]
            self.kv_heads = cfg.get("n_kv_heads") or self.heads
            self.theta = cfg.get("rope_theta", 10000.0)
            self.eps = cfg.get("rms_norm_eps", 1e-5)
            self.mask_id = cfg.get("mask_token_id", 126336)
        else:
            self.hidden = cfg["hidden_size"]
            self.layers = cfg["num_hidden_layers"]
            self.heads = cfg["num_attention_heads"]
            self.kv_heads = cfg.get("num_key_value_heads", self.heads)
            self.theta = cfg.get("rope_theta", 10000.0)
            self.eps = cfg.get("rms_norm_eps", 1e-6)
            self.mask_id = cfg.get("mask_token_id", 151666)
        if self.family == "llada-moe":
            self.eps = cfg.get("rms_norm_eps", 1e-5)
            self.mask_id = cfg.get("mask_token_id", 156895)
            self.experts, self.top_k = cfg["num_experts"], cfg["num_experts_per_tok"]
        self.head_dim = self.hidden // self.heads
        self.weight_bytes = sum(v.numel() * v.element_size() for v in self.w.values())

    def names(self, i):
        if self.family == "llada":
            p = f"model.transformer.blocks.{i}."
            return dict(attn_norm=p + "attn_norm.weight", q=p + "q_proj", k=p + "k_proj", v=p + "v_proj",
                        o=p + "attn_out.weight", ffn_norm=p + "ff_norm.weight", gate=p + "ff_proj.weight",
                        up=p + "up_proj.weight", down=p + "ff_out.weight")
        p = f"model.layers.{i}."
        if self.family == "llada-moe":
            return dict(attn_norm=p + "input_layernorm.weight", q=p + "self_attn.q_proj", k=p + "self_attn.k_proj",
                        v=p + "self_attn.v_proj", o=p + "self_attn.o_proj.weight", q_norm=p + "self_attn.q_norm.weight",
                        k_norm=p + "self_attn.k_norm.weight", ffn_norm=p + "post_attention_layernorm.weight",
                        router=p + "mlp.gate.weight", expert=p + "mlp.experts.{}.{}_proj.weight")
        return dict(attn_norm=p + "input_layernorm.weight", q=p + "self_attn.q_proj", k=p + "self_attn.k_proj",
                    v=p + "self_attn.v_proj", o=p + "self_attn.o_proj.weight",
                    ffn_norm=p + "post_attention_layernorm.weight", gate=p + "mlp.gate_proj.weight",
                    up=p + "mlp.up_proj.weight", down=p + "mlp.down_proj.weight")

    def rms_norm(self, x, weight):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * weight

    def linear(self, x, name):
        bias = self.w.get(name + ".bias")
        return F.linear(x, self.w[name + ".weight"], bias)

    def rope(self, x, positions):
        # Half-split (rotate_half) layout, angles in fp32.
        half = self.head_dim // 2
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, half, device=x.device, dtype=torch.float32) * 2 / self.head_dim))
        angles = positions.float()[:, None] * inv_freq[None, :]
        cos = torch.cat([angles.cos(), angles.cos()], -1)
        sin = torch.cat([angles.sin(), angles.sin()], -1)
        if self.family == "llada":  # rope_full_precision
            xf = x.float()
            rotated = torch.cat([-xf[..., half:], xf[..., :half]], -1)
            return (xf * cos + rotated * sin).to(x.dtype)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin

    def moe(self, h, n):
        """The reference's MoE block: bf16 router, fp32 softmax, top-k, a loop over the experts."""
        probabilities = F.softmax(F.linear(h, self.w[n["router"]]), dim=-1, dtype=torch.float32)
        weights, chosen = torch.topk(probabilities, self.top_k, dim=-1)
        weights = weights.to(h.dtype)
        out = torch.zeros_like(h)
        for e in range(self.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel() == 0:
                continue
            x = h[rows]
            y = F.linear(F.silu(F.linear(x, self.w[n["expert"].format(e, "gate")])) *
                         F.linear(x, self.w[n["expert"].format(e, "up")]), self.w[n["expert"].format(e, "down")])
            out.index_add_(0, rows, y * weights[rows, slot, None])
        return out

    @torch.no_grad()
    def logits(self, ids):
        w = self.w
        L = ids.shape[-1]
        embed = w["model.transformer.wte.weight"] if self.family == "llada" else w["model.embed_tokens.weight"]
        x = embed[ids]
        positions = torch.arange(L, device=ids.device)
        for i in range(self.layers):
            n = self.names(i)
            h = self.rms_norm(x, w[n["attn_norm"]])
            q = self.linear(h, n["q"]).view(L, self.heads, self.head_dim).transpose(0, 1)
            k = self.linear(h, n["k"]).view(L, self.kv_heads, self.head_dim).transpose(0, 1)
            v = self.linear(h, n["v"]).view(L, self.kv_heads, self.head_dim).transpose(0, 1)
            if self.family == "llada-moe":  # per head, before RoPE
                q, k = self.rms_norm(q, w[n["q_norm"]]), self.rms_norm(k, w[n["k_norm"]])
            q, k = self.rope(q, positions), self.rope(k, positions)
            if self.kv_heads != self.heads:
                k = k.repeat_interleave(self.heads // self.kv_heads, 0)
                v = v.repeat_interleave(self.heads // self.kv_heads, 0)
            a = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=False)[0]
            x = x + F.linear(a.transpose(0, 1).reshape(L, -1), w[n["o"]])
            h = self.rms_norm(x, w[n["ffn_norm"]])
            if self.family == "llada-moe":
                x = x + self.moe(h, n)
            else:
                x = x + F.linear(F.silu(F.linear(h, w[n["gate"]])) * F.linear(h, w[n["up"]]), w[n["down"]])
        x = self.rms_norm(x, w["model.transformer.ln_f.weight" if self.family == "llada" else "model.norm.weight"])
        head = w.get("model.transformer.ff_out.weight" if self.family == "llada" else "lm_head.weight", embed)
        out = F.linear(x, head)
        if self.family == "dream":  # position p is predicted from row p - 1
            out = torch.cat([out[:1], out[:-1]], 0)
        return out

    @torch.no_grad()
    def step(self, x, temperature, k):
        """One reference LLaDA step on canvas x [L]: returns the new canvas."""
        mask = x == self.mask_id
        logits = self.logits(x)
        if temperature > 0:
            l64 = logits.to(torch.float64)
            noise = torch.rand_like(l64)
            z = l64.exp() / (-torch.log(noise)) ** temperature
        else:
            z = logits
        x0 = torch.argmax(z, dim=-1)
        p = F.softmax(logits, dim=-1)
        x0_p = torch.gather(p, -1, x0[:, None])[:, 0]
        x0 = torch.where(mask, x0, x)
        confidence = torch.where(mask, x0_p, torch.tensor(-math.inf, device=x.device, dtype=x0_p.dtype))
        chosen = torch.topk(confidence, k).indices
        out = x.clone()
        out[chosen] = x0[chosen]
        return out


def canvas(ref, length, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(0, ref.mask_id, (length,), generator=g)
    ids[length - length // 2:] = ref.mask_id
    return ids.cuda()


def live_bytes_par(trace):
    """Peak / mean of the live bytes after each allocator event of a memory-history snapshot."""
    live, series = 0, []
    for event in trace:
        if event["action"] == "alloc":
            live += event["size"]
        elif event["action"] == "free_completed":
            live -= event["size"]
        else:
            continue
        series.append(live)
    if not series:
        return None, None
    base = min(series)
    series = [s - base for s in series]
    mean = statistics.fmean(series)
    return max(series), (max(series) / mean if mean > 0 else None)


def time_step(ref, length, temperature, warmup, repeats):
    x = canvas(ref, length)
    for _ in range(warmup):
        ref.step(x, temperature, 1)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        ref.step(x, temperature, 1)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    peak = torch.cuda.max_memory_allocated() - base
    par = None
    try:  # live bytes after every allocator event of one more step
        torch.cuda.memory._record_memory_history(max_entries=1_000_000)
        ref.step(x, temperature, 1)
        torch.cuda.synchronize()
        snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        trace = [e for device in snapshot["device_traces"] for e in device]
        _, par = live_bytes_par(trace)
    except Exception as error:  # noqa: BLE001 - PAR is optional on older torch
        print(f"  (PAR not measured: {error})", file=sys.stderr)
    return {"length": length, "temperature": temperature, "median_ms": statistics.median(times), "step_ms": times,
            "activation_peak_bytes": peak, "par": par}


def fits(ref, length, temperature):
    try:
        ref.step(canvas(ref, length), temperature, 1)
        torch.cuda.synchronize()
        return True
    except torch.OutOfMemoryError:
        return False
    finally:
        torch.cuda.empty_cache()


def find_lmax(ref, budget, temperature):
    """Largest multiple of 1024 whose step runs with all allocations capped at `budget`."""
    total = torch.cuda.get_device_properties(0).total_memory
    # The cap binds new allocations only: blocks the caching allocator keeps from earlier steps
    # would be handed out past it (measured: a "fit" at 8 GiB beside 15.9 GB of weights).
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(min(1.0, budget / total))
    try:
        low, high = 0, 1024
        while fits(ref, high, temperature):
            low, high = high, high * 2
        while high - low > 1024:
            mid = (low + high) // 2 // 1024 * 1024
            if fits(ref, mid, temperature):
                low = mid
            else:
                high = mid
        return low
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--seq-len", default="4096")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lmax-budget", help="e.g. 24GiB, or several (8GiB,16GiB,40GiB): also find L_max under "
                        "each at temperature 0 and 1")
    parser.add_argument("--json")
    parser.add_argument("--logits-of", help="ids 1,2,3: write the logits of the positions holding the mask id "
                        "to --logits-out (.npy, float32) and stop; checks this reference against Mosaic")
    parser.add_argument("--logits-out")
    args = parser.parse_args()

    ref = Reference(args.model)
    if args.logits_of:
        import numpy as np
        ids = torch.tensor([int(v) for v in args.logits_of.split(",")], device="cuda")
        rows = (ids == ref.mask_id).nonzero()[:, 0]
        np.save(args.logits_out, ref.logits(ids)[rows].float().cpu().numpy())
        return
    report = {"model": args.model, "family": ref.family, "device": torch.cuda.get_device_name(0),
              "torch": torch.__version__, "weight_bytes": ref.weight_bytes, "steps": []}
    print(f"PyTorch reference: {args.model} ({ref.family}), torch {torch.__version__}")
    print(f"{'L':>8} {'step ms':>10} {'peak GiB':>10} {'PAR':>6}")
    for length in [int(v) for v in args.seq_len.split(",") if v]:
        try:
            row = time_step(ref, length, args.temperature, args.warmup, args.repeats)
        except torch.OutOfMemoryError:
            row = {"length": length, "temperature": args.temperature, "oom": True}
            torch.cuda.empty_cache()
            print(f"{length:>8} {'OOM':>10}")
        else:
            par = f"{row['par']:.2f}" if row["par"] else "-"
            print(f"{length:>8} {row['median_ms']:>10.2f} {row['activation_peak_bytes'] / 2**30:>10.3f} {par:>6}")
        report["steps"].append(row)
        sys.stdout.flush()
    if args.lmax_budget:
        budgets = [b for b in args.lmax_budget.split(",") if b]
        report["l_max_by_budget"] = []
        for text in budgets:
            budget = parse_bytes(text)
            row = {"budget_bytes": budget}
            for temperature in (0.0, 1.0):
                l_max = find_lmax(ref, budget, temperature)
                row[f"l_max_t{int(temperature)}"] = l_max
                print(f"L_max under {text} at temperature {temperature:g}: {l_max}"
                      + (" (the weights alone exceed the budget)" if l_max == 0 and ref.weight_bytes >= budget else ""))
                sys.stdout.flush()
            report["l_max_by_budget"].append(row)
            if len(budgets) == 1:  # the single-budget keys bench/plot_side_by_side.py reads
                report["lmax_budget_bytes"] = budget
                report.update({k: v for k, v in row.items() if k.startswith("l_max")})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
