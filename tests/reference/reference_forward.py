"""Independent NumPy forward pass for LLaDA (dense) and Dream checkpoints.

Written from shared/reference/models.md, not from Mosaic's C++ code. Everything is computed
in float64 except the RoPE angles, which are built in float32 exactly like the PyTorch
reference (inv_freq and pos * inv_freq are float32 products); their cos/sin are then taken
in float64.

    model = load_model("/path/to/hf_folder")       # family from config.json architectures
    logits = forward(model, ids=[5, 9, 2], rows=[0, 2])   # float64 [2, vocab]

Model (both families): pre-norm decoder, full bidirectional attention (no mask; the
block-causal masks are below), RMSNorm, half-split RoPE, GQA, SwiGLU MLP, LM head after the
final RMSNorm. Dream's logits for position p come from hidden row p-1 (row 0 for p = 0);
LLaDA's from row p.

Block-causal attention and the per-step computed rows (docs/design/cached-decoding.md §1,
§4; written from that specification, not from Mosaic's C++ code): config.json's
"block_attention" (absent / null = full, "prompt", "absolute") becomes
model.block_attention; key_end() is end(q) of §1 (a query at q reads keys [0, end(q))).
forward_rows() computes only the rows [c0, c1) of a canvas: every layer's attention of a
computed query reads its key range, the keys in [c0, c1) fresh from this call, the others
from a per-sequence KVCache (per layer K after RoPE and V at absolute positions,
[L, kv_dim]); the fresh K/V of [c0, c1) are written into the cache, replacing what was
there. A cache starts as NaN, so a read of a row no step ever computed raises instead of
passing silently.

    cache = new_cache(model, len(ids))
    ranges = key_ranges(model.block_attention, range(len(ids)), P, B, len(ids))
    logits = forward_rows(model, ids, 0, len(ids), ranges, cache, rows)   # a full forward
"""

import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

FAMILY_LLADA = "llada"
FAMILY_DREAM = "dream"


@dataclass
class Layer:
    """One decoder block's weights, [out, in] for linears; biases may be None."""
    attn_norm: np.ndarray   # [hidden]
    wq: np.ndarray          # [n_heads * head_dim, hidden]
    wk: np.ndarray          # [n_kv_heads * head_dim, hidden]
    wv: np.ndarray          # [n_kv_heads * head_dim, hidden]
    bq: np.ndarray          # [n_heads * head_dim] or None
    bk: np.ndarray          # [n_kv_heads * head_dim] or None
    bv: np.ndarray          # [n_kv_heads * head_dim] or None
    wo: np.ndarray          # [hidden, n_heads * head_dim]
    ffn_norm: np.ndarray    # [hidden]
    w_gate: np.ndarray      # [ffn, hidden]  (SiLU side)
    w_up: np.ndarray        # [ffn, hidden]
    w_down: np.ndarray      # [hidden, ffn]


@dataclass
class Model:
    """Hyper-parameters and weights of one checkpoint, in the compute dtype."""
    family: str
    hidden: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int              # rows of the LM head = width of the logits
    rope_theta: float
    eps: float
    embed: np.ndarray       # [embedding rows, hidden]
    final_norm: np.ndarray  # [hidden]
    lm_head: np.ndarray     # [vocab, hidden]
    layers: list = field(default_factory=list)
    dtype: type = np.float64
    block_attention: str = None   # None (full), "prompt", "absolute" (cached-decoding §1)


# ----------------------------------------------------------------------------------------
# Config and weights
# ----------------------------------------------------------------------------------------

def detect_family(config):
    """Map config.json `architectures` to a family name; raise ValueError otherwise."""
    archs = config.get("architectures") or []
    if archs == ["LLaDAModelLM"]:
        return FAMILY_LLADA
    if archs == ["DreamModel"]:
        return FAMILY_DREAM
    raise ValueError(f"config.json: architectures {archs!r} is not [\"LLaDAModelLM\"] or "
                     f"[\"DreamModel\"]")


def _require(config, key):
    if config.get(key) is None:
        raise ValueError(f"config.json: field '{key}' is missing")
    return config[key]


