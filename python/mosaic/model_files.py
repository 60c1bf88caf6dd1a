"""FileNotFoundError for a model folder that lacks what a checkpoint needs (the engine would
report it as a mosaic.Error; Python code expects the OS's exception for a missing file)."""

import errno
import json
import os

_SINGLE_FILE = "model.safetensors"
_INDEX_FILE = "model.safetensors.index.json"
_PYTORCH_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")


def _missing(message, path):
    return FileNotFoundError(errno.ENOENT, message, path)


def check_model_folder(model_dir):
    """Raises FileNotFoundError (NotADirectoryError) unless `model_dir` holds config.json and
    the safetensors files its index names. Damaged files are the engine's to report."""
    if not os.path.exists(model_dir):
        raise _missing("model folder not found", model_dir)
    if not os.path.isdir(model_dir):
        raise NotADirectoryError(errno.ENOTDIR, "not a model folder (config.json + *.safetensors)", model_dir)
    if not os.access(model_dir, os.R_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "the model folder cannot be read (permissions)", model_dir)
    config = os.path.join(model_dir, "config.json")
    if os.path.isfile(config) and not os.access(config, os.R_OK):
        raise PermissionError(errno.EACCES, "config.json cannot be read (permissions)", config)
    if not os.path.isfile(config):
        raise _missing("no config.json in the model folder (expected a Hugging Face model folder)", config)
    index = os.path.join(model_dir, _INDEX_FILE)
    if os.path.isfile(index):
        for shard in sorted(_shards_named_by(index)):
            if not os.path.isfile(os.path.join(model_dir, shard)):
                raise _missing(f"shard named by {_INDEX_FILE} does not exist", os.path.join(model_dir, shard))
        return
    if os.path.isfile(os.path.join(model_dir, _SINGLE_FILE)):
        return
    if any(os.path.exists(os.path.join(model_dir, name)) for name in _PYTORCH_FILES):
        return  # the engine explains that Mosaic reads safetensors, not .bin
    raise _missing(f"no {_SINGLE_FILE} or {_INDEX_FILE} in the model folder", model_dir)


def check_adapter_folder(adapter):
    """The adapter path as a str; FileNotFoundError (NotADirectoryError) unless it is a folder
    with adapter_config.json. What is inside is the engine's to check and name."""
    if not isinstance(adapter, (str, bytes, os.PathLike)):
        raise TypeError(f"adapter must be a path, got {type(adapter).__name__}")
    adapter = os.fspath(adapter)
    if isinstance(adapter, bytes):
        adapter = os.fsdecode(adapter)
    if not os.path.exists(adapter):
        raise _missing("adapter folder not found", adapter)
    if not os.path.isdir(adapter):
        raise NotADirectoryError(errno.ENOTDIR, "not an adapter folder (adapter_config.json + "
                                 "adapter_model.safetensors)", adapter)
    if not os.path.isfile(os.path.join(adapter, "adapter_config.json")):
        raise _missing("no adapter_config.json in the adapter folder (expected a PEFT adapter folder)",
                       os.path.join(adapter, "adapter_config.json"))
    return adapter


_MAX_INDEX_BYTES = 64 << 20  # a real index is well under 1 MiB; the engine names a larger one


def _shards_named_by(index_path):
    try:
        if os.path.getsize(index_path) > _MAX_INDEX_BYTES:
            return set()
        with open(index_path, encoding="utf-8") as f:
            weight_map = json.load(f).get("weight_map", {})
    except (OSError, ValueError, AttributeError, RecursionError):
        return set()  # malformed (or nested too deep for Python's parser): the engine names what is wrong
    if not isinstance(weight_map, dict):
        return set()
    return {shard for shard in weight_map.values() if isinstance(shard, str)}
