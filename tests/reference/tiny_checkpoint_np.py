"""Random tiny LLaDA / Dream / LLaDA-MoE checkpoints written with NumPy (test helper, no Mosaic).

    config, tensors = tiny_model("dream", hidden=32, heads=4, kv_heads=2, seed=1)
    config, tensors = tiny_moe_model(experts=8, experts_per_token=2, seed=1)
    safetensors_np.save_model_dir(dir, config, tensors, dtype="BF16", shards=3)

The config uses the real HF field names of each family (models.md §1, moe-models.md §1.2) and
the tensors the real HF names (models.md §2, moe-models.md §1.3), so the folder looks like a
shrunken LLaDA-8B / Dream-7B / LLaDA-MoE-7B-A1B.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llada_moe_np as moe  # noqa: E402
import reference_forward as ref  # noqa: E402


def tiny_config(family, layers=2, hidden=32, heads=4, kv_heads=None, ffn=48, vocab=64,
                rope_theta=10000.0, eps=1e-5, tied=False, qkv_bias=False):
    """config.json dict for a tiny model of `family` ("llada" or "dream")."""
    kv_heads = heads if kv_heads is None else kv_heads
    if family == ref.FAMILY_LLADA:
        return {"architectures": ["LLaDAModelLM"], "model_type": "llada",
                "d_model": hidden, "n_layers": layers, "n_heads": heads,
                "n_kv_heads": kv_heads, "mlp_hidden_size": ffn, "mlp_ratio": 4,
                "vocab_size": vocab, "embedding_size": vocab, "rope_theta": rope_theta,
                "rms_norm_eps": eps, "weight_tying": tied, "include_bias": False,
                "include_qkv_bias": qkv_bias, "activation_type": "silu",
                "block_type": "llama", "layer_norm_type": "rms", "rope": True,
                "alibi": False, "attention_layer_norm": False, "scale_logits": False,
                "input_emb_norm": False, "rope_full_precision": True,
                "max_sequence_length": 4096, "mask_token_id": vocab - 1}
    if family == ref.FAMILY_DREAM:
        return {"architectures": ["DreamModel"], "model_type": "Dream",
                "hidden_size": hidden, "num_hidden_layers": layers,
                "num_attention_heads": heads, "num_key_value_heads": kv_heads,
                "intermediate_size": ffn, "vocab_size": vocab, "rope_theta": rope_theta,
                "rms_norm_eps": eps, "tie_word_embeddings": tied, "hidden_act": "silu",
                "rope_scaling": None, "use_sliding_window": False,
                "max_position_embeddings": 4096, "mask_token_id": vocab - 1}
    raise ValueError(f"unknown family {family!r}")


def tiny_tensors(config, seed=0):
    """Random float32 tensors for `config`, scaled so activations stay O(1)."""
    rng = np.random.default_rng(seed)
    hp = ref.hparams_from_config(config)
    H, hd, F, V = hp["hidden"], hp["head_dim"], hp["ffn"], hp["vocab"]
    nq, nkv = hp["n_heads"], hp["n_kv_heads"]

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def vec(n, center=0.0, spread=0.1):
        return (center + spread * rng.standard_normal(n)).astype(np.float32)

    g = ref.tensor_names(hp)
    tensors = {g["embed"]: rng.standard_normal((V, H)).astype(np.float32)}
    for i in range(hp["n_layers"]):
        n = ref.tensor_names(hp, i)
        tensors[n["attn_norm"]] = vec(H, 1.0)
        tensors[n["wq"]] = mat(nq * hd, H)
        tensors[n["wk"]] = mat(nkv * hd, H)
        tensors[n["wv"]] = mat(nkv * hd, H)
        if hp["qkv_bias"]:
            tensors[n["bq"]] = vec(nq * hd, 0.0, 0.5)
            tensors[n["bk"]] = vec(nkv * hd, 0.0, 0.5)
            tensors[n["bv"]] = vec(nkv * hd, 0.0, 0.5)
        tensors[n["wo"]] = mat(H, nq * hd)
        tensors[n["ffn_norm"]] = vec(H, 1.0)
        tensors[n["w_gate"]] = mat(F, H)
        tensors[n["w_up"]] = mat(F, H)
        tensors[n["w_down"]] = mat(H, F)
    tensors[g["final_norm"]] = vec(H, 1.0)
    if not hp["tied"]:
        tensors[g["lm_head"]] = mat(V, H)
    return tensors


def tiny_model(family, seed=0, **kwargs):
    """(config, tensors) of a random tiny model; kwargs as tiny_config."""
    config = tiny_config(family, **kwargs)
    return config, tiny_tensors(config, seed)


# ----------------------------------------------------------------------------------------
# LLaDA-MoE (moe-models.md §1)
# ----------------------------------------------------------------------------------------

def tiny_moe_config(layers=2, hidden=32, heads=4, kv_heads=None, experts=4,
                    experts_per_token=2, expert_ffn=24, vocab=64, rope_theta=50000.0,
                    eps=1e-5, tied=False):
    """config.json dict of a tiny LLaDA-MoE: the real HF keys plus Mosaic's mask_token_id."""
    kv_heads = heads if kv_heads is None else kv_heads
    return {"architectures": [moe.ARCHITECTURE], "model_type": "llada",
            "hidden_size": hidden, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "vocab_size": vocab, "expert_intermediate_size": expert_ffn,
            "num_experts": experts, "num_experts_per_tok": experts_per_token,
            "moe_layer_freq": [1] * layers, "norm_topk_prob": False, "qk_layernorm": True,
            "rope_theta": rope_theta, "partial_rotary_factor": 1.0, "rope_scaling": None,
            "max_position_embeddings": 4096, "rms_norm_eps": eps, "attention_bias": False,
            "clip_qkv": None, "tie_word_embeddings": tied, "hidden_act": "silu",
            "shared_expert_intermediate_size": None,
            "moe_router_enable_expert_bias": False, "pad_token_id": vocab - 2,
            "eos_token_id": vocab - 2, "mask_token_id": vocab - 1,
            "torch_dtype": "bfloat16"}


def tiny_moe_tensors(config, seed=0):
    """Random float32 tensors for a LLaDA-MoE `config`, scaled so activations stay O(1).

    The router rows are unit-variance per output (logits ~ N(0, 1)), so the top-k choice is
    usually decided by a clear margin; the norms scatter around 1 so a wrong norm weight
    (q_norm for k_norm, say) changes the numbers."""
    rng = np.random.default_rng(seed)
    hp = moe.hparams_from_config(config)
    tensors = {}
    for name, shape in moe.expected_shapes(hp).items():
        if len(shape) == 1:
            tensors[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        elif name == moe.tensor_names(hp)["embed"]:
            tensors[name] = rng.standard_normal(shape).astype(np.float32)
        else:
            tensors[name] = (rng.standard_normal(shape) / np.sqrt(shape[1])).astype(np.float32)
    return tensors


def tiny_moe_model(seed=0, **kwargs):
    """(config, tensors) of a random tiny LLaDA-MoE; kwargs as tiny_moe_config."""
    config = tiny_moe_config(**kwargs)
    return config, tiny_moe_tensors(config, seed)
