"""Independent NumPy forward pass and block decoding for LLaDA 2.x (LLaDA2MoeModelLM:
LLaDA2.0-mini / -flash, their previews and -CAP variants, LLaDA2.1-mini / -flash) and the
tiny test folders of that family.

Written from shared/reference/moe-models.md §2 (config §2.1, tensors §2.2, forward §2.3,
generation §2.4, LLaDA2.1 editing §2.5) and, for the decoding loops, from the dllm samplers
(repo ZHZisZZ/dllm, dllm/pipelines/llada2/sampler.py and dllm/pipelines/llada21/sampler.py),
whose rules are restated here in words and re-implemented; not from Mosaic's C++ code.
Everything is float64 (by default) except the RoPE angles, which are built in float32 like
the PyTorch reference (reference_forward.rope_cos_sin); their cos/sin are then float64.

    model = load_model("/path/to/hf_folder")      # config.json architectures LLaDA2MoeModelLM
    logits = forward(model, ids, rows=[0, 2], block_length=32)    # float64 [2, vocab]
    canvas, forwards = generate(model, prompt, gen_length=64)      # LLaDA2.0 decoding
    canvas, forwards = generate_llada21(model, prompt, gen_length=64)   # with token edits

The model (moe-models.md §2.3):
  h = embed(ids)                                   (model.word_embeddings)
  per layer:  a = RMSNorm(h, input_layernorm)
              qkv = a Wqkv^T, viewed [L, nh + 2 nkv, hd]: heads 0..nh-1 are Q, then nkv K
              heads, then nkv V heads (no biases)
              q, k: each head RMS-normalised over its hd channels with the shared [hd] weight
              (query_layernorm / key_layernorm, eps = rms_norm_eps), BEFORE RoPE
              partial RoPE: only channels [0, rotary_dim) rotate, rotate-half inside them
              (pair j with j + rotary_dim/2, theta_j = rope_theta^(-2j / rotary_dim)),
              channels [rotary_dim, hd) pass through; positions 0..L-1
              block-causal GQA attention on the absolute block grid: a query at q sees keys
              [0, min(L, (q // B + 1) * B)) -- every earlier block and its own block
              bidirectionally (block_length None: full attention); scale 1/sqrt(hd); query
              head h reads kv head h // (nh / nkv)
              h = h + attn Wdense^T
              m = RMSNorm(h, post_attention_layernorm)
              layer < first_k_dense_replace: h = h + down(silu(gate m) * up m)  (dense)
              else (MoE):
                s = sigmoid(m Wg^T)                        [L, E]
                selection = s + expert_bias                (for the choice only)
                group-limited top-k: the E experts form n_group equal consecutive groups;
                group score = sum of the 2 largest selection scores of the group (a group of
                ONE expert: that expert's score -- HF's topk(2) would raise there; this is
                the choice made here); the topk_group best groups are kept (ties to the
                lower group index); the k = num_experts_per_tok largest selection scores
                among the experts of the kept groups are chosen (ties to the lower expert
                index)
                weights = the chosen experts' UNBIASED s, divided by (their sum + 1e-20)
                when k > 1 (HF renormalises only then; with k = 1 the weight is s itself),
                times routed_scaling_factor (norm_topk_prob is not consulted, like HF)
                y = sum_e w_e expert_e(m) + shared(m)  (shared: one SwiGLU of width
                moe_intermediate_size * num_shared_experts; none when 0 / absent)
                h = h + y
  logits = RMSNorm(h, model.norm) lm_head^T (the embedding when tie_word_embeddings); row p
  predicts position p (no shift).

Config (§2.1). Read: hidden_size, num_hidden_layers, num_attention_heads,
num_key_value_heads, head_dim (HF falls back to hidden / heads when absent; when present it
must equal that), intermediate_size (needed when a dense layer exists),
moe_intermediate_size, num_experts, num_experts_per_tok, num_shared_experts, n_group,
topk_group, routed_scaling_factor, first_k_dense_replace, rope_theta, partial_rotary_factor
(absent: 0.5, the HF class default), rms_norm_eps (absent: 1e-6), use_qk_norm (absent: true,
the HF class default; false: no QK-norm and no norm tensors), tie_word_embeddings,
vocab_size, mask_token_id / eos_token_id (absent: 156895 / 156892, the HF generate()
defaults). Refused with a ValueError naming the field: rope_scaling non-null, use_qkv_bias
or use_bias true (absent counts as false here, although the HF class default of use_bias is
true: no real checkpoint omits it and its tensors would be missing), score_function other
than "sigmoid", norm_head true, hidden_act other than "silu". Ignored as HF's default
attention path ignores them: use_sliding_window / sliding_window / max_window_layers (only a
flash-attention-2 backend could apply a window), norm_topk_prob (see above), router_dtype
(HF always routes in fp32; here float64), moe_router_enable_expert_bias (HF always has the
buffer: the expert_bias tensor is required either way).

Weights: expert_bias is kept in float64 exactly as stored (F64 included); the other tensors
go through safetensors_np (float32, exact for BF16 / F16 / F32) and then model.dtype.
"""

import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402

ARCHITECTURE = "LLaDA2MoeModelLM"
DEFAULT_MASK_ID = 156895      # HF generate() default (moe-models.md §2.1, §2.4)
DEFAULT_EOS_ID = 156892
DEFAULT_RMS_NORM_EPS = 1e-6
DEFAULT_PARTIAL_ROTARY_FACTOR = 0.5
ROUTER_EPS = 1e-20            # added to the sum of the chosen scores before dividing

# Switches whose only supported value is "off": absent or one of these values.
_MUST_BE_OFF = {
    "rope_scaling": (None,),
    "use_qkv_bias": (False, None),
    "use_bias": (False, None),
    "norm_head": (False, None),
}


@dataclass
class DenseMlp:
    """A SwiGLU MLP, [out, in]: down(silu(gate x) * up x). The dense layers and the shared
    expert."""
    w_gate: np.ndarray      # [ffn, hidden]  (SiLU side)
    w_up: np.ndarray        # [ffn, hidden]
    w_down: np.ndarray      # [hidden, ffn]


