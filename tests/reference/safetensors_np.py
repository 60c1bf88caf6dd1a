"""Minimal safetensors reader (and writer, for tests) in NumPy; no safetensors library.

File layout (https://github.com/huggingface/safetensors, "Format"):

    [8 bytes]  N, unsigned little-endian 64-bit: length of the JSON header
    [N bytes]  JSON object, UTF-8, may be right-padded with spaces:
                 {"<tensor name>": {"dtype": "BF16", "shape": [rows, cols],
                                    "data_offsets": [begin, end]},
                  ...,
                  "__metadata__": {"format": "pt", ...}}      (optional, str -> str)
    [rest]     tensor bytes, little-endian, row-major; data_offsets count from
               the first byte after the header.

A Hugging Face model folder holds config.json and either model.safetensors or
model.safetensors.index.json, whose "weight_map" maps every tensor name to the shard file
that holds it (model-0000k-of-0000N.safetensors).

Only the dtypes the Mosaic checkpoints use are supported: F32, F16, BF16 (plus F64 for
convenience). Everything is returned as float32 (bf16 -> float32 is exact: the 16 stored
bits are the high half of a float32).
"""

import json
import os
import struct

import numpy as np

# dtype string -> (bytes per element, numpy dtype of the stored little-endian bits)
_DTYPES = {
    "F64": (8, np.dtype("<f8")),
    "F32": (4, np.dtype("<f4")),
    "F16": (2, np.dtype("<f2")),
    "BF16": (2, np.dtype("<u2")),
}

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


class SafetensorsError(ValueError):
    """A malformed file or folder; the message names the file and what was wrong."""


def bf16_bits_to_float32(bits):
    """uint16 bf16 bit patterns -> float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16_bits(values):
    """float32 values -> uint16 bf16 bit patterns, rounding to nearest even (NaN kept NaN)."""
    x = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (x + 0x7FFF + ((x >> 16) & 1)) >> 16
    bits = rounded.astype(np.uint16)
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    bits[nan] = 0x7FC0
    return bits


def read_header(path):
    """Return (header dict without "__metadata__", metadata dict, data start, file size).

    Validates the header against the file: known dtypes, in-bounds offsets, and byte
    counts that match the shapes.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) != 8:
            raise SafetensorsError(f"{path}: shorter than the 8-byte header length")
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len > size - 8:
            raise SafetensorsError(
                f"{path}: header length {header_len} exceeds file size {size}")
        raw = f.read(header_len)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", {}) or {}
    data_start = 8 + header_len
    data_size = size - data_start
    for name, info in header.items():
        where = f"{path}: tensor '{name}'"
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
            raise SafetensorsError(f"{where}: needs dtype, shape and data_offsets")
        if info["dtype"] not in _DTYPES:
            raise SafetensorsError(
                f"{where}: dtype {info['dtype']!r} unsupported (expected one of "
                f"{sorted(_DTYPES)})")
        shape = info["shape"]
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise SafetensorsError(f"{where}: bad shape {shape}")
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= data_size:
            raise SafetensorsError(
                f"{where}: data_offsets [{begin}, {end}] outside the {data_size} data bytes")
        expected = int(np.prod(shape, dtype=np.int64)) * _DTYPES[info["dtype"]][0]
        if end - begin != expected:
            raise SafetensorsError(
                f"{where}: {end - begin} bytes but shape {shape} {info['dtype']} needs "
                f"{expected}")
    return header, metadata, data_start, size


def load_file(path, names=None):
    """Load tensors of one .safetensors file as float32 arrays: dict name -> np.ndarray.

    names: optional iterable restricting which tensors are read (all when None); a name
    that is absent raises SafetensorsError.
    """
    header, _, data_start, _ = read_header(path)
    wanted = header.keys() if names is None else list(names)
    out = {}
    with open(path, "rb") as f:
        for name in wanted:
            if name not in header:
                raise SafetensorsError(f"{path}: no tensor named '{name}'")
            info = header[name]
            begin, end = info["data_offsets"]
            f.seek(data_start + begin)
            raw = f.read(end - begin)
            stored = np.frombuffer(raw, dtype=_DTYPES[info["dtype"]][1])
            if info["dtype"] == "BF16":
                values = bf16_bits_to_float32(stored)
            else:
                values = stored.astype(np.float32)
            out[name] = values.reshape(info["shape"])
    return out


