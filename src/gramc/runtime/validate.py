"""Validation of an artifact's sections read from an untrusted ``.gmask`` file.

The container layer has already checked the framing, the hash, dtypes and shapes of each
array. Here every array is checked against its meaning: shapes agree with each other, every
index is in range, CSR rows are well formed and sorted, the dead state is dead. Any failure is
an :class:`~gramc.errors.ArtifactFormatError` naming the section and the problem.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gramc.automata.bind import TokenRows
from gramc.automata.tables import DEAD, DFATable
from gramc.errors import ArtifactFormatError, ArtifactVersionError

SUPPORTED_ARTIFACT_VERSIONS = (1,)

_DFA_ARRAYS = {
    "dfa.delta": (np.int32, 2),
    "dfa.byte_class": (np.uint8, 1),
    "dfa.token_ids": (np.int32, 1),
    "dfa.accept": (np.bool_, 1),
}
_TOKEN_ARRAYS = {
    "tokens.indptr": (np.int64, 1),
    "tokens.ids": (np.int32, 1),
    "tokens.next": (np.int32, 1),
    "tokens.forced": (np.int32, 1),
}


def _fail(msg: str) -> None:
    raise ArtifactFormatError(msg)


def _get(meta: dict, key: str, kind: type | tuple[type, ...], where: str = "metadata") -> Any:
    value = meta.get(key) if isinstance(meta, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        _fail(f"{where}: {key!r} is missing or not a {getattr(kind, '__name__', kind)}")
    return value


def _require(cond: bool, msg: str) -> None:
    if not cond:
        _fail(msg)


def _check_arrays(arrays: dict, spec: dict) -> None:
    for name, (dtype, ndim) in spec.items():
        arr = arrays.get(name)
        _require(arr is not None, f"missing array {name!r}")
        _require(arr.dtype == dtype and arr.ndim == ndim,
                 f"array {name!r}: expected {np.dtype(dtype).name} with {ndim} dimension(s), "
                 f"got {arr.dtype.name} with shape {list(arr.shape)}")


def _in_range(name: str, arr: np.ndarray, lo: int, hi: int) -> None:
    """Every value of ``arr`` in ``[lo, hi)``, or an error naming the first bad one."""
    if arr.size:
        bad = np.flatnonzero((arr < lo) | (arr >= hi))
        if len(bad):
            i = int(bad[0])
            _fail(f"array {name!r}: value {int(arr.reshape(-1)[i])} at flat index {i} "
                  f"is outside [{lo}, {hi})")


def read_dfa(meta: dict, arrays: dict) -> DFATable:
    """The DFA section, fully checked."""
    _check_arrays(arrays, _DFA_ARRAYS)
    delta, classes = arrays["dfa.delta"], arrays["dfa.byte_class"]
    token_ids, accept = arrays["dfa.token_ids"], arrays["dfa.accept"]
    n_states, n_cols = delta.shape
    n_byte_cols = n_cols - len(token_ids)
    _require(n_states >= 1, "dfa.delta has no states (the dead state 0 is required)")
    _require(n_byte_cols >= 1, "dfa.delta has fewer columns than special tokens plus one")
    _require(classes.shape == (256,), "dfa.byte_class must have 256 entries")
    _require(accept.shape == (n_states,), "dfa.accept length differs from the state count")
    _in_range("dfa.delta", delta, 0, n_states)
    _in_range("dfa.byte_class", classes, 0, n_byte_cols)
    _require(bool(np.all(token_ids[1:] > token_ids[:-1])), "dfa.token_ids must be strictly ascending")
    _in_range("dfa.token_ids", token_ids, 0, 2**31 - 1)
    _require(not delta[DEAD].any() and not accept[DEAD], "state 0 must be the dead state")
    start = _get(_get(meta, "dfa", dict), "start", int, "metadata.dfa")
    _require(0 <= start < n_states, f"metadata.dfa.start {start} outside [0, {n_states})")
    _check_coreachable(delta, accept)
    return DFATable(delta=delta, byte_class=classes, token_ids=token_ids, accept=accept, start=start)


def _check_coreachable(delta: np.ndarray, accept: np.ndarray) -> None:
    """Every state but the dead one must be able to reach an accepting state.

    Masks treat "not dead" as "can still complete"; a trap state would let a matcher allow
    tokens after which the output can never be completed.
    """
    src = np.repeat(np.arange(delta.shape[0]), delta.shape[1])
    dst = delta.reshape(-1).astype(np.int64)
    order = np.argsort(dst, kind="stable")
    preds = src[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=delta.shape[0]))])
    reach = accept.copy()
    frontier = np.flatnonzero(reach)
    while len(frontier):
        counts = indptr[frontier + 1] - indptr[frontier]
        owner = np.repeat(np.arange(len(frontier)), counts)
        first = np.cumsum(counts) - counts
        found = preds[indptr[frontier][owner] + np.arange(int(counts.sum())) - first[owner]]
        found = np.unique(found[~reach[found]])
        reach[found] = True
        frontier = found
    reach[DEAD] = True
    bad = np.flatnonzero(~reach)
    _require(not len(bad), f"dfa: state {int(bad[0]) if len(bad) else 0} cannot reach an accepting state")


def read_rows(arrays: dict, n_states: int, vocab_size: int) -> TokenRows:
    """The token-table section, fully checked against the DFA's state count and vocabulary."""
    _check_arrays(arrays, _TOKEN_ARRAYS)
    indptr, ids = arrays["tokens.indptr"], arrays["tokens.ids"]
    nxt, forced = arrays["tokens.next"], arrays["tokens.forced"]
    _require(indptr.shape == (n_states + 1,), "tokens.indptr must have one entry per state plus one")
    _require(forced.shape == (n_states,), "tokens.forced must have one entry per state")
    _require(indptr[0] == 0 and indptr[-1] == len(ids), "tokens.indptr must run from 0 to len(tokens.ids)")
    _require(bool(np.all(np.diff(indptr) >= 0)), "tokens.indptr must be non-decreasing")
    _require(nxt.shape == ids.shape, "tokens.next and tokens.ids differ in length")
    _in_range("tokens.ids", ids, 0, vocab_size)
    _in_range("tokens.next", nxt, 1, n_states)  # an allowed token never leads to the dead state
    _in_range("tokens.forced", forced, -1, vocab_size)
    row_start = np.zeros(len(ids), dtype=bool)
    row_start[indptr[:-1][np.diff(indptr) > 0]] = True
    ascending = np.ones(len(ids), dtype=bool)
    ascending[1:] = ids[1:] > ids[:-1]
    _require(bool(np.all(ascending | row_start)), "tokens.ids must be strictly ascending within each row")
    _check_forced(indptr, ids, forced)
    return TokenRows(states=np.arange(n_states), indptr=indptr, token_ids=ids, next_state=nxt,
                     forced_token=forced)


