"""Held-out quality of a masked diffusion LM, and the unigram baseline in the same units.

The token stream of a split is cut into non-overlapping windows of `seq_len` tokens. Each
window is evaluated at K masking ratios t_j = eps + (1 - eps)(j + 1/2)/K (midpoints of K
equal strata of [eps, 1]); at ratio t every token is masked with probability t. The masks
come from a CPU generator with a fixed seed, so every device and every run sees the same
masked positions. Reported, in nats per token:

  masked_ce   mean cross-entropy over all masked positions (all t pooled): "masked-token loss"
  elbo        the LLaDA objective, mean over windows and t of (1/t) * sum_masked CE / seq_len:
              a K-point quadrature of E_t[...], which bounds the NLL per token from above
  by_t        masked_ce at each t_j

The unigram baseline predicts every masked token with the training split's token
frequencies (add-one smoothing over the vocabulary, mask token excluded), scored on exactly
the same masked positions with the same two formulas; it ignores all context, so the gap
between the two is what the model learned from context.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F


def unigram_log_probs(train_ids, vocab_size, mask_token_id):
    counts = np.bincount(np.asarray(train_ids, dtype=np.int64), minlength=vocab_size)
    counts = counts.astype(np.float64) + 1.0
    counts[mask_token_id] = 0.0
    probs = counts / counts.sum()
    with np.errstate(divide="ignore"):
        return torch.from_numpy(np.log(probs))


def windows(ids, seq_len):
    n = len(ids) // seq_len
    return torch.from_numpy(np.asarray(ids[: n * seq_len], dtype=np.int64)).view(n, seq_len)


def t_levels(k, eps=1e-3):
    return [eps + (1.0 - eps) * (j + 0.5) / k for j in range(k)]


@torch.no_grad()
def evaluate(model, ids, seq_len, mask_token_id, unigram_logp, k=8, seed=1234, batch_size=64,
             device="cpu", autocast_dtype=None):
    """Returns {"model": {...}, "unigram": {...}, "tokens": n, "windows": w, "t": [...]}."""
    was_training = model.training
    model.eval()
    x_all = windows(ids, seq_len)
    g = torch.Generator().manual_seed(seed)
    levels = t_levels(k)
    sums = {name: {"ce": [0.0] * k, "count": [0] * k, "elbo": 0.0} for name in ("model", "unigram")}
    uni = unigram_logp.to(torch.float64)
    for j, t in enumerate(levels):
        masks = torch.rand(x_all.shape, generator=g) < t
        for start in range(0, x_all.shape[0], batch_size):
            x = x_all[start:start + batch_size]
            m = masks[start:start + batch_size]
            noisy = torch.where(m, torch.full_like(x, mask_token_id), x).to(device)
            if autocast_dtype is not None:
                with torch.autocast(device_type=torch.device(device).type, dtype=autocast_dtype):
                    logits = model(noisy)
            else:
                logits = model(noisy)
            ce = F.cross_entropy(logits.float().flatten(0, 1), x.to(device).flatten(),
                                 reduction="none").view(x.shape).double().cpu()
            uce = -uni[x]
            for name, values in (("model", ce), ("unigram", uce)):
                masked = values[m]
                sums[name]["ce"][j] += float(masked.sum())
                sums[name]["count"][j] += int(m.sum())
                sums[name]["elbo"] += float(masked.sum()) / t / seq_len
    n_windows = x_all.shape[0]
    out = {"tokens": int(x_all.numel()), "windows": int(n_windows), "seq_len": seq_len,
           "t": [round(t, 6) for t in levels], "seed": seed}
    for name, s in sums.items():
        total = sum(s["ce"]) / max(1, sum(s["count"]))
        out[name] = {
            "masked_ce": total,
            "elbo": s["elbo"] / (n_windows * k),
            "by_t": [c / max(1, n) for c, n in zip(s["ce"], s["count"])],
            "masked_tokens": sum(s["count"]),
        }
    out["model"]["masked_ppl"] = math.exp(out["model"]["masked_ce"])
    out["unigram"]["masked_ppl"] = math.exp(out["unigram"]["masked_ce"])
    model.train(was_training)
    return out
