"""Philox4x32-10 and the addressed random numbers of docs/design/rng.md, in NumPy.

Written from the paper (Salmon et al., SC'11, "Parallel random numbers: as easy as 1, 2, 3")
and rng.md, not from Mosaic's C++ code. Everything is vectorised: counters and keys may be
arrays that broadcast against each other. The 32x32 -> 64-bit products are done in uint64.

    w0, w1, w2, w3 = philox4x32_10(c0, c1, c2, c3, k0, k1)      # uint32 arrays
    u = uniform_at(seed, index, position, step, STREAM_RANDOM_CONFIDENCE)   # float64 in (0, 1)
    g = gumbel_at(seed, np.arange(vocab), position, step, STREAM_GUMBEL_TOKEN)

rng.md as read here (bit for bit):
- key = (seed & 0xffffffff, seed >> 32);
- counter = (index, position, step, stream), all uint32;
- bits = ((uint64(w0) << 21) ^ (uint64(w1) >> 11)) & (2^53 - 1) from the first two output
  words (w0 < 2^32, so w0 << 21 < 2^53 and the mask changes nothing);
- u = (double(bits) + 0.5) * 2^-53, every operation an IEEE double operation rounded to
  nearest even. bits is exact in a double, but bits + 0.5 is not representable once
  bits >= 2^52 and rounds (to even); bits = 2^53 - 1 gives u = 1.0 exactly (probability
  2^-53), so "never 1" in rng.md holds only up to that rounding;
- g = -log(-log(u)) in double (u = 1.0 gives g = +inf).
"""

import numpy as np

STREAM_GUMBEL_TOKEN = 1        # (vocab id, position, step): token choice with temperature
STREAM_RANDOM_CONFIDENCE = 2   # (0, position, step): LLaDA remasking="random"
STREAM_TRANSFER = 3            # (0, position, step): Dream alg="origin"
STREAM_POSITION_GUMBEL = 4     # (0, position, step): Dream alg_temp > 0 (Gumbel-top-k)

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def _u32(x):
    """Any integer (array) in [0, 2^32) -> uint64 array (the working type)."""
    a = np.asarray(x)
    if a.dtype.kind not in "ui":
        raise TypeError(f"Philox inputs must be integers, got {a.dtype}")
    if a.dtype.kind == "i" and a.size and a.min() < 0:
        raise ValueError("Philox inputs must be non-negative")
    a = a.astype(np.uint64)
    if a.size and a.max() > 0xFFFFFFFF:
        raise ValueError("Philox counter and key words must fit in 32 bits")
    return a


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32 with 10 rounds; inputs broadcast; returns four uint32 arrays."""
    c0, c1, c2, c3, k0, k1 = np.broadcast_arrays(*(_u32(v) for v in (c0, c1, c2, c3, k0, k1)))
    c0, c1, c2, c3, k0, k1 = (v.copy() for v in (c0, c1, c2, c3, k0, k1))
    for rnd in range(10):
        if rnd:
            k0 = (k0 + _W0) & _MASK32
            k1 = (k1 + _W1) & _MASK32
        p0 = _M0 * c0                  # < 2^64: exact in uint64
        p1 = _M1 * c2
        c0, c1, c2, c3 = ((p1 >> _SHIFT32) ^ c1 ^ k0, p1 & _MASK32,
                          (p0 >> _SHIFT32) ^ c3 ^ k1, p0 & _MASK32)
    return tuple(v.astype(np.uint32) for v in (c0, c1, c2, c3))


def key_from_seed(seed):
    """The 64-bit seed as a Philox key, low word first."""
    seed = int(seed)
    if not 0 <= seed < 2 ** 64:
        raise ValueError(f"seed {seed} is not a uint64")
    return seed & 0xFFFFFFFF, seed >> 32


def uniform_from_words(w0, w1):
    """float64 u = (bits + 0.5) * 2^-53 with bits = (w0 << 21 ^ w1 >> 11) & (2^53 - 1)."""
    w0 = np.asarray(w0).astype(np.uint64)
    w1 = np.asarray(w1).astype(np.uint64)
    bits = ((w0 << np.uint64(21)) ^ (w1 >> np.uint64(11))) & np.uint64((1 << 53) - 1)
    return (bits.astype(np.float64) + 0.5) * 2.0 ** -53


def gumbel_from_uniform(u):
    """g = -log(-log(u)) in float64."""
    with np.errstate(divide="ignore"):
        return -np.log(-np.log(np.asarray(u, dtype=np.float64)))


def words_at(seed, index, position, step, stream):
    """The four output words for counter (index, position, step, stream) under seed."""
    k0, k1 = key_from_seed(seed)
    return philox4x32_10(index, position, step, stream, k0, k1)


def uniform_at(seed, index, position, step, stream):
    """u(index, position, step, stream) of rng.md; arguments broadcast."""
    w0, w1, _, _ = words_at(seed, index, position, step, stream)
    return uniform_from_words(w0, w1)


def gumbel_at(seed, index, position, step, stream):
    """g(index, position, step, stream) = -log(-log(u)) of rng.md; arguments broadcast."""
    return gumbel_from_uniform(uniform_at(seed, index, position, step, stream))


# Random123 known-answer vectors (kat_vectors, philox4x32 10 rounds):
# (counter, key) -> output
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def check_known_answers():
    """Raise AssertionError unless every known-answer vector reproduces."""
    for counter, key, want in KNOWN_ANSWERS:
        got = tuple(int(w) for w in philox4x32_10(*counter, *key))
        if got != want:
            raise AssertionError(f"philox4x32_10({counter}, {key}) = "
                                 f"{tuple(hex(w) for w in got)}, expected "
                                 f"{tuple(hex(w) for w in want)}")


if __name__ == "__main__":
    check_known_answers()
    print("philox4x32_10 known answers: OK")
