"""Independent NumPy forward pass for LLaDA-MoE (LLaDA-MoE-7B-A1B and its tiny test folders).

Written from shared/reference/moe-models.md §1 (config §1.2, tensors §1.3, forward §1.4), not
from Mosaic's C++ code. Everything is float64 (by default) except the RoPE angles, which are
built in float32 like the PyTorch reference (reference_forward.rope_cos_sin, shared with the
dense families); their cos/sin are then taken in float64.

    model = load_model("/path/to/hf_folder")        # config.json architectures LLaDAMoEModelLM
    logits = forward(model, ids=[5, 9, 2], rows=[0, 2])     # float64 [2, vocab]
    probs = routing_probabilities(model, ids)       # per layer [L, num_experts] router softmax
    margin = min_routing_margin(model, ids)         # how close any row came to a routing flip

The model (moe-models.md §1.4):
  h = embed(ids)
  per layer:  a = RMSNorm(h, input_layernorm)
              q = a Wq^T, k = a Wk^T, v = a Wv^T                  (no biases)
              q, k viewed per head [L, heads, head_dim]; each head RMS-normalised with the
              shared [head_dim] weight q_norm / k_norm (eps = rms_norm_eps), BEFORE RoPE
              RoPE, NeoX / rotate-half (pair j with j + head_dim/2), positions 0..L-1
              full bidirectional GQA attention (no mask), scale 1/sqrt(head_dim)
              h = h + attn Wo^T
              m = RMSNorm(h, post_attention_layernorm)
              router: p = softmax(m Wg^T) over all experts; the k = num_experts_per_tok
              largest p per row (ties toward the LOWER expert index); NO renormalisation of
              the k weights, no scaling factor
              y = sum over chosen e (in expert order 0..E-1) of p[e] * down_e(silu(gate_e m) * up_e m)
              h = h + y
  logits = RMSNorm(h, norm) lm_head^T (or the embedding when tie_word_embeddings); row p
  predicts position p (no shift, like dense LLaDA).

Config switches the forward does not implement are refused with a ValueError naming the
field (a dense layer through moe_layer_freq 0, a shared expert, partial rotary, RoPE scaling,
q/k/v clipping, attention biases, an expert bias, no QK-norm) rather than computed wrongly.
norm_topk_prob is accepted whatever it says: the HF MoE block hard-codes no renormalisation
(§1.2), and so does this one.
"""

import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as ref  # noqa: E402
import safetensors_np  # noqa: E402

ARCHITECTURE = "LLaDAMoEModelLM"

# Switches whose only supported value is "off": absent or one of these values.
_MUST_BE_OFF = {
    "rope_scaling": (None,),
    "clip_qkv": (None,),
    "attention_bias": (False, None),
    "moe_router_enable_expert_bias": (False, None),
    "shared_expert_intermediate_size": (None,),
}


@dataclass
class MoeLayer:
    """One decoder block's weights, [out, in] for linears; experts stacked on axis 0."""
    attn_norm: np.ndarray   # [hidden]
    wq: np.ndarray          # [n_heads * head_dim, hidden]
    wk: np.ndarray          # [n_kv_heads * head_dim, hidden]
    wv: np.ndarray          # [n_kv_heads * head_dim, hidden]
    wo: np.ndarray          # [hidden, n_heads * head_dim]
    q_norm: np.ndarray      # [head_dim], shared by every query head
    k_norm: np.ndarray      # [head_dim], shared by every key head
    ffn_norm: np.ndarray    # [hidden]  (post_attention_layernorm)
    router: np.ndarray      # [n_experts, hidden]  (mlp.gate.weight)
    w_gate: np.ndarray      # [n_experts, expert_ffn, hidden]  (SiLU side)
    w_up: np.ndarray        # [n_experts, expert_ffn, hidden]
    w_down: np.ndarray      # [n_experts, hidden, expert_ffn]


@dataclass
class MoeModel:
    """Hyper-parameters and weights of one LLaDA-MoE checkpoint, in the compute dtype."""
    hidden: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    n_experts: int
    experts_per_token: int
    expert_ffn: int
    vocab: int
    rope_theta: float
    eps: float
    embed: np.ndarray       # [vocab, hidden]
    final_norm: np.ndarray  # [hidden]
    lm_head: np.ndarray     # [vocab, hidden] (the embedding itself when tied)
    layers: list = field(default_factory=list)
    tied: bool = False
    dtype: type = np.float64


# ----------------------------------------------------------------------------------------
# Config and weights
# ----------------------------------------------------------------------------------------

