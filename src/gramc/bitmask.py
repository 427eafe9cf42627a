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

from functools import lru_cache

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


#: Rows :func:`word_rows` compares at a time (bounds its temporary bool matrices).
_WORD_CHUNK = 256


#: The set bits of each byte value.
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.uint8)


def word_rows(rows: np.ndarray, vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Packed rows as ``(indptr, word, value, complement)``: row ``i`` is all zeros, or all
    ones where ``complement[i]``, except its listed words ``word[indptr[i]:indptr[i + 1]]``
    (ascending), which hold ``value``. A row is a complement where more than half of its
    bits are set (so a row in the form of token ids, which lists whichever of its set or
    clear ids are fewer, converts to the same arrays: :func:`word_rows_of_ids`). Most
    grammar rows allow a handful of tokens or all but a handful, so this is a fraction of
    the packed rows' size, and expanding one is a fill and an indexed store
    (:func:`expand_word_row`): a few µs at any density, where a store per token id cost
    up to 120 µs."""
    ones = np.uint32(0xFFFFFFFF)
    counts, words, values, flags = [np.zeros(0, np.int64)], [np.zeros(0, np.int32)], [np.zeros(0, np.uint32)], \
        [np.zeros(0, bool)]
    for lo in range(0, len(rows), _WORD_CHUNK):
        chunk = rows[lo:lo + _WORD_CHUNK]
        complement = _BYTE_BITS[chunk.view(np.uint8)].sum(axis=1, dtype=np.int64) > vocab_size // 2
        row, word = np.nonzero(chunk != np.where(complement, ones, np.uint32(0))[:, None])  # row-major
        counts.append(np.bincount(row, minlength=len(chunk)))
        words.append(word.astype(np.int32))
        values.append(chunk[row, word])
        flags.append(complement)
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(np.int64)
    return indptr, np.concatenate(words), np.concatenate(values), np.concatenate(flags)


def word_rows_of_ids(indptr: np.ndarray, ids: np.ndarray, complement: np.ndarray,
                     vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The :func:`word_rows` form of rows given by token ids (as artifact layouts 5 to 9
    store them): row ``i`` allows ``ids[indptr[i]:indptr[i + 1]]`` (distinct, ascending), or,
    where ``complement[i]``, every id of ``[0, vocab_size)`` but those. Linear in the ids;
    no row is expanded."""
    n_rows = len(complement)
    row = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    word = ids.astype(np.int64) >> 5
    bit = np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32))
    starts = np.flatnonzero(np.concatenate([[True], (row[1:] != row[:-1]) | (word[1:] != word[:-1])])) \
        if len(ids) else np.zeros(0, np.int64)
    row, word, value = row[starts], word[starts], np.bitwise_or.reduceat(bit, starts) if len(ids) else bit
    value = np.where(complement[row], ~value, value)  # a complement row's listed words: the ids cleared
    last, tail = n_words(vocab_size) - 1, vocab_size % 32
    if tail:  # a complement row lists its last word, its bits past the vocabulary clear
        value[complement[row] & (word == last)] &= np.uint32((1 << tail) - 1)
        has_last = np.zeros(n_rows, bool)
        has_last[row[word == last]] = True
        extra = np.flatnonzero(complement & ~has_last)
        row, word = np.concatenate([row, extra]), np.concatenate([word, np.full(len(extra), last)])
        value = np.concatenate([value, np.full(len(extra), (1 << tail) - 1, np.uint32)])
        order = np.lexsort((word, row))
        row, word, value = row[order], word[order], value[order]
    out_indptr = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=n_rows))]).astype(np.int64)
    return out_indptr, word.astype(np.int32), value.astype(np.uint32), complement.astype(bool)


def expand_word_row(word: np.ndarray, value: np.ndarray, complement: bool, vocab_size: int) -> np.ndarray:
    """The packed row of one :func:`word_rows` row (``word`` best as ``np.intp``: an index
    of another type is converted first)."""
    out = np.full(n_words(vocab_size), 0xFFFFFFFF if complement else 0, dtype=np.uint32)
    out[word] = value
    return out


class WordRows:
    """Packed rows kept in the :func:`word_rows` form, each expanded on first use and kept:
    what a loaded artifact's node rows are, so that loading it costs their listed words,
    not ``rows x ceil(V / 32)`` words. Indexed like the ``uint32 [K, W]`` array it stands
    for: by a row number (a read-only row) or an array of them (a new ``[n, W]`` array)."""

    def __init__(self, indptr: np.ndarray, word: np.ndarray, value: np.ndarray, complement: np.ndarray,
                 vocab_size: int):
        self.indptr, self.word, self.value, self.complement = indptr, word, value, complement
        self.vocab_size = vocab_size
        self.shape = (len(complement), n_words(vocab_size))
        self._rows: list[np.ndarray | None] = [None] * len(complement)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, i) -> np.ndarray:
        if not isinstance(i, (int, np.integer)):
            return np.array([self[int(k)] for k in np.asarray(i).reshape(-1)], dtype=np.uint32).reshape(-1, self.shape[1])
        row = self._rows[i]
        if row is None:
            row = self._rows[i] = self.expand(int(i))
        return row

    def expand(self, i: int) -> np.ndarray:
        """Row ``i`` expanded anew (read-only), not kept: for callers that bound their own cache."""
        a, b = self.indptr[i], self.indptr[i + 1]
        row = expand_word_row(self.word[a:b].astype(np.intp), self.value[a:b], bool(self.complement[i]),
                              self.vocab_size)
        row.flags.writeable = False
        return row


