"""PEFT LoRA adapters for the NumPy reference: read a PEFT folder and attach each module's
lora_A / lora_B to the matching linear of a reference_forward.Model as a LoraWeight, so that
forward() computes the unmerged branch x W^T + scaling (x A^T) B^T exactly as PEFT's
LoraLayer does (written from PEFT's save format and the LoRA paper, not from Mosaic's code).

    model = reference_forward.load_model(base_dir)
    lora_np.apply_adapter(model, read_adapter(adapter_dir))

Scaling: lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora. Key spellings accepted:
[base_model.model.]<module>.lora_{A,B}[.default].weight, <module> with or without the
checkpoint's leading "model.".
"""

import json
import math
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as ref  # noqa: E402
import safetensors_np  # noqa: E402

CONFIG_NAME = "adapter_config.json"
WEIGHTS_NAME = "adapter_model.safetensors"

# reference_forward.Layer field -> the role name reference_forward.tensor_names uses.
LINEAR_FIELDS = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")

_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<which>[AB])(?:\.default)?\.weight$")


def read_adapter(adapter_dir):
    """(config dict, scaling, {module path: {"A": array, "B": array}}) of a PEFT folder."""
    with open(os.path.join(adapter_dir, CONFIG_NAME), encoding="utf-8") as f:
        config = json.load(f)
    if config.get("use_dora") or config.get("bias", "none") != "none":
        raise ValueError("the reference applies plain LoRA only (no DoRA, no biases)")
    r = config["r"]
    scaling = config["lora_alpha"] / (math.sqrt(r) if config.get("use_rslora") else r)
    modules = {}
    for name, values in safetensors_np.load_file(os.path.join(adapter_dir, WEIGHTS_NAME)).items():
        match = _KEY.match(name)
        if not match:
            raise ValueError(f"{WEIGHTS_NAME}: '{name}' is not a LoRA weight")
        modules.setdefault(match["module"], {})[match["which"]] = values
    return config, scaling, modules


def apply_adapter(model, adapter, dtype=None):
    """Replace every adapted linear of `model` (in place, the LM head included) by a LoraWeight;
    returns how many."""
    config, scaling, modules = adapter
    dtype = dtype or model.dtype
    hp = {"family": model.family}
    by_module = {}   # module path -> (layer index, field)
    for i in range(model.n_layers):
        names = ref.tensor_names(hp, i)
        for field in LINEAR_FIELDS:
            by_module[names[field][: -len(".weight")]] = (i, field)
    by_module[ref.tensor_names(hp)["lm_head"][: -len(".weight")]] = (None, "lm_head")
    count = 0
    for module, pair in modules.items():
        where = by_module.get(module) or by_module.get("model." + module)
        if where is None:
            raise ValueError(f"adapter module '{module}' is no projection of this {model.family} model")
        layer = model if where[0] is None else model.layers[where[0]]
        w = getattr(layer, where[1])
        a, b = np.asarray(pair["A"], dtype=dtype), np.asarray(pair["B"], dtype=dtype)
        if a.shape != (config["r"], w.shape[1]) or b.shape != (w.shape[0], config["r"]):
            raise ValueError(f"adapter module '{module}': A {a.shape}, B {b.shape} for W {w.shape}")
        setattr(layer, where[1], ref.LoraWeight(w=w, a=a, b=b, scaling=scaling))
        count += 1
    return count

