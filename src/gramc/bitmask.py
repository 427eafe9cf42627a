"""The packed token bitmask layout, fixed once for every backend.

A mask over ``V`` tokens is ``ceil(V / 32)`` uint32 words; token ``j`` is bit ``j % 32`` of
word ``j // 32`` (least significant bit first). Bits past ``V`` are zero. This is the layout
the binding walks of :mod:`gramc.automata` write and the logits kernels (numpy here, CUDA in
``runtime/cuda``) read, so it sits below both, with numpy as its only import.

Reference semantics of applying a mask, as a loop::

    for j in range(logits.shape[-1]):
        allowed = j < 32 * len(words) and (words[j // 32] >> (j % 32)) & 1
        if not allowed:
            logits[j] = -inf
"""

from __future__ import annotations

import numpy as np

#: Rows packed together when building bitmasks (bounds the temporary bool matrix).
_PACK_CHUNK_BYTES = 64 << 20


def n_words(vocab_size: int) -> int:
    """Words per mask row for a vocabulary of ``vocab_size`` tokens."""
    return (vocab_size + 31) // 32


def pack_rows(indptr: np.ndarray, token_ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """Bitmask rows (uint32 ``[n_rows, n_words]``) from CSR rows of allowed token ids."""
    n_rows = len(indptr) - 1
    width = n_words(vocab_size) * 32
    out = np.zeros((n_rows, width // 32), dtype=np.uint32)
    step = max(1, _PACK_CHUNK_BYTES // max(width, 1))
    for lo in range(0, n_rows, step):
        hi = min(lo + step, n_rows)
        # One flat byte per bit of the chunk's rows, set at row * width + id, packed at once.
        flat = np.zeros((hi - lo) * width, dtype=np.uint8)
        a, b = indptr[lo], indptr[hi]
        starts = np.repeat(np.arange(hi - lo, dtype=np.int64) * width, np.diff(indptr[lo : hi + 1]))
        flat[starts + token_ids[a:b]] = 1
        out[lo:hi] = np.packbits(flat, bitorder="little").view("<u4").reshape(hi - lo, width // 32)
    return out


def pack_dense(dense: np.ndarray) -> np.ndarray:
    """Bitmask rows (uint32 ``[n_rows, n_words]``) from a bool ``[n_rows, V]`` matrix."""
    n_rows, size = dense.shape
    width = n_words(size) * 32
    if width != size:
        dense = np.concatenate([dense, np.zeros((n_rows, width - size), dtype=bool)], axis=1)
    return np.packbits(dense, axis=1, bitorder="little").view("<u4").reshape(n_rows, width // 32)


def set_bits(words: np.ndarray, ids) -> None:
    """Set the bits of token ``ids`` in the packed row ``words`` (in place)."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) <= 64:  # a Python loop beats building a vocabulary-wide array
        for t in ids.tolist():
            words[t >> 5] |= np.uint32(1 << (t & 31))
        return
    flags = np.zeros(len(words) * 32, dtype=bool)
    flags[ids] = True
    words |= np.packbits(flags, bitorder="little").view("<u4")


def unpack_row(words: np.ndarray, size: int) -> np.ndarray:
    """A bool mask of length ``size`` from one bitmask row (zero-padded past the row)."""
    bits = np.unpackbits(words.view(np.uint8), bitorder="little").view(bool)
    if size <= len(bits):
        return bits[:size].copy()
    out = np.zeros(size, dtype=bool)
    out[: len(bits)] = bits
    return out


def apply_bitmask(logits: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Set disallowed logits to -inf in place (rows of ``logits`` against rows of ``words``).

    ``logits`` is ``[V']`` or ``[B, V']`` (any float dtype); ``words`` is ``[W]`` or ``[B, W]``.
    Columns past ``32 * W`` are disallowed. Returns ``logits``.
    """
    width = logits.shape[-1]
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), axis=-1, bitorder="little")
    allowed = np.zeros(logits.shape, dtype=bool)
    n = min(width, bits.shape[-1])
    allowed[..., :n] = bits[..., :n].astype(bool)
    logits[~allowed] = -np.inf
    return logits