def _require(config, key):
    if config.get(key) is None:
        raise ValueError(f"config.json: field '{key}' is missing (LLaDA-MoE needs it)")
    return config[key]


def _positive_int(config, key, value=None):
    value = _require(config, key) if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"config.json: {key} = {value!r} must be a positive integer")
    return value


def hparams_from_config(config):
    """Validate a LLaDA-MoE config.json and return its hyper-parameters as a dict.

    Raises ValueError, naming the field, for anything this forward would compute
    differently from the HF model (see the module docstring)."""
    archs = config.get("architectures") or []
    if archs != [ARCHITECTURE]:
        # model_type is "llada" for dense LLaDA too (§1.2), so only architectures decides.
        raise ValueError(f"config.json: architectures {archs!r} is not [\"{ARCHITECTURE}\"]")
    for key, allowed in _MUST_BE_OFF.items():
        if config.get(key) not in allowed:
            raise ValueError(f"config.json: {key} = {config[key]!r} is not supported by the "
                             f"LLaDA-MoE reference (expected absent or {allowed[0]!r})")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config.json: hidden_act = {config['hidden_act']!r} is not supported "
                         f"(expected \"silu\")")
    if config.get("qk_layernorm", True) is not True:
        raise ValueError(f"config.json: qk_layernorm = {config['qk_layernorm']!r} is not "
                         f"supported (LLaDA-MoE normalises q and k per head: expected true)")
    rotary = config.get("partial_rotary_factor")
    if rotary is None or float(rotary) != 1.0:
        # The HF class default is -1, so a real folder states it; only full rotary is done.
        raise ValueError(f"config.json: partial_rotary_factor = {rotary!r} is not supported "
                         f"(only full rotary, 1.0)")

    n_layers = _positive_int(config, "num_hidden_layers")
    n_heads = _positive_int(config, "num_attention_heads")
    n_kv = config.get("num_key_value_heads")
    n_kv = n_heads if n_kv is None else _positive_int(config, "num_key_value_heads")
    hidden = _positive_int(config, "hidden_size")
    n_experts = _positive_int(config, "num_experts")
    top_k = _positive_int(config, "num_experts_per_tok")
    if top_k > n_experts:
        raise ValueError(f"config.json: num_experts_per_tok {top_k} > num_experts {n_experts}")

    freq = config.get("moe_layer_freq", 1)
    if isinstance(freq, list):
        if len(freq) != n_layers:
            raise ValueError(f"config.json: moe_layer_freq has {len(freq)} entries for "
                             f"{n_layers} layers")
        if any(f != 1 for f in freq):
            dense = [i for i, f in enumerate(freq) if f != 1]
            raise ValueError(f"config.json: moe_layer_freq marks layer(s) {dense} as not MoE "
                             f"(entry != 1); dense layers are not supported, every LLaDA-MoE "
                             f"layer is MoE")
    elif freq != 1:
        raise ValueError(f"config.json: moe_layer_freq = {freq!r} is not supported (every "
                         f"layer must be MoE: 1 or a list of ones)")

    if hidden % n_heads != 0:
        raise ValueError(f"config.json: hidden_size {hidden} is not divisible by "
                         f"num_attention_heads {n_heads}")
    head_dim = hidden // n_heads
    if config.get("head_dim") not in (None, head_dim):
        raise ValueError(f"config.json: head_dim {config['head_dim']} != hidden_size / "
                         f"num_attention_heads = {head_dim}")
    if head_dim % 2 != 0:
        raise ValueError(f"config.json: head_dim {head_dim} must be even for RoPE")
    if n_heads % n_kv != 0:
        raise ValueError(f"config.json: num_attention_heads {n_heads} is not a multiple of "
                         f"num_key_value_heads {n_kv}")
    eps = float(_require(config, "rms_norm_eps"))
    theta = float(_require(config, "rope_theta"))
    if not (eps > 0 and theta > 0):
        raise ValueError(f"config.json: rms_norm_eps {eps} and rope_theta {theta} must be > 0")
    return dict(hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
                head_dim=head_dim, n_experts=n_experts, experts_per_token=top_k,
                expert_ffn=_positive_int(config, "expert_intermediate_size"),
                vocab=_positive_int(config, "vocab_size"), rope_theta=theta, eps=eps,
                tied=bool(config.get("tie_word_embeddings", False)))


