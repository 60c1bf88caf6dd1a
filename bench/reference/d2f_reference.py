#!/usr/bin/env python3
"""D2F's own decoder, run unmodified: `_generate_block_single` of D2F-eval/eval_llada.py
(zhijie-group/Discrete-Diffusion-Forcing, fetched by bench/fetch_d2f.sh into an ignored folder)
on its own LLaDA model code and PEFT, with the same weights and adapter as Mosaic's run.

    python3 bench/reference/d2f_reference.py --d2f .d2f/D2F-eval --model MODEL --adapter ADAPTER \
        --prompt-len 256 --gen-length 512 --block 32 --json out.json

Nothing of D2F's files is changed. What this driver supplies, and why:
- eval_llada.py imports lm_eval, accelerate and datasets at its top for its harness; where a
  package is not installed, a stand-in module with the names it imports is put in sys.modules
  (none of them is used by _generate_block_single).
- The DreamLoRA object is made without its __init__ (which builds an lm-eval harness, an
  Accelerator and the tokenizer of a Hugging Face id): the attributes _generate_block_single
  reads are set here, with the values its __init__ would set from the same arguments. The
  model is loaded the way its _create_model_and_tokenizer does (LLaDAModelLM.from_pretrained,
  then PeftModel.from_pretrained, bf16, unmerged).
- D2F's model code predates transformers 5's loader: where from_pretrained fails, the model is
  built from its config and the same safetensors files are loaded into it (load_state_dict).
- The tokenizer: the random checkpoint has none; the loop decodes the generated ids at every
  step (its result unused), so a tokenizer is given whose decode returns at once. The
  reference's real host time is therefore somewhat larger than measured here.
Timing: the whole call, CUDA-synchronised, after a short warm-up generation; with --profile, then
the same call under torch.profiler, whose CUDA kernel time over the wall time gives the device
share (it took over nine minutes for 512 tokens on the H200: opt-in).
"""

import argparse
import json
import os
import sys
import time
import types


def stand_in_modules():
    """Modules eval_llada.py imports for its lm-eval harness, where they are not installed."""
    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        class TemplateLM:
            def __init__(self, *a, **k):
                pass
        module("lm_eval", utils=types.SimpleNamespace())
        module("lm_eval.utils")
        module("lm_eval.api")
        module("lm_eval.api.instance", Instance=object)
        module("lm_eval.api.model", TemplateLM=TemplateLM)
        module("lm_eval.api.registry", register_model=lambda *a, **k: (lambda cls: cls))
        module("lm_eval.models")
        module("lm_eval.models.utils", get_dtype=lambda d: d)
        module("lm_eval.__main__", cli_evaluate=lambda *a, **k: None)
        sys.modules["lm_eval"].utils = sys.modules["lm_eval.utils"]
    try:
        import accelerate  # noqa: F401
    except ImportError:
        module("accelerate", Accelerator=object, InitProcessGroupKwargs=object)
    try:
        import datasets  # noqa: F401
    except ImportError:
        module("datasets", Dataset=object)
    for name in ("jinja2", "tqdm"):
        try:
            __import__(name)
        except ImportError:
            module(name, tqdm=lambda *a, **k: None)


