"""LLaDA in PyTorch, laid out so that state_dict() names are LLaDA-8B's tensor names.

Architecture (shared/reference/models.md §0, §2, §4; src/model/weight_names.cc):
    h = wte[ids]
    per block:  h = h + attn_out(Attention(attn_norm(h)))      bidirectional, RoPE, no bias
                h = h + ff_out(silu(ff_proj(n)) * up_proj(n)),  n = ff_norm(h)
    logits = model.transformer.ff_out(ln_f(h))                  untied LM head
RMSNorm as LLaDA computes it: in fp32, cast back, times the weight. RoPE is the half-split
("rotate_half") layout with fp32 angles, applied to q and k in fp32 (rope_full_precision).
No causal mask, no padding mask: row p of the logits predicts position p. An optional
additive attention mask (`attn_mask`, broadcast to [B, H, L, L]; 0 = attend, -inf = not)
serves training under other attention patterns (train_d2f.py: block-causal).

Works with torch 1.13 (CPU checks here) and 2.x (training on the GPU); scaled_dot_product_
attention is used where it exists. Dropout on the residual branches is a training-only
regulariser; it has no tensor and no config effect on inference.
"""

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelArgs:
    vocab_size: int
    d_model: int = 256
    n_layers: int = 12
    n_heads: int = 4
    mlp_hidden_size: int = 704
    max_sequence_length: int = 256
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    mask_token_id: int = -1
    eos_token_id: int = -1
    dropout: float = 0.0  # residual dropout while training (not exported)

    @property
    def head_dim(self):
        return self.d_model // self.n_heads

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.to(x.dtype) * self.weight


def rope_cos_sin(length, head_dim, theta, device):
    """cos, sin of shape [length, head_dim] in fp32 (half-split layout)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device,
                                             dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(length, device=device, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    """x: [B, H, L, D]; rotates (x[j], x[j + D/2]) pairs in fp32, returns x's dtype."""
    x32 = x.float()
    half = x32.shape[-1] // 2
    rotated = torch.cat([-x32[..., half:], x32[..., :half]], dim=-1)
    return (x32 * cos + rotated * sin).to(x.dtype)


def attention(q, k, v, mask=None):
    """Bidirectional attention, q/k/v [B, H, L, D]; `mask` an optional additive mask
    broadcastable to [B, H, L, L] (cast to q's dtype)."""
    if mask is not None:
        mask = mask.to(q.dtype)
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=False)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask
    return torch.matmul(scores.softmax(dim=-1), v)


class LLaDABlock(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        d, f = a.d_model, a.mlp_hidden_size
        self.n_heads, self.head_dim = a.n_heads, a.head_dim
        self.attn_norm = RMSNorm(d, a.rms_norm_eps)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.attn_out = nn.Linear(d, d, bias=False)
        self.ff_norm = RMSNorm(d, a.rms_norm_eps)
        self.ff_proj = nn.Linear(d, f, bias=False)  # gate: SiLU goes here
        self.up_proj = nn.Linear(d, f, bias=False)
        self.ff_out = nn.Linear(f, d, bias=False)   # down
        self.dropout = nn.Dropout(a.dropout)

    def forward(self, h, cos, sin, mask=None):
        b, length, d = h.shape
        x = self.attn_norm(h)
        q, k, v = (p(x).view(b, length, self.n_heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = attention(q, k, v, mask).transpose(1, 2).reshape(b, length, d)
        h = h + self.dropout(self.attn_out(y))
        n = self.ff_norm(h)
        return h + self.dropout(self.ff_out(F.silu(self.ff_proj(n)) * self.up_proj(n)))


class LLaDAModel(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(a.vocab_size, a.d_model),
            "blocks": nn.ModuleList(LLaDABlock(a) for _ in range(a.n_layers)),
            "ln_f": RMSNorm(a.d_model, a.rms_norm_eps),
            "ff_out": nn.Linear(a.d_model, a.vocab_size, bias=False),  # LM head
        })


class LLaDAModelLM(nn.Module):
    """ids [B, L] (int64) -> logits [B, L, vocab]; attn_mask: see attention()."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.model = LLaDAModel(args)

    def forward(self, ids, attn_mask=None):
        t = self.model.transformer
        cos, sin = rope_cos_sin(ids.shape[1], self.args.head_dim, self.args.rope_theta,
                                ids.device)
        h = t["wte"](ids)
        for block in t["blocks"]:
            h = block(h, cos, sin) if attn_mask is None else block(h, cos, sin, attn_mask)
        return t["ff_out"](t["ln_f"](h))

    def init_weights(self, seed):
        """Normal(0, 0.02) for the embedding and every matrix, the two residual output
        projections scaled by 1/sqrt(2 * n_layers) (GPT-2), norms at 1."""
        g = torch.Generator().manual_seed(seed)
        out_std = 0.02 / math.sqrt(2 * self.args.n_layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:
                    p.fill_(1.0)
                    continue
                residual_out = ".blocks." in name and name.endswith(
                    ("attn_out.weight", "ff_out.weight"))
                std = out_std if residual_out else 0.02
                p.copy_(torch.randn(p.shape, generator=g) * std)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())
