"""mosaic.Engine: a model folder opened once; generate, stream, forward and plan on it."""

import difflib
import os
import re

import numpy as np

from mosaic import _mosaic
from mosaic.byte_size import parse_byte_size
from mosaic.inputs import forward_batch, split_prompts, token_ids
from mosaic.model_files import check_adapter_folder, check_model_folder
from mosaic.planning import find_lmax, plan
from mosaic.results import GenerationResult, StepEvent
from mosaic.streaming import stream_steps

_DEVICE = re.compile(r"auto|cpu|cuda(?::(\d+))?")
_MAX_DEVICE_INDEX = 2**31 - 1  # CUDA's device ordinals are ints


class Engine:
    """A Hugging Face model folder (LLaDA or Dream: config.json, *.safetensors, tokenizer.json)
    loaded by Mosaic's C++ engine.

    device: "auto" (the GPU when there is one and Mosaic was built with CUDA), "cpu", "cuda"
    or "cuda:N". budget: all memory the engine may use (weights + workspace + activations), as
    bytes or a string such as "24GiB"; steps above it are chunked lazily. adapter: a PEFT LoRA
    folder (adapter_config.json + adapter_model.safetensors) for this base, merged into the
    weights at load (docs/design/lora-adapters.md). streamed_layers: keep the last N decoder
    layers' weights in pinned host memory, copied into each step one layer ahead (CUDA only;
    docs/design/weight-staging.md); "auto" (the default) streams none where the weights fit the
    budget beside a step and the fewest that make room where they do not (info["streamed_layers"]
    says how many); `mosaic plan --weights auto` names the N a step of a given length needs.
    tensor_parallel: split the model over N ranks (heads, FFN columns, vocabulary;
    docs/design/tensor-parallel.md); on the CPU the ranks are threads and budget is each rank's.
    context_parallel: split each step's rows over N ranks holding the whole model
    (docs/design/context-parallel.md; no KV cache yet).

    Missing files raise FileNotFoundError; damaged ones and invalid options mosaic.Error (a
    ValueError) with the engine's one-line message.
    """

    def __init__(self, model_dir, device="auto", budget=None, adapter=None, streamed_layers="auto",
                 tensor_parallel=1, context_parallel=1):
        if not isinstance(model_dir, (str, bytes, os.PathLike)):
            raise TypeError(f"model_dir must be a path, got {type(model_dir).__name__}")
        self.model_dir = os.fspath(model_dir)
        if isinstance(self.model_dir, bytes):
            self.model_dir = os.fsdecode(self.model_dir)
        check_model_folder(self.model_dir)
        kind, index = _parse_device(device)
        self.budget = None if budget is None else parse_byte_size(budget, "budget")
        # The path as the OS's bytes: a folder name need not be UTF-8 (os.fsdecode's surrogates).
        self.adapter = None if adapter is None else check_adapter_folder(adapter)
        if streamed_layers != "auto" and (isinstance(streamed_layers, bool) or not isinstance(streamed_layers, int)):
            raise TypeError(f"streamed_layers must be an int or \"auto\", got {streamed_layers!r}")
        if streamed_layers != "auto" and streamed_layers < 0:
            raise ValueError(f"streamed_layers must be >= 0 or \"auto\", got {streamed_layers}")
        self.streamed_layers = streamed_layers
        if isinstance(tensor_parallel, bool) or not isinstance(tensor_parallel, int):
            raise TypeError(f"tensor_parallel must be an int, got {tensor_parallel!r}")
        if tensor_parallel < 1:
            raise ValueError(f"tensor_parallel must be >= 1, got {tensor_parallel}")
        self.tensor_parallel = tensor_parallel
        if isinstance(context_parallel, bool) or not isinstance(context_parallel, int):
            raise TypeError(f"context_parallel must be an int, got {context_parallel!r}")
        if context_parallel < 1:
            raise ValueError(f"context_parallel must be >= 1, got {context_parallel}")
        self.context_parallel = context_parallel
        self._engine = _mosaic._Engine(os.fsencode(self.model_dir), kind, index, self.budget,
                                       None if self.adapter is None else os.fsencode(self.adapter),
                                       -1 if streamed_layers == "auto" else streamed_layers, tensor_parallel,
                                       context_parallel)
        self._info = self._engine.info

    # --- the model ------------------------------------------------------------------------
    @property
    def info(self):
        """The model's architecture, special ids, weight size and the device it runs on."""
        return dict(self._info)

    @property
    def device(self):
        return self._info["device"]

    @property
    def has_tokenizer(self):
        return self._engine.has_tokenizer

    def encode(self, text, chat=False):
        """Token ids of `text` (wrapped in the model's chat format with chat=True)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        _check_text(text, "text")
        return self._engine.encode(text, _flag(chat, "chat"))

    def decode(self, ids):
        """Text of token ids, special tokens skipped."""
        self._require_tokenizer()
        return self._engine.decode(token_ids(ids, "ids"))

    # --- generation -----------------------------------------------------------------------
    def generate(self, prompt, *, chat=False, suffix=None, allow_long_context=False, **sampling):
        """Generates for `prompt`: text, token ids, or a list of either (a batch, one packed
        forward per step). Sampling options are `mosaic generate`'s, with underscores:
        gen_length, steps, block_length, temperature, seed, remasking, cfg_scale, alg, top_p,
        top_k, threshold, factor, ... (mosaic.SAMPLING_OPTIONS). `suffix` (text or token ids):
        infilling, the gen_length positions between prompt and suffix (docs/design/infilling.md).
        Returns a GenerationResult, or a list of them for a batch. Ctrl-C cancels at the next
        step and raises KeyboardInterrupt."""
        prompts, batched = self._prepare(prompt, chat, sampling, "generate")
        suffix_ids = [] if suffix is None else (self.encode(suffix) if isinstance(suffix, str)
                                                else token_ids(suffix, "suffix"))
        results = self._engine.generate(prompts, sampling, None, _flag(allow_long_context, "allow_long_context"),
                                        suffix_ids)
        results = [GenerationResult(**result) for result in results]
        return results if batched else results[0]

    def stream(self, prompt, *, chat=False, allow_long_context=False, **sampling):
        """Like generate(), but a generator of StepEvent, one per step of each prompt, while the
        generation runs in a worker thread. Leaving the loop early cancels the generation. The
        generator's return value (StopIteration.value) is the list of GenerationResult."""
        prompts, _ = self._prepare(prompt, chat, sampling, "stream")
        allow_long_context = _flag(allow_long_context, "allow_long_context")
        decode = self._engine.decode if self.has_tokenizer else None
        mask = self._info["mask_token_id"]

        def run(on_step):
            results = self._engine.generate(prompts, sampling, on_step, allow_long_context)
            return [GenerationResult(**result) for result in results]

        return stream_steps(run, lambda step: StepEvent(**step, mask_token_id=mask, _decode=decode))

    def _prepare(self, prompt, chat, sampling, caller):
        unknown = [name for name in sampling if name not in _mosaic.SAMPLING_OPTIONS]
        if unknown:
            close = difflib.get_close_matches(unknown[0], _mosaic.SAMPLING_OPTIONS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise TypeError(f"{caller}() got an unexpected keyword argument '{unknown[0]}'{hint}; "
                            f"sampling options: {', '.join(_mosaic.SAMPLING_OPTIONS)}")
        _mosaic.check_sampling(sampling)  # types and choices, before any work starts
        chat = _flag(chat, "chat")
        items, batched = split_prompts(prompt)
        prompts = []
        for i, item in enumerate(items):
            what = f"prompt {i}" if batched else "prompt"
            if isinstance(item, str):
                if not item:
                    raise ValueError(f"{what} is empty")
                _check_text(item, what)
                self._require_tokenizer("give token ids instead of text")
                prompts.append(self._engine.encode(item, chat))
            else:
                if chat:
                    raise ValueError(f"{what}: chat=True applies to text; token ids are used as given")
                ids = token_ids(item, what)
                if ids.size == 0:
                    raise ValueError(f"{what} is empty")
                prompts.append(ids.tolist())
        return prompts, batched

    # --- forward --------------------------------------------------------------------------
    def forward(self, ids, rows=None, *, return_memory=False):
        """Logits of the requested rows only (mask-only: no other row's logits are computed),
        float32 [rows, vocab]. `ids`: one sequence, or a list of them (a packed batch; rows
        in batch order). `rows`: positions per sequence; None asks for every position holding
        the mask id. With return_memory=True: (logits, {planned_peak_bytes, ...})."""
        sequences, rows = forward_batch(ids, rows, self._info["mask_token_id"])
        logits, memory = self._engine.forward(sequences, rows)
        return (logits, memory) if return_memory else logits

    # --- memory planning ------------------------------------------------------------------
    def plan(self, seq_len=None, *, budget=None, device=None, **shape):
        """The memory plan of one step of this model as a dict (`mosaic plan --json`), for the
        engine's device and budget unless given. Shape options as mosaic.plan(): prompt_len,
        masked, batch, chunks, dtype, head, planner, temperature, timeline; tensor_parallel and
        context_parallel are the engine's unless given."""
        shape.setdefault("tensor_parallel", self.tensor_parallel)
        shape.setdefault("context_parallel", self.context_parallel)
        return plan(self.model_dir, seq_len, budget=self.budget if budget is None else budget,
                    device=device or self.device, adapter=self.adapter, **shape)

    def find_lmax(self, budget=None, *, device=None, **options):
        """The longest sequence one step of this model fits in `budget` (default: the engine's)."""
        budget = self.budget if budget is None else budget
        if budget is None:
            raise ValueError("find_lmax needs a budget (this engine was opened without one)")
        options.setdefault("tensor_parallel", self.tensor_parallel)
        options.setdefault("context_parallel", self.context_parallel)
        return find_lmax(self.model_dir, budget, device=device or self.device, adapter=self.adapter, **options)

    def _require_tokenizer(self, advice="use token ids"):
        if not self.has_tokenizer:
            raise _mosaic.Error(f"{self.model_dir}: no tokenizer.json in the model folder; {advice}")

    def __repr__(self):
        budget = "" if self.budget is None else f", budget={self.budget}"
        adapter = "" if self.adapter is None else f", adapter={self.adapter!r}"
        return (f"mosaic.Engine({self.model_dir!r}, {self._info['family']}, {self._info['layers']} layers, "
                f"device={self.device!r}{budget}{adapter})")


def _flag(value, name):
    """True or False, never a truthy stand-in: allow_long_context='no' must not mean True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}"[:200])
    return bool(value)


def _check_text(text, what):
    """Text reaches the engine as UTF-8: a lone surrogate (e.g. from os.fsdecode) cannot."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"{what} is not valid Unicode text: {error.reason} at index {error.start} "
                         f"({text[error.start]!r})") from None


def _parse_device(device):
    if not isinstance(device, str):
        raise TypeError(f"device must be a string ('auto', 'cpu', 'cuda' or 'cuda:N'), got {type(device).__name__}")
    match = _DEVICE.fullmatch(device)
    if not match:
        raise ValueError(f"device '{device}' is not supported (expected 'auto', 'cpu', 'cuda' or 'cuda:N')")
    if device.startswith("cuda"):
        index = int(match.group(1) or 0)
        if index > _MAX_DEVICE_INDEX:
            raise ValueError(f"device '{device}': no CUDA device has index {index}")
        return "cuda", index
    return device, 0