def distinct_rows(indptr: np.ndarray, token_ids: np.ndarray, tags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group equal CSR rows: ``(row_of, reps)`` with ``row_of[i]`` the group of row ``i`` and
    ``reps[g]`` the first row of group ``g``. Rows are equal when their ids (in stored order)
    and their ``tags`` (e.g. whether EOS joins the row) are.

    Linear: rows are grouped by length, tag and two 64-bit hashes, then every row is compared
    with its group's first row entry by entry; should hashes ever collide on unequal rows,
    each row keeps its own group (never a wrong grouping).
    """
    n_rows = len(indptr) - 1
    lengths = np.diff(indptr).astype(np.int64)
    hashes = []
    n_ids = int(token_ids.max()) + 1 if len(token_ids) else 0
    table = _id_hashes(n_ids) if n_ids <= MAX_HASHED_IDS else None  # a hostile file's ids: mixed
    for k, seed in enumerate(_SEEDS):
        with np.errstate(over="ignore"):
            mixed = table[k][token_ids] if table is not None else _mix64(token_ids.astype(np.uint64) + np.uint64(seed))
            sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(mixed, dtype=np.uint64)])
            hashes.append(sums[indptr[1:]] - sums[indptr[:-1]])
    order = np.lexsort((hashes[1], hashes[0], tags, lengths))
    keys = (lengths[order], tags[order], hashes[0][order], hashes[1][order])
    new = np.ones(n_rows, dtype=bool)
    if n_rows:
        new[1:] = np.any([k[1:] != k[:-1] for k in keys], axis=0)
    group_sorted = np.cumsum(new) - 1
    row_of = np.empty(n_rows, dtype=np.int64)
    row_of[order] = group_sorted
    first = order[new]
    reps = np.empty(len(first), dtype=np.int64)
    reps[group_sorted[new]] = first
    # reps in row order: the first row of each group, groups numbered by it
    renumber = np.argsort(reps, kind="stable")
    reps = reps[renumber]
    inverse = np.empty_like(renumber)
    inverse[renumber] = np.arange(len(renumber))
    row_of = inverse[row_of]
    # Each row grouped with another is compared with that group's first row (a memcmp each:
    # rows are few, their ids many).
    starts = indptr.tolist()
    rep_of = reps[row_of]
    for i in np.flatnonzero(rep_of != np.arange(n_rows)).tolist():
        r = int(rep_of[i])
        if not np.array_equal(token_ids[starts[i] : starts[i + 1]], token_ids[starts[r] : starts[r + 1]]):
            return np.arange(n_rows, dtype=np.int64), np.arange(n_rows, dtype=np.int64)
    return row_of, reps


#: The two hash seeds of :func:`distinct_rows`.
_SEEDS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F)
#: Ids below this are hashed by a table (:func:`_id_hashes`: 8 MiB at most, four kept);
#: larger ones, which no real vocabulary has, are mixed one by one.
MAX_HASHED_IDS = 1 << 19


@lru_cache(maxsize=4)
def _id_hashes(n: int) -> np.ndarray:
    """The two 64-bit hashes of each id below ``n`` (uint64 ``[2, n']``, ``n'`` rounded up
    to a power of two so one table serves a vocabulary's artifacts): a row's hash is then a
    gather and a sum, not a mix per entry (a DFA artifact's rows hold millions of ids).
    Read-only."""
    size = 1 << max(n - 1, 1).bit_length()
    ids = np.arange(size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        out = np.stack([_mix64(ids + np.uint64(seed)) for seed in _SEEDS])
    out.flags.writeable = False
    return out


def _mix64(x: np.ndarray) -> np.ndarray:
    """A 64-bit finaliser (splitmix64's), elementwise on uint64 (wrapping)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def csr_subset(indptr: np.ndarray, token_ids: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of ``rows`` (in that order) of a CSR ``(indptr, token_ids)``."""
    lengths = (indptr[1:] - indptr[:-1])[rows]
    sub_indptr = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths, dtype=np.int64)])
    shift = np.repeat(indptr[:-1][rows] - sub_indptr[:-1], lengths)
    return sub_indptr, token_ids[np.arange(sub_indptr[-1], dtype=np.int64) + shift]


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