def tensor_names(hp, i=None):
    """HF tensor names (moe-models.md §1.3): with i None the global ones, else layer i's
    (role -> name) with the experts' as lists indexed by expert."""
    if i is None:
        return {"embed": "model.embed_tokens.weight", "final_norm": "model.norm.weight",
                "lm_head": "lm_head.weight"}
    p = f"model.layers.{i}."
    experts = range(hp["n_experts"])
    return {"attn_norm": p + "input_layernorm.weight",
            "wq": p + "self_attn.q_proj.weight", "wk": p + "self_attn.k_proj.weight",
            "wv": p + "self_attn.v_proj.weight", "wo": p + "self_attn.o_proj.weight",
            "q_norm": p + "self_attn.q_norm.weight", "k_norm": p + "self_attn.k_norm.weight",
            "ffn_norm": p + "post_attention_layernorm.weight",
            "router": p + "mlp.gate.weight",
            "w_gate": [p + f"mlp.experts.{e}.gate_proj.weight" for e in experts],
            "w_up": [p + f"mlp.experts.{e}.up_proj.weight" for e in experts],
            "w_down": [p + f"mlp.experts.{e}.down_proj.weight" for e in experts]}


def expected_shapes(hp):
    """{tensor name: shape} of every tensor a folder with these hyper-parameters holds."""
    H, hd, E, F, V = (hp["hidden"], hp["head_dim"], hp["n_experts"], hp["expert_ffn"],
                      hp["vocab"])
    nq, nkv = hp["n_heads"], hp["n_kv_heads"]
    g = tensor_names(hp)
    shapes = {g["embed"]: (V, H), g["final_norm"]: (H,)}
    if not hp["tied"]:
        shapes[g["lm_head"]] = (V, H)
    for i in range(hp["n_layers"]):
        n = tensor_names(hp, i)
        shapes.update({n["attn_norm"]: (H,), n["wq"]: (nq * hd, H), n["wk"]: (nkv * hd, H),
                       n["wv"]: (nkv * hd, H), n["wo"]: (H, nq * hd), n["q_norm"]: (hd,),
                       n["k_norm"]: (hd,), n["ffn_norm"]: (H,), n["router"]: (E, H)})
        for e in range(E):
            shapes[n["w_gate"][e]] = (F, H)
            shapes[n["w_up"][e]] = (F, H)
            shapes[n["w_down"][e]] = (H, F)
    return shapes


def build_model(config, tensors, dtype=np.float64, strict=True):
    """Build a MoeModel from a parsed config and {name: array}; checks every shape.

    strict: also refuse tensors the config does not account for (an expert bias, a shared
    expert, biases, a 9th expert...), which would mean the folder is not the model the config
    describes. A tied model may still carry an lm_head.weight; it is ignored, as HF does."""
    hp = hparams_from_config(config)
    shapes = expected_shapes(hp)
    missing = [n for n in shapes if n not in tensors]
    if missing:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise ValueError(f"checkpoint: tensor '{missing[0]}' is missing; missing: "
                         f"{missing[:5]}{more}")
    for name, shape in shapes.items():
        if tuple(np.shape(tensors[name])) != tuple(shape):
            raise ValueError(f"checkpoint: tensor '{name}' has shape "
                             f"{list(np.shape(tensors[name]))}, expected {list(shape)}")
    if strict:
        ignorable = {tensor_names(hp)["lm_head"]} if hp["tied"] else set()
        extra = sorted(set(tensors) - set(shapes) - ignorable)
        if extra:
            raise ValueError(f"checkpoint: unexpected tensor(s) {extra[:5]} that the LLaDA-MoE "
                             f"config does not account for")

    def get(name):
        return np.asarray(tensors[name], dtype=dtype)

    def stack(names):
        return np.stack([get(n) for n in names])

    g = tensor_names(hp)
    embed = get(g["embed"])
    lm_head = embed if hp["tied"] else get(g["lm_head"])
    layers = []
    for i in range(hp["n_layers"]):
        n = tensor_names(hp, i)
        layers.append(MoeLayer(
            attn_norm=get(n["attn_norm"]), wq=get(n["wq"]), wk=get(n["wk"]), wv=get(n["wv"]),
            wo=get(n["wo"]), q_norm=get(n["q_norm"]), k_norm=get(n["k_norm"]),
            ffn_norm=get(n["ffn_norm"]), router=get(n["router"]),
            w_gate=stack(n["w_gate"]), w_up=stack(n["w_up"]), w_down=stack(n["w_down"])))
    return MoeModel(hidden=hp["hidden"], n_layers=hp["n_layers"], n_heads=hp["n_heads"],
                    n_kv_heads=hp["n_kv_heads"], head_dim=hp["head_dim"],
                    n_experts=hp["n_experts"], experts_per_token=hp["experts_per_token"],
                    expert_ffn=hp["expert_ffn"], vocab=hp["vocab"],
                    rope_theta=hp["rope_theta"], eps=hp["eps"], embed=embed,
                    final_norm=get(g["final_norm"]), lm_head=lm_head, layers=layers,
                    tied=hp["tied"], dtype=dtype)