def model_files(model_dir):
    """Return {shard file path: [tensor names]} for a HF model folder (single or sharded)."""
    index_path = os.path.join(model_dir, INDEX_NAME)
    single_path = os.path.join(model_dir, SINGLE_NAME)
    if os.path.exists(index_path):
        with open(index_path, "r", encoding="utf-8") as f:
            index = json.load(f)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise SafetensorsError(f"{index_path}: missing or empty 'weight_map'")
        files = {}
        for name, shard in weight_map.items():
            if os.path.basename(shard) != shard:
                raise SafetensorsError(
                    f"{index_path}: shard '{shard}' of '{name}' is not a plain file name")
            files.setdefault(os.path.join(model_dir, shard), []).append(name)
        for shard in files:
            if not os.path.exists(shard):
                raise SafetensorsError(f"{index_path}: shard file {shard} does not exist")
        return files
    if os.path.exists(single_path):
        header, _, _, _ = read_header(single_path)
        return {single_path: list(header.keys())}
    raise SafetensorsError(f"{model_dir}: neither {SINGLE_NAME} nor {INDEX_NAME} found")


def load_config(model_dir):
    """Parse model_dir/config.json."""
    path = os.path.join(model_dir, "config.json")
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def load_model_dir(model_dir):
    """Load a HF model folder: returns (config dict, {tensor name: float32 array}).

    With an index, every tensor is read from the shard the weight_map names (and must be
    there); tensors present in a shard but not in the weight_map are ignored, as HF does.
    """
    config = load_config(model_dir)
    tensors = {}
    for path, names in model_files(model_dir).items():
        tensors.update(load_file(path, names))
    return config, tensors


def tensor_dtypes(model_dir):
    """Return {tensor name: stored dtype string} for a model folder (headers only)."""
    dtypes = {}
    for path, names in model_files(model_dir).items():
        header, _, _, _ = read_header(path)
        for name in names:
            if name not in header:
                raise SafetensorsError(f"{path}: no tensor named '{name}'")
            dtypes[name] = header[name]["dtype"]
    return dtypes


# ----------------------------------------------------------------------------------------
# Writer (used by the self-test to build checkpoints without Mosaic)
# ----------------------------------------------------------------------------------------

def encode_tensor(values, dtype):
    """float values -> raw little-endian bytes of the given safetensors dtype."""
    values = np.asarray(values)
    if dtype == "BF16":
        return float32_to_bf16_bits(values.astype(np.float32)).astype("<u2").tobytes()
    if dtype not in _DTYPES:
        raise SafetensorsError(f"cannot encode dtype {dtype!r}")
    return values.astype(_DTYPES[dtype][1]).tobytes()


def save_file(path, tensors, dtype="BF16", metadata=None, align=8):
    """Write {name: array} to path, every tensor stored as `dtype`.

    The header is padded with spaces so the data starts at a multiple of `align` bytes, as
    the reference implementation does.
    """
    header = {}
    chunks = []
    offset = 0
    for name, values in tensors.items():
        raw = encode_tensor(values, dtype)
        header[name] = {"dtype": dtype, "shape": list(np.shape(values)),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    raw_header = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw_header += b" " * ((-(8 + len(raw_header))) % align)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw_header)))
        f.write(raw_header)
        for raw in chunks:
            f.write(raw)


def save_model_dir(model_dir, config, tensors, dtype="BF16", shards=1):
    """Write config.json and the tensors as one file or `shards` files plus an index."""
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    if shards <= 1:
        save_file(os.path.join(model_dir, SINGLE_NAME), tensors, dtype)
        return
    names = list(tensors)
    weight_map = {}
    total_size = 0
    for k in range(shards):
        shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k::shards]}
        save_file(os.path.join(model_dir, shard), part, dtype)
        for n in part:
            weight_map[n] = shard
            total_size += len(encode_tensor(part[n], dtype))
    with open(os.path.join(model_dir, INDEX_NAME), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total_size}, "weight_map": weight_map}, f,
                  indent=2)