@dataclass
class MoeMlp:
    """A sparse MoE block: router, selection bias, routed experts stacked on axis 0, and the
    shared expert (a DenseMlp, or None)."""
    router: np.ndarray      # [n_experts, hidden]  (mlp.gate.weight)
    expert_bias: np.ndarray  # [n_experts], float64 always (mlp.gate.expert_bias)
    w_gate: np.ndarray      # [n_experts, expert_ffn, hidden]
    w_up: np.ndarray        # [n_experts, expert_ffn, hidden]
    w_down: np.ndarray      # [n_experts, hidden, expert_ffn]
    shared: DenseMlp = None


@dataclass
class Llada2Layer:
    """One decoder block's weights, [out, in] for linears."""
    attn_norm: np.ndarray   # [hidden]
    wqkv: np.ndarray        # [(n_heads + 2 n_kv_heads) * head_dim, hidden]
    q_norm: np.ndarray      # [head_dim] (None without use_qk_norm)
    k_norm: np.ndarray      # [head_dim] (None without use_qk_norm)
    wo: np.ndarray          # [hidden, n_heads * head_dim]  (attention.dense)
    ffn_norm: np.ndarray    # [hidden]  (post_attention_layernorm)
    mlp: object             # DenseMlp (layers < first_k_dense_replace) or MoeMlp


@dataclass
class Llada2Model:
    """Hyper-parameters and weights of one LLaDA 2.x checkpoint, in the compute dtype."""
    hidden: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rotary_dim: int
    ffn: int                # dense layers' intermediate_size (None when no dense layer)
    expert_ffn: int
    n_experts: int
    experts_per_token: int
    n_shared: int
    n_group: int
    topk_group: int
    routed_scaling: float
    first_dense: int
    vocab: int
    rope_theta: float
    eps: float
    mask_id: int
    eos_id: int
    embed: np.ndarray       # [vocab, hidden]
    final_norm: np.ndarray  # [hidden]
    lm_head: np.ndarray     # [vocab, hidden] (the embedding itself when tied)
    layers: list = field(default_factory=list)
    qk_norm: bool = True
    tied: bool = False
    dtype: type = np.float64


# ----------------------------------------------------------------------------------------
# Config and weights
# ----------------------------------------------------------------------------------------

def _require(config, key):
    if config.get(key) is None:
        raise ValueError(f"config.json: field '{key}' is missing (LLaDA 2.x needs it)")
    return config[key]


def _int_field(config, key, minimum=1, default=None):
    """An integer field >= minimum; `default` when absent / null (required if None)."""
    value = config.get(key)
    if value is None:
        if default is None:
            _require(config, key)
        value = default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"config.json: {key} = {value!r} must be an integer >= {minimum}")
    return value


def _float_field(config, key, default=None):
    """A finite float field > 0; `default` when absent / null (required if None)."""
    value = config.get(key)
    if value is None:
        if default is None:
            _require(config, key)
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value <= 0:
        raise ValueError(f"config.json: {key} = {value!r} must be a number > 0")
    return float(value)


def _check_switches(config):
    """Refuse the config switches this forward does not implement (module docstring)."""
    archs = config.get("architectures") or []
    if archs != [ARCHITECTURE]:
        raise ValueError(f"config.json: architectures {archs!r} is not [\"{ARCHITECTURE}\"]")
    for key, allowed in _MUST_BE_OFF.items():
        if config.get(key) not in allowed:
            raise ValueError(f"config.json: {key} = {config[key]!r} is not supported by the "
                             f"LLaDA 2.x reference (expected absent or {allowed[0]!r})")
    if config.get("score_function", "sigmoid") != "sigmoid":
        raise ValueError(f"config.json: score_function = {config['score_function']!r} is "
                         f"not supported (the HF router hard-codes \"sigmoid\")")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config.json: hidden_act = {config['hidden_act']!r} is not "
                         f"supported (expected \"silu\")")
    if config.get("use_qk_norm", True) not in (True, False):
        raise ValueError(f"config.json: use_qk_norm = {config['use_qk_norm']!r} must be a "
                         f"boolean")


def _attention_hparams(config):
    """hidden, heads, kv heads, head_dim, rotary_dim of a config (validated)."""
    hidden = _int_field(config, "hidden_size")
    n_heads = _int_field(config, "num_attention_heads")
    n_kv = _int_field(config, "num_key_value_heads")
    if hidden % n_heads != 0:
        raise ValueError(f"config.json: hidden_size {hidden} is not divisible by "
                         f"num_attention_heads {n_heads}")
    head_dim = hidden // n_heads
    if config.get("head_dim") is not None and config["head_dim"] != head_dim:
        raise ValueError(f"config.json: head_dim {config['head_dim']!r} != hidden_size / "
                         f"num_attention_heads = {head_dim}")
    if n_heads % n_kv != 0:
        raise ValueError(f"config.json: num_attention_heads {n_heads} is not a multiple of "
                         f"num_key_value_heads {n_kv}")
    factor = config.get("partial_rotary_factor")
    factor = DEFAULT_PARTIAL_ROTARY_FACTOR if factor is None else factor
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or \
            not 0 < factor <= 1:
        raise ValueError(f"config.json: partial_rotary_factor = {factor!r} must be in (0, 1]")
    rotary_dim = int(head_dim * factor)
    if rotary_dim < 2 or rotary_dim % 2 != 0:
        raise ValueError(f"config.json: partial_rotary_factor {factor} gives rotary dim "
                         f"{rotary_dim} of head_dim {head_dim}; it must be even and >= 2")
    return hidden, n_heads, n_kv, head_dim, rotary_dim