def _reject_unsupported(config, fields):
    """Raise if a config switch would make the model differ from what this code computes."""
    for key, supported in fields.items():
        if key in config and config[key] is not None and config[key] not in supported:
            raise ValueError(f"config.json: {key} = {config[key]!r} is not supported by the "
                             f"reference (expected one of {supported})")


BLOCK_ATTENTION_KINDS = ("prompt", "absolute")


def block_attention_of(config):
    """config.json "block_attention": None (absent / null: full attention), "prompt" or
    "absolute" (cached-decoding.md §1); any other value is rejected."""
    kind = config.get("block_attention")
    if kind is not None and kind not in BLOCK_ATTENTION_KINDS:
        raise ValueError(f"config.json: block_attention = {kind!r} is not supported by the "
                         f"reference (expected absent, null, \"prompt\" or \"absolute\")")
    return kind


def hparams_from_config(config):
    """Normalise both families' config.json into one dict of hyper-parameters."""
    family = detect_family(config)
    if family == FAMILY_LLADA:
        _reject_unsupported(config, {
            "include_bias": [False], "alibi": [False], "attention_layer_norm": [False],
            "input_emb_norm": [False], "scale_logits": [False], "rope": [True],
            "layer_norm_type": ["rms"], "activation_type": ["silu"],
            "block_type": ["llama"]})
        n_heads = _require(config, "n_heads")
        n_kv = config.get("n_kv_heads")
        if n_kv is None:
            n_kv = 1 if config.get("multi_query_attention") else n_heads
        vocab = config.get("embedding_size") or _require(config, "vocab_size")
        hp = dict(hidden=_require(config, "d_model"), n_layers=_require(config, "n_layers"),
                  n_heads=n_heads, n_kv_heads=n_kv,
                  ffn=_require(config, "mlp_hidden_size"), vocab=vocab,
                  rope_theta=_require(config, "rope_theta"),
                  eps=_require(config, "rms_norm_eps"),
                  tied=bool(config.get("weight_tying", False)),
                  qkv_bias=bool(config.get("include_qkv_bias", False)))
    else:
        _reject_unsupported(config, {"rope_scaling": [None], "use_sliding_window": [False],
                                     "hidden_act": ["silu"]})
        hp = dict(hidden=_require(config, "hidden_size"),
                  n_layers=_require(config, "num_hidden_layers"),
                  n_heads=_require(config, "num_attention_heads"),
                  n_kv_heads=config.get("num_key_value_heads")
                  or _require(config, "num_attention_heads"),
                  ffn=_require(config, "intermediate_size"),
                  vocab=_require(config, "vocab_size"),
                  rope_theta=_require(config, "rope_theta"),
                  eps=_require(config, "rms_norm_eps"),
                  tied=bool(config.get("tie_word_embeddings", False)),
                  qkv_bias=True)
    hp["family"] = family
    hp["block_attention"] = block_attention_of(config)
    if hp["hidden"] % hp["n_heads"] != 0:
        raise ValueError(f"config.json: hidden {hp['hidden']} not divisible by "
                         f"{hp['n_heads']} heads")
    hp["head_dim"] = hp["hidden"] // hp["n_heads"]
    if "head_dim" in config and config["head_dim"] not in (None, hp["head_dim"]):
        raise ValueError(f"config.json: head_dim {config['head_dim']} != hidden / heads = "
                         f"{hp['head_dim']}")
    if hp["head_dim"] % 2 != 0:
        raise ValueError(f"config.json: head_dim {hp['head_dim']} must be even for RoPE")
    if hp["n_heads"] % hp["n_kv_heads"] != 0:
        raise ValueError(f"config.json: {hp['n_heads']} heads not a multiple of "
                         f"{hp['n_kv_heads']} kv heads")
    return hp


