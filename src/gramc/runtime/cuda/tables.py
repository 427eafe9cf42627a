"""A DFA artifact as flat arrays, checked, and uploaded as one ``gramc_dfa_table`` descriptor.

:class:`DFAArrays` is what both batch paths read: the CPU path of
:class:`~gramc.runtime.batch.BatchMatcher` indexes these arrays with numpy, and the device path
uploads them. :meth:`DFAArrays.check` re-asserts every range a kernel relies on (cheap,
vectorised) right before upload: artifacts read from files were already validated by
:mod:`gramc.runtime.reader`, and this keeps an out-of-range index from ever reaching a kernel
whatever produced the arrays. Numpy only; nothing here imports pycuda.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramc.automata.tables import DEAD
from gramc.errors import ArtifactFormatError
from gramc.bitmask import n_words

#: Layout of ``struct gramc_dfa_table`` in dfa.cu: 11 fields of 8 bytes (pointers as int64).
TABLE_FIELDS = ("words", "next_dense", "indptr", "ids", "next", "accept", "eos",
                "n_states", "n_words", "vocab_size", "n_eos")
TABLE_DTYPE = np.dtype([(name, "<i8") for name in TABLE_FIELDS])

#: Bytes of dense next-state table ([states, vocab] int32) uploaded per artifact at most;
#: larger artifacts are stepped by binary search in their CSR rows.
DEVICE_DENSE_BUDGET = 512 << 20

_INT32_MAX = np.iinfo(np.int32).max


@dataclass(eq=False)
class DFAArrays:
    """Every table of a bound DFA artifact that the batch runtime reads.

    Attributes:
        words: uint32 ``[S, W]`` packed mask rows, EOS set in accepting states.
        indptr, ids, next: the CSR token rows (int64 ``[S+1]``, int32, int32); ids ascend
            within a row and EOS is not in them (unless the grammar names it).
        accept: uint8 ``[S]``; eos: int32 end-of-sequence ids; start: the start state.
    """

    words: np.ndarray
    indptr: np.ndarray
    ids: np.ndarray
    next: np.ndarray
    accept: np.ndarray
    eos: np.ndarray
    start: int
    vocab_size: int
    _keys: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def of(cls, artifact: Any) -> "DFAArrays":
        """The arrays of a bound DFA artifact (a lazy table is bound completely first)."""
        table = artifact.token_table
        indptr, ids, nxt = table.csr()
        return cls(
            words=table.packed_words(),
            indptr=indptr,
            ids=ids,
            next=nxt,
            accept=np.ascontiguousarray(artifact.dfa.accept, dtype=np.uint8),
            eos=np.array(table.eos_ids, dtype=np.int32),
            start=int(artifact.dfa.start),
            vocab_size=int(table.vocab_size),
        ).check()

    @property
    def n_states(self) -> int:
        return int(self.words.shape[0])

    @property
    def n_words(self) -> int:
        return int(self.words.shape[1])

    def keys(self) -> np.ndarray:
        """``state * V + token`` of every CSR entry: globally ascending, for searchsorted."""
        if self._keys is None:
            owner = np.repeat(np.arange(self.n_states, dtype=np.int64), np.diff(self.indptr))
            self._keys = owner * self.vocab_size + self.ids
        return self._keys

    def next_states(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The state after each (state, token) pair, DEAD where not allowed (numpy reference).

        ``states`` must be live (>= 0) and ``tokens`` in ``range(vocab_size)``.
        """
        keys = self.keys()
        want = states.astype(np.int64) * self.vocab_size + tokens
        i = np.searchsorted(keys, want)
        i_ok = np.minimum(i, max(len(keys) - 1, 0))
        hit = (i < len(keys)) & (keys[i_ok] == want) if len(keys) else np.zeros(len(want), bool)
        return np.where(hit, self.next[i_ok] if len(keys) else 0, DEAD).astype(np.int32)

    def dense_next(self) -> np.ndarray:
        """The next state of every (state, token), int32 ``[S, V]`` (DEAD where not allowed)."""
        out = np.zeros((self.n_states, self.vocab_size), dtype=np.int32)
        owner = np.repeat(np.arange(self.n_states), np.diff(self.indptr))
        out[owner, self.ids] = self.next
        return out

    def check(self) -> "DFAArrays":
        """Assert every shape and range the kernels index with; ArtifactFormatError if not."""
        S, V = self.words.shape[0] if self.words.ndim == 2 else -1, self.vocab_size
        _require(self.words.dtype == np.uint32 and self.words.ndim == 2 and S >= 1
                 and self.words.shape[1] == n_words(V) and self.words.flags.c_contiguous,
                 f"mask rows must be C-contiguous uint32 [states, {n_words(V)}]")
        _require(0 < V <= _INT32_MAX and S <= _INT32_MAX, "vocabulary or state count out of int32 range")
        _require(self.indptr.dtype == np.int64 and self.indptr.shape == (S + 1,)
                 and self.indptr[0] == 0 and self.indptr[-1] == len(self.ids)
                 and bool((np.diff(self.indptr) >= 0).all()), "CSR indptr is malformed")
        _require(self.ids.dtype == np.int32 and self.next.dtype == np.int32
                 and self.next.shape == self.ids.shape, "CSR ids/next must be int32 of one length")
        _require(_within(self.ids, V) and _within(self.next, S), "CSR token id or next state out of range")
        steps = np.diff(self.ids.astype(np.int64))
        starts = self.indptr[1:-1]
        rising = np.ones(len(steps), dtype=bool)
        rising[starts[(starts > 0) & (starts < len(self.ids))] - 1] = False
        _require(bool((steps[rising] > 0).all()), "CSR token ids must ascend within each row")
        _require(self.accept.dtype == np.uint8 and self.accept.shape == (S,), "accept must be uint8 [states]")
        _require(self.eos.dtype == np.int32 and _within(self.eos, V), "EOS id out of range")
        _require(0 <= self.start < S, "start state out of range")
        _require(not self.words[0].any() and not self.accept[0] and self.indptr[1] == 0,
                 "the dead state 0 must allow nothing (ended rows read its empty mask row)")
        return self