def _moe_hparams(config, n_layers):
    """The MoE fields of a config (validated) as a dict."""
    n_experts = _int_field(config, "num_experts")
    top_k = _int_field(config, "num_experts_per_tok")
    n_group = _int_field(config, "n_group")
    topk_group = _int_field(config, "topk_group")
    if n_experts % n_group != 0:
        raise ValueError(f"config.json: num_experts {n_experts} is not divisible by "
                         f"n_group {n_group}")
    if topk_group > n_group:
        raise ValueError(f"config.json: topk_group {topk_group} > n_group {n_group}")
    kept = topk_group * (n_experts // n_group)
    if top_k > kept:
        raise ValueError(f"config.json: num_experts_per_tok {top_k} > the {kept} experts of "
                         f"topk_group {topk_group} groups of {n_experts // n_group}")
    first_dense = _int_field(config, "first_k_dense_replace", minimum=0, default=0)
    if first_dense > n_layers:
        raise ValueError(f"config.json: first_k_dense_replace {first_dense} > "
                         f"num_hidden_layers {n_layers}")
    ffn = _int_field(config, "intermediate_size") if first_dense > 0 else None
    return dict(n_experts=n_experts, experts_per_token=top_k, n_group=n_group,
                topk_group=topk_group, first_dense=first_dense, ffn=ffn,
                expert_ffn=_int_field(config, "moe_intermediate_size"),
                n_shared=_int_field(config, "num_shared_experts", minimum=0, default=0),
                routed_scaling=_float_field(config, "routed_scaling_factor"))


def _token_id(config, key, default):
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"config.json: {key} = {value!r} must be a non-negative integer")
    return value


def hparams_from_config(config):
    """Validate a LLaDA 2.x config.json and return its hyper-parameters as a dict.

    Raises ValueError, naming the field, for anything this forward would compute
    differently from the HF model (see the module docstring)."""
    _check_switches(config)
    n_layers = _int_field(config, "num_hidden_layers")
    hidden, n_heads, n_kv, head_dim, rotary_dim = _attention_hparams(config)
    hp = dict(hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
              head_dim=head_dim, rotary_dim=rotary_dim,
              vocab=_int_field(config, "vocab_size"),
              rope_theta=_float_field(config, "rope_theta"),
              eps=_float_field(config, "rms_norm_eps", DEFAULT_RMS_NORM_EPS),
              qk_norm=bool(config.get("use_qk_norm", True)),
              tied=bool(config.get("tie_word_embeddings", False)),
              mask_id=_token_id(config, "mask_token_id", DEFAULT_MASK_ID),
              eos_id=_token_id(config, "eos_token_id", DEFAULT_EOS_ID))
    hp.update(_moe_hparams(config, n_layers))
    return hp


def is_dense_layer(hp, i):
    """Layer i is a plain SwiGLU MLP (i < first_k_dense_replace), else MoE."""
    return i < hp["first_dense"]


def _mlp_names(prefix):
    return {"w_gate": prefix + "gate_proj.weight", "w_up": prefix + "up_proj.weight",
            "w_down": prefix + "down_proj.weight"}


def tensor_names(hp, i=None):
    """HF tensor names (moe-models.md §2.2): with i None the global ones, else layer i's
    (role -> name). A dense layer has "mlp" (gate/up/down); a MoE layer "router",
    "expert_bias", "experts" (role -> list by expert) and "shared" (role -> name, or None)."""
    if i is None:
        return {"embed": "model.word_embeddings.weight", "final_norm": "model.norm.weight",
                "lm_head": "lm_head.weight"}
    p = f"model.layers.{i}."
    names = {"attn_norm": p + "input_layernorm.weight",
             "wqkv": p + "attention.query_key_value.weight",
             "wo": p + "attention.dense.weight",
             "ffn_norm": p + "post_attention_layernorm.weight"}
    if hp["qk_norm"]:
        names["q_norm"] = p + "attention.query_layernorm.weight"
        names["k_norm"] = p + "attention.key_layernorm.weight"
    if is_dense_layer(hp, i):
        names["mlp"] = _mlp_names(p + "mlp.")
        return names
    names["router"] = p + "mlp.gate.weight"
    names["expert_bias"] = p + "mlp.gate.expert_bias"
    per_expert = [_mlp_names(p + f"mlp.experts.{e}.") for e in range(hp["n_experts"])]
    names["experts"] = {role: [n[role] for n in per_expert] for role in per_expert[0]}
    names["shared"] = _mlp_names(p + "mlp.shared_experts.") if hp["n_shared"] else None
    return names


def _mlp_shapes(names, hidden, ffn):
    return {names["w_gate"]: (ffn, hidden), names["w_up"]: (ffn, hidden),
            names["w_down"]: (hidden, ffn)}


def expected_shapes(hp):
    """{tensor name: shape} of every tensor a folder with these hyper-parameters holds."""
    H, hd, V = hp["hidden"], hp["head_dim"], hp["vocab"]
    nq, nkv, E, F = hp["n_heads"], hp["n_kv_heads"], hp["n_experts"], hp["expert_ffn"]
    g = tensor_names(hp)
    shapes = {g["embed"]: (V, H), g["final_norm"]: (H,)}
    if not hp["tied"]:
        shapes[g["lm_head"]] = (V, H)
    for i in range(hp["n_layers"]):
        n = tensor_names(hp, i)
        shapes.update({n["attn_norm"]: (H,), n["wqkv"]: ((nq + 2 * nkv) * hd, H),
                       n["wo"]: (H, nq * hd), n["ffn_norm"]: (H,)})
        if hp["qk_norm"]:
            shapes.update({n["q_norm"]: (hd,), n["k_norm"]: (hd,)})
        if is_dense_layer(hp, i):
            shapes.update(_mlp_shapes(n["mlp"], H, hp["ffn"]))
            continue
        shapes.update({n["router"]: (E, H), n["expert_bias"]: (E,)})
        for e in range(E):
            shapes.update(_mlp_shapes({r: n["experts"][r][e] for r in n["experts"]}, H, F))
        if n["shared"]:
            shapes.update(_mlp_shapes(n["shared"], H, F * hp["n_shared"]))
    return shapes


def _check_tensor_set(hp, tensors, strict):
    """Every expected tensor present with its shape; strict: nothing else (a tied model may
    still carry an lm_head.weight, ignored as HF does)."""
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
            raise ValueError(f"checkpoint: unexpected tensor(s) {extra[:5]} that the LLaDA 2.x "
                             f"config does not account for")