def tensor_names(hp, i=None):
    """HF tensor names: per layer i a dict role -> name; with i None the global ones."""
    if hp["family"] == FAMILY_LLADA:
        if i is None:
            return {"embed": "model.transformer.wte.weight",
                    "final_norm": "model.transformer.ln_f.weight",
                    "lm_head": "model.transformer.ff_out.weight"}
        p = f"model.transformer.blocks.{i}."
        return {"attn_norm": p + "attn_norm.weight", "wq": p + "q_proj.weight",
                "wk": p + "k_proj.weight", "wv": p + "v_proj.weight",
                "bq": p + "q_proj.bias", "bk": p + "k_proj.bias", "bv": p + "v_proj.bias",
                "wo": p + "attn_out.weight", "ffn_norm": p + "ff_norm.weight",
                "w_gate": p + "ff_proj.weight", "w_up": p + "up_proj.weight",
                "w_down": p + "ff_out.weight"}
    if i is None:
        return {"embed": "model.embed_tokens.weight", "final_norm": "model.norm.weight",
                "lm_head": "lm_head.weight"}
    p = f"model.layers.{i}."
    return {"attn_norm": p + "input_layernorm.weight",
            "wq": p + "self_attn.q_proj.weight", "wk": p + "self_attn.k_proj.weight",
            "wv": p + "self_attn.v_proj.weight", "bq": p + "self_attn.q_proj.bias",
            "bk": p + "self_attn.k_proj.bias", "bv": p + "self_attn.v_proj.bias",
            "wo": p + "self_attn.o_proj.weight",
            "ffn_norm": p + "post_attention_layernorm.weight",
            "w_gate": p + "mlp.gate_proj.weight", "w_up": p + "mlp.up_proj.weight",
            "w_down": p + "mlp.down_proj.weight"}


def build_model(config, tensors, dtype=np.float64):
    """Build a Model from a parsed config and {name: array}; checks every shape."""
    hp = hparams_from_config(config)
    H, hd, nq, nkv, F = (hp["hidden"], hp["head_dim"], hp["n_heads"], hp["n_kv_heads"],
                         hp["ffn"])

    def get(name, shape):
        if name not in tensors:
            raise ValueError(f"checkpoint: tensor '{name}' is missing")
        t = tensors[name]
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"checkpoint: tensor '{name}' has shape {list(t.shape)}, "
                             f"expected {list(shape)}")
        return np.asarray(t, dtype=dtype)

    g = tensor_names(hp)
    embed = get(g["embed"], (hp["vocab"], H))
    if hp["tied"]:
        lm_head = embed
    else:
        lm_head = get(g["lm_head"], (hp["vocab"], H))
    layers = []
    for i in range(hp["n_layers"]):
        n = tensor_names(hp, i)
        bias = hp["qkv_bias"]
        layers.append(Layer(
            attn_norm=get(n["attn_norm"], (H,)),
            wq=get(n["wq"], (nq * hd, H)), wk=get(n["wk"], (nkv * hd, H)),
            wv=get(n["wv"], (nkv * hd, H)),
            bq=get(n["bq"], (nq * hd,)) if bias else None,
            bk=get(n["bk"], (nkv * hd,)) if bias else None,
            bv=get(n["bv"], (nkv * hd,)) if bias else None,
            wo=get(n["wo"], (H, nq * hd)), ffn_norm=get(n["ffn_norm"], (H,)),
            w_gate=get(n["w_gate"], (F, H)), w_up=get(n["w_up"], (F, H)),
            w_down=get(n["w_down"], (H, F))))
    return Model(family=hp["family"], hidden=H, n_layers=hp["n_layers"], n_heads=nq,
                 n_kv_heads=nkv, head_dim=hd, ffn=F, vocab=lm_head.shape[0],
                 rope_theta=float(hp["rope_theta"]), eps=float(hp["eps"]), embed=embed,
                 final_norm=get(g["final_norm"], (H,)), lm_head=lm_head, layers=layers,
                 dtype=dtype, block_attention=hp["block_attention"])


def load_model(model_dir, dtype=np.float64):
    """Load a HF folder (config.json + safetensors, single or sharded) into a Model."""
    config, tensors = safetensors_np.load_model_dir(model_dir)
    return build_model(config, tensors, dtype)


# ----------------------------------------------------------------------------------------
# Math
# ----------------------------------------------------------------------------------------

def rms_norm(x, weight, eps):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(x):
    return x / (1.0 + np.exp(-x))


