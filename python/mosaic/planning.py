"""The memory plan of one denoising step from a configuration alone (no weights are read):
mosaic.plan() and mosaic.find_lmax() answer with the dicts `mosaic plan --json` prints."""

import errno
import json
import numbers
import os

from mosaic import _mosaic
from mosaic.byte_size import parse_byte_size
from mosaic.model_files import check_adapter_folder

PRESETS = ("llada-8b", "dream-7b", "llada-moe-7b", "llada2-mini", "llada2-flash")
_CHUNK_GROUPS = ("qkv", "attention", "ffn", "head")


def plan(model, seq_len=None, *, prompt_len=None, masked=None, batch=None, budget=None, chunks=None,
         device="cuda", dtype=None, head="stats", planner="best", temperature=0.0, timeline=False,
         adapter=None, weights="device", residual="auto", tensor_parallel=1,
         context_parallel=1):
    """Plans one step of `model` (a preset, "llada-8b" / "dream-7b" / "llada-moe-7b", or a model folder).

    The shape: `seq_len` tokens, or `batch`, a list of sequence lengths; each sequence has
    `masked` candidate rows, by default those after a prompt of `prompt_len` tokens (default
    half the sequence). `budget` (bytes or "24GiB") lets lazy chunking choose the chunk counts;
    otherwise `chunks` sets them ({"qkv":, "attention":, "ffn":, "head":} or four ints).
    `device`: "cuda" (bf16, 2 MiB pages, 64 MiB workspace) or "cpu" (fp32); `dtype` overrides
    the activation dtype. timeline=True adds "categories", "op_names" and "timeline".
    `adapter`: a PEFT LoRA folder merged at load, checked against the model as the engine checks
    it; on the CPU its merged fp32 copies count in "weight_bytes" ("adapter" in the report).
    `weights`: where the layers' product weights live, "device", "host" (streamed one layer
    ahead) or "auto" (with a budget: the fewest layers streamed that fit the step in chunks that
    fill the GPU); `residual`: where the residual stream lives, "auto", "device" or "host"
    (docs/design/weight-staging.md, residual-staging.md); the report's "streamed_weights" and
    "residual" say what is in host memory and whether its copies hide under compute.
    `tensor_parallel`: plan one rank of N (docs/design/tensor-parallel.md; `budget` is each
    rank's); the report's "tensor_parallel" gives the rank's collectives and their predicted time.
    `context_parallel`: plan the busiest of N ranks splitting the step's rows
    (docs/design/context-parallel.md); the report's "context_parallel" says which and what it gathers.
    """
    if budget is not None and chunks is not None:
        raise ValueError("budget chooses the chunks itself: give budget or chunks, not both")
    if batch is not None and seq_len is not None:
        raise ValueError("give either seq_len or batch, not both")
    if batch is None and seq_len is None:
        raise TypeError("plan() needs seq_len (or batch, a list of sequence lengths)")
    lengths = [_positive_int(length, "batch length") for length in batch] if batch is not None \
        else [_positive_int(seq_len, "seq_len")]
    if not lengths:
        raise ValueError("batch: the list of sequence lengths is empty")
    candidates = [_candidates(length, prompt_len, masked) for length in lengths]
    report = _mosaic.plan_json(
        model=_model_name(model), lengths=lengths, candidates=candidates, device=_str(device, "device"),
        activations=_str(dtype or "", "dtype"), head=_str(head, "head"), chunks=_chunk_counts(chunks),
        budget=None if budget is None else parse_byte_size(budget), temperature=_number(temperature, "temperature"),
        planner=_str(planner, "planner"), timeline=bool(timeline), adapter=_adapter(adapter),
        weights=_str(weights, "weights"), residual=_str(residual, "residual"),
        tensor_parallel=_positive_int(tensor_parallel, "tensor_parallel"),
        context_parallel=_positive_int(context_parallel, "context_parallel"))
    return json.loads(report)


def find_lmax(model, budget, *, temperature=0.0, device="cuda", dtype=None, head="stats", planner="best",
              timeline=False, adapter=None, weights="device", residual="auto", tensor_parallel=1,
              context_parallel=1):
    """The longest L (a multiple of 1024; prompt L/2, the other L/2 masked) whose step fits
    `budget` (bytes or "24GiB"): {"l_max":, "at_l_max": the plan there, ...}. `weights`,
    `residual`, `tensor_parallel` and `context_parallel` as for plan()."""
    report = _mosaic.find_lmax_json(
        model=_model_name(model), device=_str(device, "device"), activations=_str(dtype or "", "dtype"),
        head=_str(head, "head"), budget=parse_byte_size(budget), temperature=_number(temperature, "temperature"),
        planner=_str(planner, "planner"), timeline=bool(timeline), adapter=_adapter(adapter),
        weights=_str(weights, "weights"), residual=_str(residual, "residual"),
        tensor_parallel=_positive_int(tensor_parallel, "tensor_parallel"),
        context_parallel=_positive_int(context_parallel, "context_parallel"))
    return json.loads(report)


def _adapter(adapter):
    return "" if adapter is None else check_adapter_folder(adapter)


def _model_name(model):
    name = os.fspath(model) if isinstance(model, os.PathLike) else model
    if not isinstance(name, str):
        raise TypeError(f"model must be a preset name ({', '.join(PRESETS)}) or a model folder, "
                        f"got {type(model).__name__}")
    if name not in PRESETS and not os.path.exists(name):
        raise FileNotFoundError(errno.ENOENT, f"not a preset ({', '.join(PRESETS)}) and no such model folder", name)
    return name if name in PRESETS else os.fsencode(name)  # a folder name need not be UTF-8


def _candidates(length, prompt_len, masked):
    """Candidate rows of a sequence: `masked`, else the positions after the prompt (`mosaic plan`)."""
    if masked is not None:
        masked = _int(masked, "masked")
        if not 0 <= masked <= length:
            raise ValueError(f"masked = {masked} must be between 0 and the sequence length {length}")
        return masked
    prompt = length // 2 if prompt_len is None else _int(prompt_len, "prompt_len")
    if not 0 <= prompt <= length:
        raise ValueError(f"prompt_len = {prompt} must be between 0 and the sequence length {length}")
    return length - prompt


def _chunk_counts(chunks):
    if chunks is None:
        return (1, 1, 1, 1)
    if isinstance(chunks, dict):
        unknown = set(chunks) - set(_CHUNK_GROUPS)
        if unknown:
            raise ValueError(f"chunks: unknown group {sorted(unknown)[0]!r} (groups: {', '.join(_CHUNK_GROUPS)})")
        counts = [chunks.get(group, 1) for group in _CHUNK_GROUPS]
    else:
        counts = list(chunks)
        if len(counts) != 4:
            raise ValueError("chunks takes four counts: qkv, attention, ffn, head")
    return tuple(_positive_int(count, "chunk count") for count in counts)


def _int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not -2**63 <= int(value) < 2**63:
        raise ValueError(f"{name} = {value} is out of range (a 64-bit integer)")
    return int(value)


def _positive_int(value, name):
    value = _int(value, name)
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def _number(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    return float(value)


def _str(value, name):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__} {value!r}")
    return value