def build_model(config, tensors, dtype=np.float64, strict=True):
    """Build a Llada2Model from a parsed config and {name: array}; checks every name and
    shape (strict: also refuses tensors the config does not account for). expert_bias is
    taken in float64 whatever `dtype` is."""
    hp = hparams_from_config(config)
    _check_tensor_set(hp, tensors, strict)

    def get(name):
        return np.asarray(tensors[name], dtype=dtype)

    def dense(names):
        return DenseMlp(w_gate=get(names["w_gate"]), w_up=get(names["w_up"]),
                        w_down=get(names["w_down"]))

    g = tensor_names(hp)
    embed = get(g["embed"])
    layers = []
    for i in range(hp["n_layers"]):
        n = tensor_names(hp, i)
        if is_dense_layer(hp, i):
            mlp = dense(n["mlp"])
        else:
            ex = n["experts"]
            mlp = MoeMlp(router=get(n["router"]),
                         expert_bias=np.asarray(tensors[n["expert_bias"]], dtype=np.float64),
                         w_gate=np.stack([get(x) for x in ex["w_gate"]]),
                         w_up=np.stack([get(x) for x in ex["w_up"]]),
                         w_down=np.stack([get(x) for x in ex["w_down"]]),
                         shared=dense(n["shared"]) if n["shared"] else None)
        layers.append(Llada2Layer(
            attn_norm=get(n["attn_norm"]), wqkv=get(n["wqkv"]),
            q_norm=get(n["q_norm"]) if hp["qk_norm"] else None,
            k_norm=get(n["k_norm"]) if hp["qk_norm"] else None,
            wo=get(n["wo"]), ffn_norm=get(n["ffn_norm"]), mlp=mlp))
    return Llada2Model(
        hidden=hp["hidden"], n_layers=hp["n_layers"], n_heads=hp["n_heads"],
        n_kv_heads=hp["n_kv_heads"], head_dim=hp["head_dim"], rotary_dim=hp["rotary_dim"],
        ffn=hp["ffn"], expert_ffn=hp["expert_ffn"], n_experts=hp["n_experts"],
        experts_per_token=hp["experts_per_token"], n_shared=hp["n_shared"],
        n_group=hp["n_group"], topk_group=hp["topk_group"],
        routed_scaling=hp["routed_scaling"], first_dense=hp["first_dense"],
        vocab=hp["vocab"], rope_theta=hp["rope_theta"], eps=hp["eps"],
        mask_id=hp["mask_id"], eos_id=hp["eos_id"], embed=embed,
        final_norm=get(g["final_norm"]), lm_head=embed if hp["tied"] else get(g["lm_head"]),
        layers=layers, qk_norm=hp["qk_norm"], tied=hp["tied"], dtype=dtype)


# stored dtype -> little-endian numpy dtype of its bits (BF16: the high half of a float32)
_EXACT_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}


def read_float64(model_dir, names):
    """{name: float64 array} of the named tensors, straight from the stored bits (an F64
    tensor too, which safetensors_np would round to float32)."""
    wanted, out = set(names), {}
    for path, in_file in st.model_files(model_dir).items():
        header, _, data_start, _ = st.read_header(path)
        for name in wanted & set(in_file):
            if name not in header:
                raise st.SafetensorsError(f"{path}: no tensor named '{name}'")
            info = header[name]
            begin, end = info["data_offsets"]
            with open(path, "rb") as f:
                f.seek(data_start + begin)
                raw = np.frombuffer(f.read(end - begin), dtype=_EXACT_DTYPES[info["dtype"]])
            values = st.bf16_bits_to_float32(raw) if info["dtype"] == "BF16" else raw
            out[name] = values.astype(np.float64).reshape(info["shape"])
    return out


def load_model(model_dir, dtype=np.float64, strict=True):
    """Load a LLaDA 2.x HF folder (config.json + safetensors, single or sharded)."""
    config, tensors = st.load_model_dir(model_dir)
    hp = hparams_from_config(config)
    biases = [tensor_names(hp, i)["expert_bias"] for i in range(hp["n_layers"])
              if not is_dense_layer(hp, i)]
    tensors.update(read_float64(model_dir, [n for n in biases if n in tensors]))
    return build_model(config, tensors, dtype, strict)


# ----------------------------------------------------------------------------------------
# Attention
# ----------------------------------------------------------------------------------------

def qk_norm(x, weight, eps):
    """Per-head RMSNorm of x [..., heads, head_dim] with one shared [head_dim] weight."""
    return ref.rms_norm(x, weight, eps)


def apply_partial_rope(x, cos, sin, rotary_dim):
    """Rotate-half RoPE of the first rotary_dim channels of x [heads, L, hd] (cos / sin
    [L, rotary_dim / 2]); channels [rotary_dim, hd) pass through unchanged."""
    rotated = ref.apply_rope(x[..., :rotary_dim], cos, sin)
    return np.concatenate([rotated, x[..., rotary_dim:]], axis=-1)


