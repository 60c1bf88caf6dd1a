"""What users pass as prompts and forward inputs -> the int32 token-id arrays the engine takes.

A prompt is text (str) or token ids (a list of ints or a 1-D integer array); a batch is a list
of prompts (or a 2-D integer array). Wrong types raise TypeError, empty or out-of-range values
ValueError, each naming the offending item.
"""

import numbers

import numpy as np

_INT32 = np.iinfo(np.int32)


def token_ids(values, what):
    """A 1-D int32 array of `values` (ints or an integer array); errors name `what`."""
    if isinstance(values, np.ndarray):
        array = values
    else:
        items = list(values)
        for item in items:
            if isinstance(item, bool) or not isinstance(item, numbers.Integral):
                raise TypeError(f"{what}: expected ints, got {type(item).__name__} {item!r}")
        array = np.asarray(items, dtype=np.int64)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{what}: expected integers, got an array of {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"{what}: expected one sequence (1-D), got shape {array.shape}")
    if array.size and (array.min() < _INT32.min or array.max() > _INT32.max):
        bad = int(array.max() if array.max() > _INT32.max else array.min())
        raise ValueError(f"{what}: {bad} is outside the int32 range")
    return np.ascontiguousarray(array, dtype=np.int32)


def _is_ids(value):
    return isinstance(value, np.ndarray) or (
        isinstance(value, (list, tuple)) and all(isinstance(v, numbers.Integral) for v in value))


def split_prompts(prompt):
    """(list of prompts, each str or ids; whether the caller gave a batch)."""
    if isinstance(prompt, str):
        return [prompt], False
    if isinstance(prompt, np.ndarray):
        if prompt.ndim == 1:
            return [prompt], False
        if prompt.ndim == 2:
            return list(prompt), True
        raise ValueError(f"prompt: an array of token ids must be 1-D (one prompt) or 2-D (a batch), "
                         f"got shape {prompt.shape}")
    if isinstance(prompt, (list, tuple)):
        if not prompt:
            raise ValueError("prompt: the list is empty (give text, token ids, or a list of prompts)")
        if all(isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in prompt):
            return [list(prompt)], False
        for i, p in enumerate(prompt):
            if not isinstance(p, str) and not _is_ids(p):
                raise TypeError(f"prompt {i}: expected text (str) or token ids (a list of ints), "
                                f"got {type(p).__name__} {p!r}"[:200])
        return list(prompt), True
    raise TypeError(f"prompt must be text (str), token ids (a list of ints) or a list of prompts, "
                    f"got {type(prompt).__name__}")


def forward_batch(ids, rows, mask_token_id):
    """(ids arrays, rows arrays) for Engine.forward: one sequence (1-D ids, rows a list of ints)
    or a batch (a list of sequences, rows a list of lists). rows=None asks for every position
    holding the mask id, as `mosaic forward` does without --rows."""
    single = _is_flat(ids)
    sequences = [ids] if single else list(_as_sequence_list(ids))
    if not sequences:
        raise ValueError("ids: the batch is empty")
    sequences = [token_ids(s, f"ids[{i}]" if not single else "ids") for i, s in enumerate(sequences)]
    if rows is None:
        row_lists = []
        for i, sequence in enumerate(sequences):
            masked = np.flatnonzero(sequence == mask_token_id).astype(np.int32)
            if masked.size == 0:
                raise ValueError(f"sequence {i} has no masked position (mask id {mask_token_id}) "
                                 "and no rows were given")
            row_lists.append(masked)
    else:
        given = [rows] if single else list(_as_sequence_list(rows))
        if len(given) != len(sequences):
            raise ValueError(f"rows: {len(given)} lists for {len(sequences)} sequences "
                             "(one list of positions per sequence)")
        row_lists = [token_ids(r, f"rows[{i}]" if not single else "rows") for i, r in enumerate(given)]
    return sequences, row_lists


def _is_flat(value):
    """One sequence (ints, a 1-D array) rather than a batch (a list of sequences, a 2-D array)."""
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, (list, tuple)) and len(value) > 0 and not any(
        isinstance(v, (list, tuple, np.ndarray)) for v in value)


def _as_sequence_list(value):
    if isinstance(value, np.ndarray):
        if value.ndim != 2:
            raise ValueError(f"expected a 1-D sequence or a 2-D batch, got shape {value.shape}")
        return list(value)
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"expected a list of token ids or a list of such lists, got {type(value).__name__}")
    return value
