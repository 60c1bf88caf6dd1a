#!/usr/bin/python3
"""Write a random PEFT LoRA adapter folder for a base checkpoint, as PEFT's save_pretrained
lays it out (adapter_config.json + adapter_model.safetensors).

    /usr/bin/python3 tests/reference/make_lora_adapter.py --base MODEL_DIR --out ADAPTER_DIR \
        --rank 4 --alpha 8 --targets q_proj,attn_out [--rslora] [--regex] \
        [--keys peft|default|short] [--dtype F32|BF16|F16] [--seed 0]

A and B are both random and nonzero (PEFT initialises B to zero; a trained adapter's is not),
scaled so that the LoRA branch moves the logits visibly. --keys picks PEFT's spelling:
  peft     base_model.model.<module>.lora_A.weight          (what save_pretrained writes)
  default  base_model.model.<module>.lora_A.default.weight  (the adapter name kept)
  short    base_model.model.<module without "model.">...     (an adapter of the inner model)
--regex writes target_modules as one regular expression instead of a list.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as ref  # noqa: E402
import safetensors_np as st  # noqa: E402


def adapter_tensors(model_dir, rank, targets, keys, seed):
    """{key: array} for every projection (the LM head included) whose leaf name is in `targets`."""
    hp = ref.hparams_from_config(st.load_config(model_dir))
    shapes = {name: tuple(info["shape"]) for path in st.model_files(model_dir)
              for name, info in st.read_header(path)[0].items()}
    rng = np.random.default_rng(seed)
    tensors = {}
    linears = [(field, name) for i in range(hp["n_layers"]) for field, name in ref.tensor_names(hp, i).items()
               if field in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")]
    if not hp["tied"]:   # PEFT's target rule also selects the LM head when its name matches
        linears.append(("lm_head", ref.tensor_names(hp)["lm_head"]))
    for _, name in linears:
        module = name[: -len(".weight")]
        if module.rsplit(".", 1)[-1] not in targets:
            continue
        out_features, in_features = shapes[name]
        if keys == "short":
            module = module[len("model."):]
        infix = ".default" if keys == "default" else ""
        prefix = "base_model.model." + module
        tensors[f"{prefix}.lora_A{infix}.weight"] = rng.normal(0, 1 / np.sqrt(in_features), (rank, in_features))
        tensors[f"{prefix}.lora_B{infix}.weight"] = rng.normal(0, 0.5 / np.sqrt(rank), (out_features, rank))
    return tensors


def write_adapter(model_dir, out_dir, rank, alpha, targets, *, rslora=False, regex=False, keys="peft",
                  dtype="F32", seed=0):
    os.makedirs(out_dir, exist_ok=True)
    config = {"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "lora_dropout": 0.0, "bias": "none",
              "lora_bias": False, "fan_in_fan_out": False, "use_dora": False, "use_rslora": rslora,
              "target_modules": ("(.*\\.)?(" + "|".join(targets) + ")") if regex else sorted(targets),
              "init_lora_weights": True, "task_type": None, "alpha_pattern": {}, "rank_pattern": {},
              "layers_to_transform": None, "layers_pattern": None, "modules_to_save": None,
              "base_model_name_or_path": os.path.abspath(model_dir)}
    with open(os.path.join(out_dir, "adapter_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    st.save_file(os.path.join(out_dir, "adapter_model.safetensors"),
                 adapter_tensors(model_dir, rank, targets, keys, seed), dtype=dtype)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=8)
    parser.add_argument("--targets", required=True, help="comma-separated projection names, e.g. q_proj,attn_out")
    parser.add_argument("--rslora", action="store_true")
    parser.add_argument("--regex", action="store_true")
    parser.add_argument("--keys", choices=("peft", "default", "short"), default="peft")
    parser.add_argument("--dtype", choices=("F32", "BF16", "F16"), default="F32")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    write_adapter(args.base, args.out, args.rank, args.alpha, args.targets.split(","), rslora=args.rslora,
                  regex=args.regex, keys=args.keys, dtype=args.dtype, seed=args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
