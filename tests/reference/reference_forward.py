"""Independent NumPy forward pass for LLaDA (dense) and Dream checkpoints.

Written from shared/reference/models.md, not from Mosaic's C++ code. Everything is computed
in float64 except the RoPE angles, which are built in float32 exactly like the PyTorch
reference (inv_freq and pos * inv_freq are float32 products); their cos/sin are then taken
in float64.

    model = load_model("/path/to/hf_folder")       # family from config.json architectures
    logits = forward(model, ids=[5, 9, 2], rows=[0, 2])   # float64 [2, vocab]

Model (both families): pre-norm decoder, full bidirectional attention (no mask), RMSNorm,
half-split RoPE, GQA, SwiGLU MLP, LM head after the final RMSNorm. Dream's logits for
position p come from hidden row p-1 (row 0 for p = 0); LLaDA's from row p.
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
                 dtype=dtype)


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


def linear(x, w, b=None):
    """y = x @ w.T (+ b) for w [out, in]."""
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


def final_hidden(model, ids):
    """Final-normed hidden states [L, hidden] of one sequence of token ids."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("ids must be a non-empty 1-D list of token ids")
    if ids.min() < 0 or ids.max() >= model.embed.shape[0]:
        raise ValueError(f"token id out of range [0, {model.embed.shape[0]})")
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
