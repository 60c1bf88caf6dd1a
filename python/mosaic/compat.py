"""MosaicEngine: the form write-ups of Mosaic show,

    engine = MosaicEngine(model, {"max_seq_len": 32768, "chunking_strategy": "lazy",
                                  "logits_kernel": "mask_only"})
    out = engine.generate(inputs=prompt, max_new_tokens=256)

mapped onto mosaic.Engine. Mosaic always chunks lazily and computes logits for masked rows
only, so those two options accept exactly those values; anything else is refused by name
rather than silently ignored.
"""

import numbers

from mosaic.engine import Engine
from mosaic.inputs import split_prompts

_OPTIONS = ("max_seq_len", "chunking_strategy", "logits_kernel", "budget", "device")


class MosaicEngine:
    """`model`: a model folder (or an open mosaic.Engine). `config`: max_seq_len (the longest
    prompt + max_new_tokens accepted; above the model's trained context it also allows running
    beyond it), chunking_strategy ("lazy"), logits_kernel ("mask_only"), budget and device (as
    mosaic.Engine takes them)."""

    def __init__(self, model, config=None):
        config = {} if config is None else config
        if not isinstance(config, dict):
            raise TypeError(f"config must be a dict, got {type(config).__name__}")
        for key in config:
            if key not in _OPTIONS:
                raise ValueError(f"unknown MosaicEngine option {key!r} (known: {', '.join(_OPTIONS)})")
        strategy = config.get("chunking_strategy", "lazy")
        if strategy != "lazy":
            raise ValueError(f"chunking_strategy {strategy!r} is not supported: Mosaic chunks lazily, only the "
                             "ops that hold a step's peak and only when the plan exceeds the budget ('lazy')")
        kernel = config.get("logits_kernel", "mask_only")
        if kernel != "mask_only":
            raise ValueError(f"logits_kernel {kernel!r} is not supported: Mosaic computes logits for the "
                             "masked rows a step can commit and no others ('mask_only')")
        self.max_seq_len = config.get("max_seq_len")
        if self.max_seq_len is not None:
            if isinstance(self.max_seq_len, bool) or not isinstance(self.max_seq_len, numbers.Integral):
                raise TypeError(f"max_seq_len must be an int, got {type(self.max_seq_len).__name__}")
            if self.max_seq_len < 1:
                raise ValueError(f"max_seq_len must be positive, got {self.max_seq_len}")
        if isinstance(model, Engine):
            if "budget" in config or "device" in config:
                raise ValueError("budget and device belong to the Engine given as model; set them when opening it")
            self.engine = model
        else:
            self.engine = Engine(model, device=config.get("device", "auto"), budget=config.get("budget"))

    def generate(self, inputs=None, max_new_tokens=128, **sampling):
        """Generates `max_new_tokens` after `inputs` (text, token ids, or a list of either);
        `steps` defaults to max_new_tokens (one token per step). Other keywords are
        mosaic.Engine.generate's. Returns a GenerationResult, or a list for a batch."""
        if inputs is None:
            raise TypeError("generate() needs inputs= (text, token ids, or a list of either)")
        if "gen_length" in sampling:
            raise TypeError("give max_new_tokens or gen_length, not both")
        sampling.setdefault("steps", max_new_tokens)
        allow_long_context = sampling.pop("allow_long_context", False)
        if self.max_seq_len is not None:
            items, batched = split_prompts(inputs)
            for i, item in enumerate(items):
                length = len(self.engine.encode(item, sampling.get("chat", False))) if isinstance(item, str) \
                    else len(item)
                if length + max_new_tokens > self.max_seq_len:
                    raise ValueError(f"input {i} ({length} tokens) + max_new_tokens {max_new_tokens} exceeds "
                                     f"max_seq_len {self.max_seq_len}")
            allow_long_context = allow_long_context or self.max_seq_len > self.engine.info["max_position"] > 0
        return self.engine.generate(inputs, gen_length=max_new_tokens, allow_long_context=allow_long_context,
                                    **sampling)

    def plan(self, seq_len=None, **options):
        """The memory plan of one step (mosaic.Engine.plan); seq_len defaults to max_seq_len."""
        return self.engine.plan(self.max_seq_len if seq_len is None else seq_len, **options)

    def __repr__(self):
        return f"MosaicEngine({self.engine!r}, max_seq_len={self.max_seq_len})"