def load_model(model_dir, dtype=np.float64, strict=True):
    """Load a LLaDA-MoE HF folder (config.json + safetensors, single or sharded)."""
    config, tensors = safetensors_np.load_model_dir(model_dir)
    return build_model(config, tensors, dtype, strict)


# ----------------------------------------------------------------------------------------
# Math
# ----------------------------------------------------------------------------------------

def qk_norm(x, weight, eps):
    """Per-head RMSNorm of x [L, heads, head_dim] with one shared [head_dim] weight."""
    return ref.rms_norm(x, weight, eps)


def attend(q, k, v):
    """Bidirectional GQA attention core: q [nq, L, d], k/v [nkv, L, d] -> [nq, L, d].

    Query head h reads kv head h // (nq / nkv) (consecutive query heads share a kv head)."""
    nq, nkv, d = q.shape[0], k.shape[0], q.shape[-1]
    kv_of_head = np.arange(nq) // (nq // nkv)
    k, v = k[kv_of_head], v[kv_of_head]
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)        # [nq, L, L], no mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    return p @ v


def attention(model, layer, x, cos, sin):
    """Self-attention of the normed input x [L, hidden] -> [L, hidden] (QK-norm, RoPE, GQA)."""
    L = x.shape[0]
    nq, nkv, hd = model.n_heads, model.n_kv_heads, model.head_dim
    q = qk_norm(ref.linear(x, layer.wq).reshape(L, nq, hd), layer.q_norm, model.eps)
    k = qk_norm(ref.linear(x, layer.wk).reshape(L, nkv, hd), layer.k_norm, model.eps)
    v = ref.linear(x, layer.wv).reshape(L, nkv, hd)
    # QK-norm came first; RoPE rotates the normalised heads ([heads, L, hd] for apply_rope).
    q = ref.apply_rope(q.transpose(1, 0, 2), cos, sin)
    k = ref.apply_rope(k.transpose(1, 0, 2), cos, sin)
    out = attend(q, k, v.transpose(1, 0, 2))
    return ref.linear(out.transpose(1, 0, 2).reshape(L, nq * hd), layer.wo)


def router_probabilities(m, router):
    """softmax over all experts of the router logits m Wg^T: [L, hidden] -> [L, E]."""
    logits = ref.linear(m, router)
    logits = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=-1, keepdims=True)


def top_k_experts(probs, k):
    """(experts [L, k], weights [L, k]): each row's k largest probabilities, largest first.

    Ties go to the lower expert index (a stable sort of -p keeps index order among equals).
    The weights are the probabilities themselves: no renormalisation, no scaling."""
    experts = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
    return experts, np.take_along_axis(probs, experts, axis=-1)


def expert_mlp(layer, e, x):
    """Expert e's SwiGLU: down_e(silu(gate_e x) * up_e x), x [n, hidden] -> [n, hidden]."""
    return ref.linear(ref.silu(ref.linear(x, layer.w_gate[e])) * ref.linear(x, layer.w_up[e]),
                      layer.w_down[e])


def moe_block(layer, m, k):
    """The sparse MoE MLP of the normed input m [L, hidden]: (y [L, hidden], probs [L, E])."""
    probs = router_probabilities(m, layer.router)
    experts, weights = top_k_experts(probs, k)
    y = np.zeros_like(m)
    for e in range(layer.router.shape[0]):        # expert order, as the HF index_add loop
        rows, slot = np.nonzero(experts == e)
        if rows.size:
            y[rows] += weights[rows, slot][:, None] * expert_mlp(layer, e, m[rows])
    return y, probs


def _checked_ids(model, ids):
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("ids must be a non-empty 1-D list of token ids")
    if ids.min() < 0 or ids.max() >= model.embed.shape[0]:
        raise ValueError(f"token id out of range [0, {model.embed.shape[0]})")
    return ids