def _check_forced(indptr: np.ndarray, ids: np.ndarray, forced: np.ndarray) -> None:
    """A forced token must be one of its state's allowed tokens."""
    for q in np.flatnonzero(forced >= 0):
        row = ids[indptr[q] : indptr[q + 1]]
        i = int(row.searchsorted(forced[q]))
        _require(i < len(row) and row[i] == forced[q],
                 f"tokens.forced[{q}] = {int(forced[q])} is not an allowed token of state {q}")


def _read_vocab(meta: dict):
    from gramc.runtime.artifact import VocabInfo

    v = meta.get("vocab")
    if v is None:
        return None
    _require(isinstance(v, dict), "metadata.vocab must be a map or nil")
    size = _get(v, "size", int, "metadata.vocab")
    eos = _get(v, "eos_ids", list, "metadata.vocab")
    _require(all(isinstance(e, int) and 0 <= e < size for e in eos),
             "metadata.vocab.eos_ids must be token ids below the vocabulary size")
    _require(0 < size < 2**31, "metadata.vocab.size out of range")
    return VocabInfo(
        name=_get(v, "name", str, "metadata.vocab"),
        fingerprint=_get(v, "fingerprint", str, "metadata.vocab"),
        size=size,
        eos_ids=tuple(eos),
    )


def read_artifact(meta: dict, arrays: dict):
    """Check and decode a container's contents: (dfa, source meta, vocab info, rows)."""
    version = _get(meta, "artifact_version", int)
    if version not in SUPPORTED_ARTIFACT_VERSIONS:
        raise ArtifactVersionError((version, 0), f"artifact layout {SUPPORTED_ARTIFACT_VERSIONS}")
    kind = _get(meta, "kind", str)
    _require(kind == "dfa", f"unknown artifact kind {kind!r} (this gramc reads 'dfa')")
    source = _get(meta, "source", dict)
    dfa = read_dfa(meta, arrays)
    info = _read_vocab(meta)
    rows = None
    if info is not None:
        _in_range("dfa.token_ids", dfa.token_ids, 0, info.size)
        rows = read_rows(arrays, dfa.n_states, info.size)
    expected = set(_DFA_ARRAYS) | (set(_TOKEN_ARRAYS) if info else set())
    extra = sorted(set(arrays) - expected)
    _require(not extra, f"unexpected arrays {extra}")
    return dfa, source, info, rows
