"""A Hugging Face LLaDA folder: write one from a trained model, read one back into PyTorch.

Folder = config.json (the field set and order of GSAI-ML/LLaDA-8B-Instruct, as
src/model/config_json.cc writes it), model.safetensors (bf16, LLaDA-8B tensor names),
tokenizer.json, tokenizer_config.json, README.md (model card). Safetensors are read and
written with tests/reference/safetensors_np.py (NumPy; bf16 rounding to nearest even,
as torch's .to(torch.bfloat16)).
"""

import json
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import safetensors_np  # noqa: E402

from model import LLaDAModelLM, ModelArgs  # noqa: E402


def llada_config(a: ModelArgs):
    """config.json of LLaDA-8B with this model's sizes (all other switches as LLaDA-8B)."""
    return {
        "activation_type": "silu",
        "alibi": False,
        "alibi_bias_max": 8.0,
        "architectures": ["LLaDAModelLM"],
        "attention_dropout": 0.0,
        "attention_layer_norm": False,
        "attention_layer_norm_with_affine": True,
        "auto_map": {"AutoConfig": "configuration_llada.LLaDAConfig",
                     "AutoModel": "modeling_llada.LLaDAModelLM",
                     "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM"},
        "bias_for_layer_norm": False,
        "block_group_size": 1,
        "block_type": "llama",
        "d_model": a.d_model,
        "embedding_dropout": 0.0,
        "embedding_size": a.vocab_size,
        "eos_token_id": a.eos_token_id,
        "flash_attention": False,
        "include_bias": False,
        "include_qkv_bias": False,
        "init_cutoff_factor": None,
        "init_device": "meta",
        "init_fn": "mitchell",
        "init_std": 0.02,
        "input_emb_norm": False,
        "layer_norm_type": "rms",
        "layer_norm_with_affine": True,
        "mask_token_id": a.mask_token_id,
        "max_sequence_length": a.max_sequence_length,
        "mlp_hidden_size": a.mlp_hidden_size,
        "mlp_ratio": 4,
        "model_type": "llada",
        "multi_query_attention": None,
        "n_heads": a.n_heads,
        "n_kv_heads": a.n_heads,
        "n_layers": a.n_layers,
        "pad_token_id": a.eos_token_id,
        "precision": "amp_bf16",
        "residual_dropout": 0.0,
        "rms_norm_eps": a.rms_norm_eps,
        "rope": True,
        "rope_full_precision": True,
        "rope_theta": a.rope_theta,
        "scale_logits": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.46.3",
        "use_cache": False,
        "vocab_size": a.vocab_size,
        "weight_tying": False,
    }


def args_from_config(config):
    """ModelArgs from a config.json written by llada_config (refuses what model.py lacks)."""
    unsupported = {"weight_tying": False, "include_qkv_bias": False, "include_bias": False,
                   "block_type": "llama", "layer_norm_type": "rms", "rope": True}
    for field, value in unsupported.items():
        if config.get(field, value) != value:
            raise ValueError(f"config.json: {field} = {config[field]!r} is not supported here")
    if config.get("n_kv_heads", config["n_heads"]) != config["n_heads"]:
        raise ValueError("config.json: n_kv_heads != n_heads is not supported here")
    return ModelArgs(
        vocab_size=config.get("embedding_size", config["vocab_size"]),
        d_model=config["d_model"], n_layers=config["n_layers"], n_heads=config["n_heads"],
        mlp_hidden_size=config["mlp_hidden_size"],
        max_sequence_length=config.get("max_sequence_length", 0),
        rope_theta=float(config.get("rope_theta", 10000.0)),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-5)),
        mask_token_id=config["mask_token_id"], eos_token_id=config["eos_token_id"])


def save_folder(model, folder, tokenizer_dir, card_text=None):
    """Writes the folder; returns {file: bytes}."""
    os.makedirs(folder, exist_ok=True)
    tensors = {name: p.detach().float().cpu().numpy()
               for name, p in model.state_dict().items()}
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(llada_config(model.args), f, indent=2)
        f.write("\n")
    safetensors_np.save_file(os.path.join(folder, "model.safetensors"), tensors, "BF16")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(folder, name))
    if card_text is not None:
        with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as f:
            f.write(card_text)
    return {n: os.path.getsize(os.path.join(folder, n)) for n in sorted(os.listdir(folder))}


def load_folder(folder, device="cpu"):
    """The folder's model in float32 (bf16 weights widened exactly), in eval mode."""
    config, tensors = safetensors_np.load_model_dir(folder)
    model = LLaDAModelLM(args_from_config(config))
    state = {name: torch.from_numpy(np.ascontiguousarray(v)) for name, v in tensors.items()}
    model.load_state_dict(state, strict=True)
    return model.to(device).eval()