def final_hidden(model, ids):
    """(final-normed hidden states [L, hidden], router probabilities per layer [L, E])."""
    ids = _checked_ids(model, ids)
    cos, sin = ref.rope_cos_sin(ids.size, model.head_dim, model.rope_theta)
    h = model.embed[ids].astype(model.dtype)
    routing = []
    for layer in model.layers:
        h = h + attention(model, layer, ref.rms_norm(h, layer.attn_norm, model.eps), cos, sin)
        y, probs = moe_block(layer, ref.rms_norm(h, layer.ffn_norm, model.eps),
                             model.experts_per_token)
        h = h + y
        routing.append(probs)
    return ref.rms_norm(h, model.final_norm, model.eps), routing


def _checked_rows(rows, length):
    rows = np.asarray(list(rows), dtype=np.int64)
    if rows.ndim != 1 or (rows.size and (rows.min() < 0 or rows.max() >= length)):
        raise ValueError(f"rows must be a list of positions in [0, {length})")
    return rows


def forward_with_routing(model, ids, rows):
    """(logits [len(rows), vocab], router probabilities per layer [L, E]) of one sequence."""
    h, routing = final_hidden(model, ids)
    return ref.linear(h[_checked_rows(rows, len(ids))], model.lm_head), routing


def forward(model, ids, rows):
    """Logits [len(rows), vocab] (model.dtype) of positions `rows` of sequence `ids`."""
    return forward_with_routing(model, ids, rows)[0]


def routing_probabilities(model, ids):
    """Per layer, every row's router probabilities [L, num_experts] (float64)."""
    return final_hidden(model, ids)[1]


def routing_margins(probs, k):
    """Per row, how far the k-th largest probability is from the (k+1)-th, relative:
    (p_(k) - p_(k+1)) / p_(k). inf where k equals the expert count (nothing to flip to).

    A margin near 0 means a tiny perturbation of the router input (another implementation's
    rounding) may pick a different k-th expert."""
    probs = np.asarray(probs, dtype=np.float64)
    if k >= probs.shape[-1]:
        return np.full(probs.shape[:-1], np.inf)
    ordered = -np.sort(-probs, axis=-1)
    return (ordered[..., k - 1] - ordered[..., k]) / ordered[..., k - 1]


def min_routing_margin(model, ids, routing=None):
    """The smallest routing margin over every layer and every row of one sequence.

    One row's routing feeds every other row's attention in the later layers, so a near tie
    anywhere makes the whole sequence's logits sensitive to rounding."""
    routing = routing_probabilities(model, ids) if routing is None else routing
    return float(min(np.min(routing_margins(p, model.experts_per_token)) for p in routing))


# ----------------------------------------------------------------------------------------
# The cached forward and generation (moe-models.md §1.5: LLaDA's sampler, row p predicts p)
# ----------------------------------------------------------------------------------------
#
# Written like reference_forward.forward_rows (docs/design/cached-decoding.md §4), with this
# model's attention (per-head QK-norm before RoPE) and MoE block. Only the rows [c0, c1) are
# computed; a computed query reads its key range [lo, hi), keys inside [c0, c1) fresh from
# this call and the others from the sequence's reference_forward.KVCache (per layer K after
# QK-norm and RoPE, and V, at absolute positions; NaN where no forward ever wrote, so reading
# a row nobody computed raises). Routing is per row, so the experts of a computed row depend
# on the cached rows only through its attention.

def attention_rows(model, layer, x, cos, sin, c0, c1, ranges, kc, vc):
    """Attention of the computed rows [c0, c1) (x [c1 - c0, hidden], normed input): writes
    their K (QK-normed, rotated) and V into the layer's cache arrays kc, vc, then each query
    attends over the keys of its range read from them."""
    n = c1 - c0
    nq, nkv, hd = model.n_heads, model.n_kv_heads, model.head_dim
    q = qk_norm(ref.linear(x, layer.wq).reshape(n, nq, hd), layer.q_norm, model.eps)
    k = qk_norm(ref.linear(x, layer.wk).reshape(n, nkv, hd), layer.k_norm, model.eps)
    v = ref.linear(x, layer.wv).reshape(n, nkv, hd)
    q = ref.apply_rope(q.transpose(1, 0, 2), cos, sin)                   # [nq, n, hd]
    k = ref.apply_rope(k.transpose(1, 0, 2), cos, sin)                   # [nkv, n, hd]
    kc[c0:c1] = k.transpose(1, 0, 2).reshape(n, nkv * hd)
    vc[c0:c1] = v.reshape(n, nkv * hd)
    out = np.empty((nq, n, hd), dtype=x.dtype)
    for lo, hi in sorted({(int(a), int(b)) for a, b in ranges}):
        sel = np.flatnonzero((ranges[:, 0] == lo) & (ranges[:, 1] == hi))
        keys = kc[lo:hi].reshape(hi - lo, nkv, hd).transpose(1, 0, 2)
        vals = vc[lo:hi].reshape(hi - lo, nkv, hd).transpose(1, 0, 2)
        if not (np.all(np.isfinite(keys)) and np.all(np.isfinite(vals))):
            bad = lo + int(np.flatnonzero(~np.all(np.isfinite(kc[lo:hi]), axis=1)
                                          | ~np.all(np.isfinite(vc[lo:hi]), axis=1))[0])
            raise ValueError(f"rows [{c0}, {c1}): key range [{lo}, {hi}) reads cache row "
                             f"{bad}, which no forward has computed")
        out[:, sel] = attend(q[:, sel], keys, vals)
    return ref.linear(out.transpose(1, 0, 2).reshape(n, nq * hd), layer.wo)