def rope_inv_freq(head_dim, theta):
    """float32 [head_dim/2] inverse frequencies, computed as PyTorch does in float32."""
    exponents = np.arange(0, head_dim, 2).astype(np.float32) / np.float32(head_dim)
    return (np.float32(1.0) / (np.float32(theta) ** exponents)).astype(np.float32)


def rope_cos_sin(n_pos, head_dim, theta):
    """cos, sin float64 [n_pos, head_dim/2] of the float32 angles pos * inv_freq."""
    inv = rope_inv_freq(head_dim, theta)
    angles = np.arange(n_pos).astype(np.float32)[:, None] * inv[None, :]   # float32
    angles = angles.astype(np.float64)
    return np.cos(angles), np.sin(angles)


def apply_rope(x, cos, sin):
    """Half-split rotation of x [heads, L, d] at positions 0..L-1 (cos/sin [L, d/2])."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos = cos.astype(x.dtype)
    sin = sin.astype(x.dtype)
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


@dataclass
class LoraWeight:
    """A linear weight with PEFT's unmerged LoRA branch (lora_np.py builds these): the layer
    computes x @ w.T + scaling * (x @ a.T) @ b.T, as peft.tuners.lora.Linear.forward does."""
    w: np.ndarray   # [out, in], the base weight
    a: np.ndarray   # [r, in]
    b: np.ndarray   # [out, r]
    scaling: float


def linear(x, w, b=None):
    """y = x @ w.T (+ b) for w [out, in], or a LoraWeight's base plus its branch."""
    if isinstance(w, LoraWeight):
        y = x @ w.w.T + w.scaling * ((x @ w.a.T) @ w.b.T)
    else:
        y = x @ w.T
    return y if b is None else y + b


def attention(model, layer, x, cos, sin):
    """Full bidirectional GQA self-attention of x [L, hidden] -> [L, hidden]."""
    L = x.shape[0]
    nq, nkv, hd = model.n_heads, model.n_kv_heads, model.head_dim
    q = linear(x, layer.wq, layer.bq).reshape(L, nq, hd).transpose(1, 0, 2)   # [nq, L, hd]
    k = linear(x, layer.wk, layer.bk).reshape(L, nkv, hd).transpose(1, 0, 2)  # [nkv, L, hd]
    v = linear(x, layer.wv, layer.bv).reshape(L, nkv, hd).transpose(1, 0, 2)  # [nkv, L, hd]
    q = apply_rope(q, cos, sin)
    k = apply_rope(k, cos, sin)
    group = nq // nkv
    kv_of_head = np.arange(nq) // group          # query head h reads kv head h // group
    k = k[kv_of_head]                            # [nq, L, hd]
    v = v[kv_of_head]
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)   # [nq, L, L], no mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    out = (p @ v).transpose(1, 0, 2).reshape(L, nq * hd)
    return linear(out, layer.wo)


def _checked_ids(model, ids):
    """ids as a 1-D int64 array; ValueError for an empty list or an id outside the vocabulary."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("ids must be a non-empty 1-D list of token ids")
    if ids.min() < 0 or ids.max() >= model.embed.shape[0]:
        raise ValueError(f"token id out of range [0, {model.embed.shape[0]})")
    return ids


def final_hidden(model, ids):
    """Final-normed hidden states [L, hidden] of one sequence of token ids."""
    ids = _checked_ids(model, ids)
    L = ids.size
    cos, sin = rope_cos_sin(L, model.head_dim, model.rope_theta)
    h = model.embed[ids].astype(model.dtype)
    for layer in model.layers:
        h = h + attention(model, layer, rms_norm(h, layer.attn_norm, model.eps), cos, sin)
        n = rms_norm(h, layer.ffn_norm, model.eps)
        h = h + linear(silu(linear(n, layer.w_gate)) * linear(n, layer.w_up), layer.w_down)
    return rms_norm(h, model.final_norm, model.eps)


def source_rows(model, rows, length):
    """Hidden rows whose LM-head output is the logits of `rows` (Dream: shifted by one)."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.ndim != 1 or (rows.size and (rows.min() < 0 or rows.max() >= length)):
        raise ValueError(f"rows must be a list of positions in [0, {length})")
    if model.family == FAMILY_DREAM:
        return np.maximum(rows - 1, 0)
    return rows


