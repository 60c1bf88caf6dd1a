"""Byte sizes as `mosaic --budget` takes them: 24GiB, 24G, 512MiB, 80GB, or an int of bytes."""

import numbers
import re

# Binary units (K, KiB, ...) and decimal ones (KB, ...), case-insensitive, as the CLI reads them.
_UNITS = {
    "": 1, "B": 1,
    "K": 2**10, "KIB": 2**10, "M": 2**20, "MIB": 2**20,
    "G": 2**30, "GIB": 2**30, "T": 2**40, "TIB": 2**40,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
}
_SIZE = re.compile(r"([0-9.]+)([A-Za-z]*)")


def parse_byte_size(value, name="budget"):
    """Bytes of `value` (an int, or a string such as "24GiB"); TypeError / ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, str)):
        raise TypeError(f"{name} must be an int (bytes) or a string such as '24GiB', "
                        f"got {type(value).__name__} {value!r}")
    if isinstance(value, numbers.Integral):
        size = int(value)
    else:
        match = _SIZE.fullmatch(value.strip())
        unit = match.group(2).upper() if match else None
        try:
            number = float(match.group(1)) if match else None
        except ValueError:
            number = None
        if number is None or unit not in _UNITS:
            raise ValueError(f"{name}: '{value}' is not a size (e.g. 24GiB, 512MiB, 80GB, or bytes)")
        size = round(number * _UNITS[unit])
    if not 1 <= size <= 2**63:
        raise ValueError(f"{name}: {value!r} is out of range (1 byte to 8 EiB)")
    return size