def _within(arr: np.ndarray, hi: int) -> bool:
    return arr.size == 0 or (int(arr.min()) >= 0 and int(arr.max()) < hi)


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ArtifactFormatError(f"DFA table refused before upload: {msg}")


class DeviceTables:
    """The uploaded DFA artifacts of one batch, and their descriptor array on the device.

    Args:
        backend: a :class:`~gramc.runtime.cuda.device.Backend`.
        dense_budget: bytes of dense next-state table allowed per artifact.
    """

    def __init__(self, backend: Any, dense_budget: int = DEVICE_DENSE_BUDGET):
        self.backend = backend
        self.dense_budget = dense_budget
        self._buffers: list[dict[str, Any]] = []  # keeps each artifact's device arrays alive
        self._records = np.zeros(0, dtype=TABLE_DTYPE)
        self.descriptors: Any = None  # device copy of _records

    def __len__(self) -> int:
        return len(self._records)

    def add(self, arrays: DFAArrays) -> int:
        """Upload one artifact's arrays (checked first); returns its table index."""
        arrays.check()
        b = self.backend
        bufs = {"words": b.upload(arrays.words), "indptr": b.upload(arrays.indptr),
                "ids": b.upload(_nonempty(arrays.ids)), "next": b.upload(_nonempty(arrays.next)),
                "accept": b.upload(arrays.accept), "eos": b.upload(_nonempty(arrays.eos))}
        dense_bytes = arrays.n_states * arrays.vocab_size * 4
        bufs["next_dense"] = b.upload(arrays.dense_next()) if dense_bytes <= self.dense_budget else None
        record = np.zeros(1, dtype=TABLE_DTYPE)
        for name in ("words", "next_dense", "indptr", "ids", "next", "accept", "eos"):
            record[name] = b.ptr(bufs[name])
        record["n_states"], record["n_words"] = arrays.n_states, arrays.n_words
        record["vocab_size"], record["n_eos"] = arrays.vocab_size, len(arrays.eos)
        self._buffers.append(bufs)
        self._records = np.concatenate([self._records, record])
        self.descriptors = b.upload(self._records.view(np.int64).reshape(-1))
        return len(self._records) - 1

    @property
    def ptr(self) -> int:
        return self.backend.ptr(self.descriptors)


def _nonempty(arr: np.ndarray) -> np.ndarray:
    """Device allocations of zero bytes are refused by some drivers: pad to one element."""
    return arr if arr.size else np.zeros(1, dtype=arr.dtype)