def forward(model, ids, rows):
    """Logits [len(rows), vocab] (model.dtype) for positions `rows` of sequence `ids`."""
    h = final_hidden(model, ids)
    return linear(h[source_rows(model, rows, len(ids))], model.lm_head)


def forward_batch(model, sequences):
    """Reference for a batch: [(ids, rows), ...] -> concatenated logits, one at a time."""
    return np.concatenate([forward(model, ids, rows) for ids, rows in sequences], axis=0)


# ----------------------------------------------------------------------------------------
# Block-causal masks and the cached forward (docs/design/cached-decoding.md §1, §4)
# ----------------------------------------------------------------------------------------

def key_end(kind, q, P, B, L):
    """end(q) of cached-decoding.md §1 for queries q (int or array): keys [0, end(q)).

    full (None): L; "prompt": P for q < P, else P + (floor((q - P) / B) + 1) * B;
    "absolute": (floor(q / B) + 1) * B; capped at L."""
    q = np.asarray(q, dtype=np.int64)
    if kind is None:
        end = np.full(q.shape, L, dtype=np.int64)
    else:
        if int(B) < 1:
            raise ValueError(f"block-causal attention needs a block length >= 1, got {B}")
        if kind == "prompt":
            end = np.where(q < P, P, P + (np.maximum(q - P, 0) // B + 1) * B)
        elif kind == "absolute":
            end = (q // B + 1) * B
        else:
            raise ValueError(f"unknown block_attention {kind!r}")
    return np.minimum(end, L)


def key_ranges(kind, rows, P, B, L):
    """[len(rows), 2] int64 key ranges [lo, hi) = [0, end(q)) of query rows (§1)."""
    rows = np.asarray(list(rows), dtype=np.int64)
    out = np.zeros((rows.size, 2), dtype=np.int64)
    out[:, 1] = key_end(kind, rows, P, B, L)
    return out


@dataclass
class KVCache:
    """One sequence's cache: per layer K (after RoPE) and V at absolute positions,
    [L, n_kv_heads * head_dim] each; NaN where no forward ever wrote."""
    k: list
    v: list


def new_cache(model, length):
    """An empty (all NaN) cache for a canvas of `length` positions."""
    kv = model.n_kv_heads * model.head_dim
    return KVCache(k=[np.full((length, kv), np.nan, dtype=model.dtype)
                      for _ in model.layers],
                   v=[np.full((length, kv), np.nan, dtype=model.dtype)
                      for _ in model.layers])


def attention_rows(model, layer, x, cos, sin, c0, c1, ranges, kc, vc):
    """GQA attention of the computed rows [c0, c1) (x [c1 - c0, hidden], normed input).

    The fresh K (after RoPE, at the rows' absolute positions) and V of [c0, c1) are written
    into the layer's cache arrays kc, vc first; then each query reads keys [lo, hi) of its
    range from them, so keys inside [c0, c1) are this call's and the others the cache's."""
    n = c1 - c0
    nq, nkv, hd = model.n_heads, model.n_kv_heads, model.head_dim
    q = linear(x, layer.wq, layer.bq).reshape(n, nq, hd).transpose(1, 0, 2)   # [nq, n, hd]
    k = linear(x, layer.wk, layer.bk).reshape(n, nkv, hd).transpose(1, 0, 2)  # [nkv, n, hd]
    v = linear(x, layer.wv, layer.bv).reshape(n, nkv, hd).transpose(1, 0, 2)
    q = apply_rope(q, cos, sin)
    k = apply_rope(k, cos, sin)
    kc[c0:c1] = k.transpose(1, 0, 2).reshape(n, nkv * hd)
    vc[c0:c1] = v.transpose(1, 0, 2).reshape(n, nkv * hd)
    kv_of_head = np.arange(nq) // (nq // nkv)
    out = np.empty((nq, n, hd), dtype=x.dtype)
    # Rows with the same key range (a block of a block-causal mask) go together.
    for lo, hi in sorted({(int(a), int(b)) for a, b in ranges}):
        sel = np.flatnonzero((ranges[:, 0] == lo) & (ranges[:, 1] == hi))
        keys = kc[lo:hi].reshape(hi - lo, nkv, hd).transpose(1, 0, 2)[kv_of_head]
        vals = vc[lo:hi].reshape(hi - lo, nkv, hd).transpose(1, 0, 2)[kv_of_head]
        if not (np.all(np.isfinite(keys)) and np.all(np.isfinite(vals))):
            bad = lo + int(np.flatnonzero(~np.all(np.isfinite(kc[lo:hi]), axis=1)
                                          | ~np.all(np.isfinite(vc[lo:hi]), axis=1))[0])
            raise ValueError(f"rows [{c0}, {c1}): key range [{lo}, {hi}) reads cache row "
                             f"{bad}, which no forward has computed")
        scores = q[:, sel] @ keys.transpose(0, 2, 1) / math.sqrt(hd)   # [nq, |sel|, m]
        scores = scores - scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p = p / p.sum(axis=-1, keepdims=True)
        out[:, sel] = p @ vals
    return linear(out.transpose(1, 0, 2).reshape(n, nq * hd), layer.wo)


def forward_rows(model, ids, c0, c1, ranges, cache, rows):
    """Logits [len(rows), vocab] of canvas `ids`, computing only the rows [c0, c1).

    ranges: [c1 - c0, 2] key ranges [lo, hi) of the computed rows (key_ranges()); cache: the
    sequence's KVCache for len(ids) positions, read outside [c0, c1) and updated with the
    fresh K/V of [c0, c1). rows: the positions whose logits are wanted; their source rows
    (LLaDA q, Dream q - 1, row 0 for q = 0) must lie in [c0, c1). With c0 = 0, c1 = L and
    full ranges this is forward() (up to float64 rounding)."""
    ids = _checked_ids(model, ids)
    L = ids.size
    c0, c1 = int(c0), int(c1)
    if not 0 <= c0 < c1 <= L:
        raise ValueError(f"computed rows [{c0}, {c1}) not a non-empty range of [0, {L})")
    ranges = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    if ranges.shape[0] != c1 - c0:
        raise ValueError(f"{ranges.shape[0]} key ranges for {c1 - c0} computed rows")
    if np.any(ranges[:, 0] < 0) or np.any(ranges[:, 1] > L) or \
            np.any(ranges[:, 0] >= ranges[:, 1]):
        raise ValueError(f"key ranges must be non-empty ranges of [0, {L})")
    kv = model.n_kv_heads * model.head_dim
    if len(cache.k) != model.n_layers or any(a.shape != (L, kv) for a in cache.k + cache.v):
        raise ValueError(f"the cache must hold {model.n_layers} layers of [{L}, {kv}]")
    src = source_rows(model, rows, L)
    if src.size and (src.min() < c0 or src.max() >= c1):
        raise ValueError(f"logits rows {list(map(int, rows))} read hidden rows outside the "
                         f"computed [{c0}, {c1})")
    cos, sin = rope_cos_sin(c1, model.head_dim, model.rope_theta)
    cos, sin = cos[c0:c1], sin[c0:c1]          # the rows' absolute positions
    h = model.embed[ids[c0:c1]].astype(model.dtype)
    for li, layer in enumerate(model.layers):
        h = h + attention_rows(model, layer, rms_norm(h, layer.attn_norm, model.eps), cos,
                               sin, c0, c1, ranges, cache.k[li], cache.v[li])
        n = rms_norm(h, layer.ffn_norm, model.eps)
        h = h + linear(silu(linear(n, layer.w_gate)) * linear(n, layer.w_up), layer.w_down)
    h = rms_norm(h, model.final_norm, model.eps)
    return linear(h[src - c0], model.lm_head)


def forward_masked(model, ids, rows, P, B):
    """A full forward (every row, an empty cache) under the model's own mask (§1)."""
    L = len(ids)
    ranges = key_ranges(model.block_attention, range(L), P, B, L)
    return forward_rows(model, ids, 0, L, ranges, new_cache(model, L), rows)