def forward_rows_with_routing(model, ids, c0, c1, ranges, cache, rows):
    """(logits [len(rows), vocab], router probabilities per layer [c1 - c0, E]) of canvas
    `ids`, computing only the rows [c0, c1) against `cache` (see above). rows must lie in
    [c0, c1) (no shift). With c0 = 0, c1 = L, full ranges and an empty cache: forward()."""
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
    rows = _checked_rows(rows, L)
    if rows.size and (rows.min() < c0 or rows.max() >= c1):
        raise ValueError(f"logits rows {list(map(int, rows))} lie outside the computed "
                         f"[{c0}, {c1})")
    cos, sin = ref.rope_cos_sin(c1, model.head_dim, model.rope_theta)
    cos, sin = cos[c0:c1], sin[c0:c1]          # the rows' absolute positions
    h = model.embed[ids[c0:c1]].astype(model.dtype)
    routing = []
    for li, layer in enumerate(model.layers):
        h = h + attention_rows(model, layer, ref.rms_norm(h, layer.attn_norm, model.eps),
                               cos, sin, c0, c1, ranges, cache.k[li], cache.v[li])
        y, probs = moe_block(layer, ref.rms_norm(h, layer.ffn_norm, model.eps),
                             model.experts_per_token)
        h = h + y
        routing.append(probs)
    h = ref.rms_norm(h, model.final_norm, model.eps)
    return ref.linear(h[rows - c0], model.lm_head), routing


def forward_rows(model, ids, c0, c1, ranges, cache, rows):
    """Logits of forward_rows_with_routing."""
    return forward_rows_with_routing(model, ids, c0, c1, ranges, cache, rows)[0]


class GenerationModel:
    """A MoeModel as generate_np takes it: LLaDA's sampler (moe-models.md §1.5: family
    "llada", full bidirectional attention, row p predicts p), this module's forward() and
    forward_rows() as its `forward_module` (generate_np.forward_module), and every other
    attribute (vocab, layers, n_kv_heads, head_dim, dtype for the caches) the MoeModel's.

    It also keeps the smallest routing margin (routing_margins, relative) over every
    computed row and layer of every forward since reset(): a generation whose margin gets
    near 0 anywhere may be decoded differently by an fp32 implementation.

        gm = GenerationModel(load_model(folder))
        gm.reset(); result = generate_np.generate(gm, prompt, params, ids); gm.min_margin
    """

    family = ref.FAMILY_LLADA
    block_attention = None

    def __init__(self, model):
        self.moe = model
        self.forward_module = self
        self.reset()

    def __getattr__(self, name):
        moe = self.__dict__.get("moe")
        if moe is None:
            raise AttributeError(name)
        return getattr(moe, name)

    def reset(self):
        self.min_margin = math.inf
        self.forward_calls = 0

    def _note(self, routing):
        self.forward_calls += 1
        self.min_margin = min(self.min_margin,
                              min_routing_margin(self.moe, None, routing))

    def forward(self, model, ids, rows):
        assert model is self, "GenerationModel.forward is its own forward_module"
        logits, routing = forward_with_routing(self.moe, ids, rows)
        self._note(routing)
        return logits

    def forward_rows(self, model, ids, c0, c1, ranges, cache, rows):
        assert model is self, "GenerationModel.forward_rows is its own forward_module"
        logits, routing = forward_rows_with_routing(self.moe, ids, c0, c1, ranges, cache,
                                                    rows)
        self._note(routing)
        return logits