def key_ends(length, block_length):
    """[L] int64: the query at q reads keys [0, end[q]). Block-causal on the absolute grid:
    end = min(L, (q // B + 1) * B); block_length None: L (full attention)."""
    q = np.arange(length, dtype=np.int64)
    if block_length is None:
        return np.full(length, length, dtype=np.int64)
    if int(block_length) < 1:
        raise ValueError(f"block_length must be >= 1, got {block_length}")
    return np.minimum((q // int(block_length) + 1) * int(block_length), length)


def attend(q, k, v, ends):
    """GQA attention core: q [nq, L, d], k/v [nkv, L, d], ends [L] -> [nq, L, d]. Query head
    h reads kv head h // (nq / nkv); the query at q reads keys [0, ends[q])."""
    nq, nkv, L, d = q.shape[0], k.shape[0], q.shape[1], q.shape[-1]
    kv_of_head = np.arange(nq) // (nq // nkv)
    k, v = k[kv_of_head], v[kv_of_head]
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)                 # [nq, L, L]
    visible = np.arange(L)[None, :] < ends[:, None]                  # [L queries, L keys]
    scores = np.where(visible[None], scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    return p @ v


def split_qkv(model, qkv):
    """The fused projection [L, (nh + 2 nkv) hd] -> q [L, nh, hd], k, v [L, nkv, hd]: all Q
    heads' rows first, then the K heads', then the V heads' (not interleaved)."""
    L, nq, nkv, hd = qkv.shape[0], model.n_heads, model.n_kv_heads, model.head_dim
    heads = qkv.reshape(L, nq + 2 * nkv, hd)
    return heads[:, :nq], heads[:, nq:nq + nkv], heads[:, nq + nkv:]


def attention(model, layer, x, cos, sin, ends):
    """Self-attention of the normed input x [L, hidden] -> [L, hidden]: fused QKV, per-head
    QK-norm, partial RoPE, block-causal GQA, the dense output projection."""
    L = x.shape[0]
    q, k, v = split_qkv(model, ref.linear(x, layer.wqkv))
    if model.qk_norm:      # normalise first, rotate after
        q = qk_norm(q, layer.q_norm, model.eps)
        k = qk_norm(k, layer.k_norm, model.eps)
    q = apply_partial_rope(q.transpose(1, 0, 2), cos, sin, model.rotary_dim)   # [nq, L, hd]
    k = apply_partial_rope(k.transpose(1, 0, 2), cos, sin, model.rotary_dim)
    out = attend(q, k, v.transpose(1, 0, 2), ends)
    return ref.linear(out.transpose(1, 0, 2).reshape(L, model.n_heads * model.head_dim),
                      layer.wo)


# ----------------------------------------------------------------------------------------
# MLPs and the router
# ----------------------------------------------------------------------------------------

def swiglu(mlp, x):
    """down(silu(gate x) * up x) of a DenseMlp, x [n, hidden] -> [n, hidden]."""
    return ref.linear(ref.silu(ref.linear(x, mlp.w_gate)) * ref.linear(x, mlp.w_up),
                      mlp.w_down)


def expert_mlp(mlp, e, x):
    """Routed expert e's SwiGLU of a MoeMlp, x [n, hidden] -> [n, hidden]."""
    return ref.linear(ref.silu(ref.linear(x, mlp.w_gate[e])) * ref.linear(x, mlp.w_up[e]),
                      mlp.w_down[e])


def router_scores(m, router):
    """s = sigmoid(m Wg^T): [L, hidden] -> [L, E] (the unbiased scores)."""
    return 1.0 / (1.0 + np.exp(-ref.linear(m, router)))


def group_scores(selection, n_group):
    """[L, n_group]: per group of E / n_group consecutive experts, the sum of its 2 largest
    selection scores (a group of one expert: that expert's score)."""
    L, E = selection.shape
    grouped = selection.reshape(L, n_group, E // n_group)
    if grouped.shape[-1] == 1:
        return grouped[..., 0]
    return -np.sort(-grouped, axis=-1)[..., :2].sum(axis=-1)


def kept_group_mask(selection, n_group, topk_group):
    """[L, E] bool: the experts of each row's topk_group best groups (ties: lower group)."""
    L, E = selection.shape
    order = np.argsort(-group_scores(selection, n_group), axis=-1, kind="stable")
    keep = np.zeros((L, n_group), dtype=bool)
    np.put_along_axis(keep, order[:, :topk_group], True, axis=-1)
    return np.repeat(keep, E // n_group, axis=-1)


def select_experts(selection, n_group, topk_group, k):
    """[L, k] expert ids, largest selection score first: group-limited top-k (ties: the
    lower expert index; experts outside the kept groups are never chosen)."""
    kept = kept_group_mask(selection, n_group, topk_group)
    masked = np.where(kept, selection, -np.inf)
    return np.argsort(-masked, axis=-1, kind="stable")[:, :k]


def expert_weights(scores, experts, scaling):
    """[L, k] weights of the chosen experts: their unbiased scores, renormalised to sum 1
    (+1e-20 in the denominator) when k > 1, times routed_scaling_factor."""
    w = np.take_along_axis(scores, experts, axis=-1)
    if experts.shape[-1] > 1:
        w = w / (w.sum(axis=-1, keepdims=True) + ROUTER_EPS)
    return w * scaling


def route(model, mlp, m):
    """(experts [L, k], weights [L, k], selection scores [L, E]) of the normed input m."""
    scores = router_scores(m, mlp.router)
    selection = scores + mlp.expert_bias
    experts = select_experts(selection, model.n_group, model.topk_group,
                             model.experts_per_token)
    return experts, expert_weights(scores, experts, model.routed_scaling), selection


def moe_block(model, mlp, m):
    """The MoE MLP of the normed input m [L, hidden]: (y [L, hidden], selection [L, E]);
    y = the weighted routed experts (summed in expert order) + the shared expert."""
    experts, weights, selection = route(model, mlp, m)
    y = np.zeros_like(m)
    for e in range(mlp.router.shape[0]):
        rows, slot = np.nonzero(experts == e)
        if rows.size:
            y[rows] += weights[rows, slot][:, None] * expert_mlp(mlp, e, m[rows])
    if mlp.shared is not None:
        y = y + swiglu(mlp.shared, m)
    return y, selection


def ffn(model, layer, m):
    """The layer's MLP of the normed input m: (y, selection scores [L, E] or None (dense))."""
    if isinstance(layer.mlp, DenseMlp):
        return swiglu(layer.mlp, m), None
    return moe_block(model, layer.mlp, m)


# ----------------------------------------------------------------------------------------
# The forward
# ----------------------------------------------------------------------------------------

def _checked_ids(model, ids):
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("ids must be a non-empty 1-D list of token ids")
    if ids.min() < 0 or ids.max() >= model.embed.shape[0]:
        raise ValueError(f"token id out of range [0, {model.embed.shape[0]})")
    return ids


def _checked_rows(rows, length):
    rows = np.asarray(list(rows), dtype=np.int64)
    if rows.ndim != 1 or (rows.size and (rows.min() < 0 or rows.max() >= length)):
        raise ValueError(f"rows must be a list of positions in [0, {length})")
    return rows


def final_hidden(model, ids, block_length=None):
    """(final-normed hidden states [L, hidden], per layer the selection scores [L, E] of a
    MoE layer or None for a dense one) of one sequence at positions 0..L-1."""
    ids = _checked_ids(model, ids)
    L = ids.size
    cos, sin = ref.rope_cos_sin(L, model.rotary_dim, model.rope_theta)
    ends = key_ends(L, block_length)
    h = model.embed[ids].astype(model.dtype)
    routing = []
    for layer in model.layers:
        h = h + attention(model, layer, ref.rms_norm(h, layer.attn_norm, model.eps), cos,
                          sin, ends)
        y, selection = ffn(model, layer, ref.rms_norm(h, layer.ffn_norm, model.eps))
        h = h + y
        routing.append(selection)
    return ref.rms_norm(h, model.final_norm, model.eps), routing


def forward_with_routing(model, ids, rows, block_length=None):
    """(logits [len(rows), vocab], per-layer selection scores) of one sequence."""
    h, routing = final_hidden(model, ids, block_length)
    return ref.linear(h[_checked_rows(rows, len(ids))], model.lm_head), routing


def forward(model, ids, rows, block_length=None):
    """Logits [len(rows), vocab] (model.dtype) of positions `rows` of sequence `ids`, with
    block-causal attention of `block_length` (None: full attention)."""
    return forward_with_routing(model, ids, rows, block_length)[0]


def routing_selection(model, ids, block_length=None):
    """Per layer, every row's selection scores s + expert_bias [L, E] (None: dense layer)."""
    return final_hidden(model, ids, block_length)[1]


def routing_margins(selection, n_group, topk_group, k):
    """Per row, how close the routing came to choosing another expert set, in selection-
    score units (absolute; the scores are sigmoids plus a bias, O(1)); inf if nothing can
    flip. The smaller of:
      expert margin: among the kept groups' experts, the k-th minus the (k+1)-th largest
                     selection score (inf when the kept groups hold exactly k experts);
      group margin:  the topk_group-th minus the (topk_group+1)-th group score, counted
                     only where swapping those two groups would change the chosen set
                     (inf when every group is kept).
    """
    selection = np.asarray(selection, dtype=np.float64)
    L, E = selection.shape
    kept = kept_group_mask(selection, n_group, topk_group)
    ordered = -np.sort(-np.where(kept, selection, -np.inf), axis=-1)
    expert = np.full(L, np.inf)
    if topk_group * (E // n_group) > k:
        expert = ordered[:, k - 1] - ordered[:, k]
    group = np.full(L, np.inf)
    if topk_group < n_group:
        gs = group_scores(selection, n_group)
        order = np.argsort(-gs, axis=-1, kind="stable")
        gap = np.take_along_axis(gs, order[:, topk_group - 1:topk_group + 1], axis=-1)
        chosen = select_experts(selection, n_group, topk_group, k)
        for r in range(L):
            swapped = _swapped_choice(selection[r], order[r], n_group, topk_group, k)
            if set(swapped) != set(chosen[r]):
                group[r] = gap[r, 0] - gap[r, 1]
    return np.minimum(expert, group)


def _swapped_choice(selection_row, group_order, n_group, topk_group, k):
    """One row's top-k experts when its topk_group-th best group is replaced by the next."""
    size = selection_row.size // n_group
    groups = list(group_order[:topk_group - 1]) + [group_order[topk_group]]
    members = np.concatenate([np.arange(g * size, (g + 1) * size) for g in groups])
    best = members[np.argsort(-selection_row[members], kind="stable")[:k]]
    return [int(e) for e in best]


def min_routing_margin(model, ids, block_length=None, routing=None):
    """The smallest routing margin over every MoE layer and every row of one sequence (inf
    when nothing can flip). One row's routing feeds every other row's attention in the
    later layers, so a near tie anywhere makes the whole sequence sensitive to rounding."""
    routing = routing_selection(model, ids, block_length) if routing is None else routing
    margins = [np.min(routing_margins(s, model.n_group, model.topk_group,
                                      model.experts_per_token))
               for s in routing if s is not None]
    return float(min(margins)) if margins else math.inf


# ----------------------------------------------------------------------------------------
# LLaDA2.0 block decoding (moe-models.md §2.4; the dllm LLaDA2Sampler at temperature 0)
# ----------------------------------------------------------------------------------------
#
# The rules, restated:
#   steps_per_block = min(steps, gen_length // minimal_topk)  (minimal_topk <= 0: steps)
#   num_blocks = ceil((P + gen_length) / B); the canvas has num_blocks * B positions, the
#   prompt then mask ids; positions 0..N-1; block b is [b B, (b + 1) B).
#   schedule = B split evenly over steps_per_block steps, the remainder one each to the
#   first steps (steps_per_block > B: trailing zeros).
#   for b from P // B (the block holding the prompt tail) to num_blocks - 1, for step in
#   0..steps_per_block-1:
#     stop the block if it has no mask left;
#     forward the canvas [0, (b + 1) B) block-causally, take the block's rows;
#     per row: token = argmax of the softmax (the lowest id on an exact tie, as
#     torch.argmax), confidence = its probability; only masked positions count;
#     k = schedule[step]; if at least k masked positions have confidence > threshold,
#     commit ALL of them; otherwise (k > 0) commit the min(k, #masked) most confident
#     (on an exact tie the lower position first -- torch.topk's order is unspecified;
#     this is the choice made here);
#     eos_early_stop: after the commit, stop this block (go on with the next one) if the
#     block [b B, (b + 1) B) holds an eos id anywhere (prompt positions included).
#   The mask id is never a choice (Mosaic's convention for every sampler, sampling.md: the
#   argmax is over the other ids; the probabilities are still those of the full softmax).
#   After each block (the HF generate(), moe-models.md §2.4 step 4): if the generated part
#   [P, (b + 1) B) holds an EOS, decoding stops; the positions never decoded read as EOS
#   (the HF output is trimmed at its first EOS, so nothing after it is an answer).
#   (The dllm sampler has neither the stop nor the ban; stop_at_block_eos=False and
#   ban_mask=False give its loop.)

NEAR_TIE = 1e-5     # relative decision gaps below this may flip in fp32


def relative_gap(a, b):
    """|a - b| / max(a, b): how far apart two probabilities (or a probability and a
    threshold) are, relative -- fp32 errors of a softmax are relative too."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.abs(a - b) / np.maximum(np.maximum(a, b), 1e-300)


@dataclass
class Trace:
    """What a decoding saw: forwards, the smallest relative gap (relative_gap) of each kind
    of decision a tiny error could flip, the smallest routing margin of every forward, and
    how often a mask id was committed (it stays a mask: the position is redone).

    token:     top-1 vs top-2 probability at a committed position, or at an editable one
               whose probability clears editing_threshold (LLaDA2.1)
    threshold: confidence vs threshold at a masked position (the high-confidence set)
    cut:       k-th vs (k+1)-th confidence of the fallback's top-k
    edit:      probability vs editing_threshold at an editable position whose token
               changed (LLaDA2.1)"""
    forwards: int = 0
    routing: float = math.inf
    gaps: dict = field(default_factory=dict)
    mask_commits: int = 0

    def note(self, kind, values):
        values = np.asarray(values, dtype=np.float64).ravel()
        if values.size:
            self.gaps[kind] = min(self.gaps.get(kind, math.inf), float(values.min()))

    def closest(self):
        """(kind, gap) of the smallest decision gap, or (None, inf)."""
        if not self.gaps:
            return None, math.inf
        kind = min(self.gaps, key=self.gaps.get)
        return kind, self.gaps[kind]

    def near_tie(self, decision_tie=NEAR_TIE, routing_tie=0.0):
        """True when a decision gap is below decision_tie or the routing margin below
        routing_tie."""
        return self.closest()[1] < decision_tie or self.routing < routing_tie


def transfer_schedule(block_length, steps):
    """Tokens to commit per step: block_length split evenly over `steps`, the remainder
    one each to the first steps (e.g. 8 over 3: [3, 3, 2]; 4 over 6: [1, 1, 1, 1, 0, 0])."""
    if steps <= 0:
        return []
    base, extra = divmod(int(block_length), int(steps))
    return [base + (1 if i < extra else 0) for i in range(steps)]


def steps_per_block(steps, gen_length, minimal_topk):
    """min(steps, gen_length // minimal_topk); minimal_topk <= 0 leaves steps."""
    return min(steps, gen_length // minimal_topk) if minimal_topk > 0 else steps


def canvas_blocks(prompt_length, gen_length, block_length):
    """(number of blocks, first block decoded): ceil((P + G) / B) and P // B."""
    return -(-(prompt_length + gen_length) // block_length), prompt_length // block_length


def new_canvas(prompt_ids, gen_length, block_length, mask_id):
    """int64 [num_blocks * B]: the prompt, then mask ids."""
    prompt = np.asarray(prompt_ids, dtype=np.int64)
    n_blocks, _ = canvas_blocks(prompt.size, gen_length, block_length)
    canvas = np.full(n_blocks * block_length, mask_id, dtype=np.int64)
    canvas[:prompt.size] = prompt
    return canvas


def greedy_tokens(logits, banned=None):
    """(tokens [n], probability of the token [n], second-largest probability [n]) of the
    float64 softmax of each row: temperature 0 (argmax; the lowest id on an exact tie;
    `banned`, an id, is never the argmax but keeps its share of the softmax)."""
    logits = np.asarray(logits, dtype=np.float64)
    z = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    choice = probs.copy()
    if banned is not None:
        choice[:, banned] = -1.0
    tokens = np.argmax(choice, axis=-1)
    top2 = -np.sort(-choice, axis=-1)[:, :2]
    second = top2[:, 1] if probs.shape[-1] > 1 else np.zeros(len(tokens))
    return tokens, probs[np.arange(len(tokens)), tokens], second


def commit_mask(conf, masked, k, threshold, trace=None):
    """bool [B]: the positions one step commits (masked [B] bool, conf [B] the tokens'
    probabilities). If at least k masked positions have conf > threshold, all of them;
    otherwise, when k > 0, the min(k, #masked) most confident masked positions (exact
    ties: the lower position first)."""
    conf = np.asarray(conf, dtype=np.float64)
    masked = np.asarray(masked, dtype=bool)
    high = masked & (conf > threshold)
    if trace is not None:
        trace.note("threshold", relative_gap(conf[masked], threshold))
    if high.sum() >= k:
        return high
    commit = np.zeros_like(masked)
    candidates = np.flatnonzero(masked)
    if k <= 0 or candidates.size == 0:
        return commit
    order = candidates[np.argsort(-conf[candidates], kind="stable")]
    n = min(int(k), order.size)
    commit[order[:n]] = True
    if trace is not None and order.size > n:
        trace.note("cut", relative_gap(conf[order[n - 1]], conf[order[n]]))
    return commit


def _note_commits(trace, commit, tokens, p1, p2, mask_id):
    if trace is not None:
        trace.note("token", relative_gap(p1, p2)[commit])
        trace.mask_commits += int(np.sum(tokens[commit] == mask_id))


def decode_blocks(predict, prompt_ids, gen_length, block_length=32, steps=32,
                  threshold=0.95, minimal_topk=1, mask_id=None, eos_id=None,
                  eos_early_stop=False, trace=None, stop_at_block_eos=True, ban_mask=True):
    """LLaDA2.0 block decoding at temperature 0 (the rules above) with any predictor:
    predict(x, lo, hi) -> logits [hi - lo, vocab] of rows [lo, hi) of the canvas prefix x
    (len(x) == hi). Returns (canvas int64 [num_blocks * B], number of forwards)."""
    if mask_id is None:
        raise ValueError("decode_blocks needs a mask id")
    B = int(block_length)
    canvas = new_canvas(prompt_ids, gen_length, B, mask_id)
    n_blocks, first = canvas_blocks(len(prompt_ids), gen_length, B)
    schedule = transfer_schedule(B, steps_per_block(steps, gen_length, minimal_topk))
    forwards = 0
    for blk in range(first, n_blocks):
        lo, hi = blk * B, (blk + 1) * B
        for k in schedule:
            masked = canvas[lo:hi] == mask_id
            if not masked.any():
                break
            tokens, p1, p2 = greedy_tokens(predict(canvas[:hi].copy(), lo, hi),
                                           mask_id if ban_mask else None)
            forwards += 1
            commit = commit_mask(p1, masked, k, threshold, trace)
            _note_commits(trace, commit, tokens, p1, p2, mask_id)
            canvas[lo:hi][commit] = tokens[commit]
            if eos_early_stop and eos_id is not None and np.any(canvas[lo:hi] == eos_id):
                break
        if stop_at_block_eos and eos_id is not None and np.any(canvas[len(prompt_ids):hi] == eos_id):
            canvas[hi:][canvas[hi:] == mask_id] = eos_id
            break
    if trace is not None:
        trace.forwards += forwards
    return canvas, forwards


def model_predictor(model, block_length, trace=None):
    """predict(x, lo, hi) for decode_blocks: this module's block-causal forward over the
    whole prefix x (the cheap way: recomputed every step), keeping the smallest routing
    margin of every forward in trace.routing."""
    def predict(x, lo, hi):
        logits, routing = forward_with_routing(model, x, range(lo, hi), block_length)
        if trace is not None:
            trace.routing = min(trace.routing,
                                min_routing_margin(model, x, block_length, routing))
        return logits
    return predict


def generate(model, prompt_ids, gen_length, block_length=32, steps=32, threshold=0.95,
             minimal_topk=1, eos_id=None, mask_id=None, eos_early_stop=False, trace=None):
    """LLaDA2.0 decoding of one prompt at temperature 0 (dllm LLaDA2Sampler; `steps` is
    per block). mask_id / eos_id default to the model's. Returns (canvas int64
    [ceil((P + gen_length) / B) * B], number of forwards); trace (a Trace) is filled in."""
    mask_id = model.mask_id if mask_id is None else mask_id
    eos_id = model.eos_id if eos_id is None else eos_id
    return decode_blocks(model_predictor(model, block_length, trace), prompt_ids,
                         gen_length, block_length, steps, threshold, minimal_topk, mask_id,
                         eos_id, eos_early_stop, trace)


# ----------------------------------------------------------------------------------------
# LLaDA2.1 decoding with token editing (moe-models.md §2.5; the dllm LLaDA21Sampler, whose
# loop is the LLaDA2.1 HF generate()'s, at temperature 0)
# ----------------------------------------------------------------------------------------
#
# The rules, restated (the canvas, its blocks and the first block are LLaDA2.0's; the step
# schedule and minimal_topk are not used):
#   for each block b, post_steps = 0, loop:
#     old = the block's tokens; masked = old == mask id;
#     if nothing is masked: post_steps += 1; if post_steps > max_post_steps: stop the block;
#     forward [0, (b + 1) B) block-causally; tokens / probabilities as in 2.0;
#     M2T (only if something is masked): if at least num_to_transfer masked positions have
#       probability > threshold, commit all of them, else the min(num_to_transfer, #masked)
#       most probable masked positions (exact ties: lower position first);
#     T2T: every position of the block that is not masked (in `old`) and not a prompt
#       position gets the new token when its probability > editing_threshold and the token
#       differs from the old one;
#     both are applied together; stop the block if nothing was masked and nothing edited.
#   after each block, with eos_early_stop: stop decoding if the generated part
#   [P, (b + 1) B) holds no mask id and holds an eos id.
#   The canvas is returned whole (HF's generate() then trims it at the first EOS).
#   As for 2.0 (stop_at_block_eos, ban_mask; their defaults are Mosaic's conventions): the
#   mask id is never a choice, and decoding stops after a block at that EOS condition whether
#   eos_early_stop is set or not, the positions never decoded reading as EOS -- the trimmed
#   answer is the same, since no later block changes an earlier one.

def edit_mask(tokens, probs, second, old, editable, editing_threshold, trace=None):
    """bool [B]: the T2T edits -- editable positions whose new token differs from the old
    one with probability > editing_threshold (second: the runner-up probabilities, for the
    trace only)."""
    editable = np.asarray(editable, dtype=bool)
    changed = editable & (tokens != old)
    confident = editable & (probs > editing_threshold)
    if trace is not None:
        trace.note("edit", relative_gap(probs[changed], editing_threshold))
        trace.note("token", relative_gap(probs, second)[confident])   # argmax: "changed"
    return changed & confident


def decode_blocks_llada21(predict, prompt_ids, gen_length, block_length=32, threshold=0.95,
                          editing_threshold=0.9, max_post_steps=16, num_to_transfer=1,
                          mask_id=None, eos_id=None, eos_early_stop=False, trace=None,
                          stop_at_block_eos=True, ban_mask=True):
    """LLaDA2.1 decoding at temperature 0 (the rules above) with any predictor (as
    decode_blocks). Returns (canvas int64 [num_blocks * B], number of forwards)."""
    if mask_id is None:
        raise ValueError("decode_blocks_llada21 needs a mask id")
    B, P = int(block_length), len(prompt_ids)
    canvas = new_canvas(prompt_ids, gen_length, B, mask_id)
    n_blocks, first = canvas_blocks(P, gen_length, B)
    forwards = 0
    for blk in range(first, n_blocks):
        lo, hi = blk * B, (blk + 1) * B
        is_prompt = np.arange(lo, hi) < P
        post_steps = 0
        while True:
            old = canvas[lo:hi].copy()
            masked = old == mask_id
            if not masked.any():
                post_steps += 1
            if post_steps > max_post_steps:
                break
            tokens, p1, p2 = greedy_tokens(predict(canvas[:hi].copy(), lo, hi),
                                           mask_id if ban_mask else None)
            forwards += 1
            commit = np.zeros(B, dtype=bool)
            if masked.any():
                commit = commit_mask(p1, masked, num_to_transfer, threshold, trace)
            edits = edit_mask(tokens, p1, p2, old, ~masked & ~is_prompt, editing_threshold,
                              trace)
            _note_commits(trace, commit, tokens, p1, p2, mask_id)
            canvas[lo:hi][commit | edits] = tokens[commit | edits]
            if not masked.any() and not edits.any():
                break
        generated = canvas[P:hi]
        if (eos_early_stop or stop_at_block_eos) and eos_id is not None \
                and not np.any(generated == mask_id) and np.any(generated == eos_id):
            if stop_at_block_eos:
                canvas[hi:][canvas[hi:] == mask_id] = eos_id
            break
    if trace is not None:
        trace.forwards += forwards
    return canvas, forwards


def generate_llada21(model, prompt_ids, gen_length, block_length=32, threshold=0.95,
                     editing_threshold=0.9, max_post_steps=16, num_to_transfer=1,
                     eos_id=None, mask_id=None, eos_early_stop=False, trace=None,
                     stop_at_block_eos=True, ban_mask=True):
    """LLaDA2.1 decoding of one prompt at temperature 0 (dllm LLaDA21Sampler). Returns
    (canvas int64 [ceil((P + gen_length) / B) * B], number of forwards)."""
    mask_id = model.mask_id if mask_id is None else mask_id
    eos_id = model.eos_id if eos_id is None else eos_id
    return decode_blocks_llada21(model_predictor(model, block_length, trace), prompt_ids,
                                 gen_length, block_length, threshold, editing_threshold,
                                 max_post_steps, num_to_transfer, mask_id, eos_id,
                                 eos_early_stop, trace, stop_at_block_eos, ban_mask)