class InstantTokenizer:
    def decode(self, ids, skip_special_tokens=True):
        return ""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--d2f", required=True, help="D2F-eval folder of the fetched repository")
    p.add_argument("--model", required=True)
    p.add_argument("--adapter", required=True)
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--gen-length", type=int, default=512)
    p.add_argument("--block", type=int, default=32)
    p.add_argument("--block-add-threshold", type=float, default=0.5)
    p.add_argument("--decoded-token-threshold", type=float, default=0.9)
    p.add_argument("--skip-threshold", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--warmup-gen", type=int, default=64, help="tokens of the warm-up generation")
    p.add_argument("--json", required=True)
    p.add_argument("--profile", action="store_true",
                   help="also run once under torch.profiler for the device share (slow: minutes for 512 tokens)")
    a = p.parse_args()

    stand_in_modules()
    sys.path.insert(0, os.path.abspath(a.d2f))
    import torch
    import eval_llada
    from peft import PeftModel

    config = eval_llada.LLaDAConfig.from_pretrained(a.model)
    try:
        model = eval_llada.LLaDAModelLM.from_pretrained(a.model, config=config, torch_dtype=torch.bfloat16)
    except AttributeError as error:
        # D2F's model code predates transformers 5's loader (it lacks all_tied_weights_keys):
        # build the module from its config and load the same safetensors files into it.
        print(f"from_pretrained failed ({error}); loading the state dict directly", flush=True)
        from safetensors.torch import load_file
        torch.set_default_dtype(torch.bfloat16)
        with torch.device("cuda"):
            model = eval_llada.LLaDAModelLM(config)
        state = {}
        for name in sorted(os.listdir(a.model)):
            if name.endswith(".safetensors"):
                state.update(load_file(os.path.join(a.model, name), device="cuda"))
        missing, unexpected = model.load_state_dict(state, strict=False)
        print(f"state dict: {len(state)} tensors, missing {missing}, unexpected {unexpected}", flush=True)
        del state
    model = PeftModel.from_pretrained(model, a.adapter).to(torch.bfloat16).to("cuda").eval()

    lm = eval_llada.DreamLoRA.__new__(eval_llada.DreamLoRA)
    lm.model = model
    lm.tokenizer = InstantTokenizer()
    lm._device = torch.device("cuda")
    lm.target_dtype = torch.bfloat16
    lm.mask_token_id = config.mask_token_id if getattr(config, "mask_token_id", None) else 126336
    lm.block_size = a.block
    lm.block_add_threshold = a.block_add_threshold
    lm.decoded_token_threshold = a.decoded_token_threshold
    lm.skip_threshold = a.skip_threshold
    lm.max_new_tokens = a.gen_length
    lm.max_length = 4096
    lm.temperature = 0.0
    lm.top_p = None
    lm.top_k = None
    lm.sampling_strategy = "default"

    g = torch.Generator().manual_seed(a.prompt_len)
    prompt = torch.randint(0, 126000, (1, a.prompt_len), generator=g)
    prompt[prompt == lm.mask_token_id] = 1

    steps = {"n": 0}
    forward = model.forward

    def counted(*args, **kwargs):
        steps["n"] += 1
        return forward(*args, **kwargs)
    model.forward = counted

    runs = []
    print(f"loaded; warming up with {a.warmup_gen} tokens", flush=True)
    lm.max_new_tokens = a.warmup_gen
    lm._generate_block_single(prompt)
    lm.max_new_tokens = a.gen_length
    for r in range(1, a.repeats + 1):
        steps["n"] = 0
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = lm._generate_block_single(prompt)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        if r > 0:
            runs.append({"seconds": seconds, "forwards": steps["n"], "generated": len(out)})
        print(f"d2f reference run {r}: {seconds:.3f} s, {steps['n']} forwards, {len(out)} tokens", flush=True)

    profiled = {}
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            start = time.perf_counter()
            lm._generate_block_single(prompt)
            torch.cuda.synchronize()
            profiled_seconds = time.perf_counter() - start
        kernel_us = sum(e.self_device_time_total for e in prof.key_averages() if e.device_type.name == "CUDA")
        profiled = {"profiled_seconds": profiled_seconds, "kernel_seconds": kernel_us / 1e6,
                    "host_share": 1 - kernel_us / 1e6 / profiled_seconds}
    report = {"system": "D2F eval_llada._generate_block_single (unmodified)", "prompt_length": a.prompt_len,
              "gen_length": a.gen_length, "block": a.block, "thresholds": [a.block_add_threshold,
              a.decoded_token_threshold, a.skip_threshold], "runs": runs,
              "median_seconds": sorted(r["seconds"] for r in runs)[len(runs) // 2], **profiled}
    print(json.dumps(report, indent=2))
    with open(a.json, "w") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
