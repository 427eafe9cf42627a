"""The payload of a DFA artifact file, checked and decoded.

The DFA section (``dfa.*``) and, when bound, the token table (``tokens.*``): shapes agree,
every index is in range, CSR rows are well formed and sorted, the dead state is dead, every
other state can still complete, and a forced token is one of its state's allowed tokens.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.bind import TokenRows
from gramc.automata.tables import DEAD, DFATable
from gramc.bitmask import n_words
from gramc.formats.limits import ReadLimits
from gramc.limits import RuntimeLimits
from gramc.runtime.artifact import FINGERPRINT_ARTIFACT_VERSION, VocabInfo
from gramc.runtime.dfa_artifact import DFAArtifact
from gramc.runtime.token_table import TokenTable, distinct_token_rows
from gramc.runtime.vocab_bytes import VOCAB_BYTES_ARRAYS, bound_vocab, read_token_bytes
from gramc.vocab import Vocab
from gramc.runtime.validate import (NARROW_FRONTIER, check_arrays, get_field, grouped, in_range, members, no_extra,
                                    require)

DFA_ARRAYS = {
    "dfa.delta": (np.int32, 2),
    "dfa.byte_class": (np.uint8, 1),
    "dfa.token_ids": (np.int32, 1),
    "dfa.accept": (np.bool_, 1),
}
TOKEN_ARRAYS = {
    "tokens.indptr": (np.int64, 1),
    "tokens.ids": (np.int32, 1),
    "tokens.next": (np.int32, 1),
    "tokens.forced": (np.int32, 1),
}


def read_payload(meta: dict, arrays: dict, source: dict, info: VocabInfo | None,
                 limits: ReadLimits, vocab: object = None) -> DFAArtifact:
    """The DFA artifact of a container whose header :mod:`gramc.runtime.reader` has checked
    (``vocab`` is not needed: a DFA artifact's rows are all it uses, but for a ``uniqueItems``
    plan's, which reads token bytes: layout 5 binds them by fingerprint, layout 4 stored them)."""
    dfa = read_dfa(meta, arrays)
    reads_tokens = info is not None and "unique" in source  # a uniqueItems plan reads token bytes
    stores_bytes = reads_tokens and meta["artifact_version"] < FINGERPRINT_ARTIFACT_VERSION  # layout 4
    no_extra(arrays, DFA_ARRAYS, TOKEN_ARRAYS if info else {}, VOCAB_BYTES_ARRAYS if stores_bytes else {})
    if info is None:
        return DFAArtifact(dfa, source)
    in_range("dfa.token_ids", dfa.token_ids, 0, info.size)
    rows = read_rows(arrays, dfa.n_states, info.size)
    distinct = distinct_token_rows(dfa, rows)
    check_derived_rows(len(distinct[1]), info.size, limits, "distinct token rows")
    table = TokenTable.eager(dfa, rows, info.size, info.eos_ids, distinct=distinct)
    known = vocab if isinstance(vocab, Vocab) else None
    tokens = read_token_bytes(arrays, info, known) if stores_bytes else bound_vocab(info, known) if reads_tokens \
        else None
    art = DFAArtifact(dfa, source, info, table, tokens)
    if reads_tokens and tokens is None:
        def attach(vocab: Vocab, limits: RuntimeLimits) -> None:
            art._tokens = vocab

        art._await_vocab(attach)
    return art


def check_derived_rows(n_rows: int, vocab_size: int, limits: ReadLimits, what: str = "states") -> None:
    """The packed token rows a reader derives (``n_rows`` of ``what``) fit the limit."""
    packed = n_rows * n_words(vocab_size) * 4
    require(packed <= limits.max_derived_bytes,
            f"{n_rows} {what} of {vocab_size}-token rows need {packed} bytes, "
            f"over max_derived_bytes={limits.max_derived_bytes} (a larger limit: "
            f"gramc.load(path, limits=ReadLimits(max_derived_bytes=...)))")


def read_dfa(meta: dict, arrays: dict, calls: np.ndarray | None = None) -> DFATable:
    """The DFA section, fully checked. ``calls`` (already checked: a state per state, 0 for
    none) are more edges for the check that every state can reach acceptance: a counted DFA's
    calls, whose items cannot be empty."""
    check_arrays(arrays, DFA_ARRAYS)
    delta, classes = arrays["dfa.delta"], arrays["dfa.byte_class"]
    token_ids, accept = arrays["dfa.token_ids"], arrays["dfa.accept"]
    n_states, n_cols = delta.shape
    n_byte_cols = n_cols - len(token_ids)
    require(n_states >= 1, "dfa.delta has no states (the dead state 0 is required)")
    require(n_byte_cols >= 1, "dfa.delta has fewer columns than special tokens plus one")
    require(classes.shape == (256,), "dfa.byte_class must have 256 entries")
    require(accept.shape == (n_states,), "dfa.accept length differs from the state count")
    in_range("dfa.delta", delta, 0, n_states)
    in_range("dfa.byte_class", classes, 0, n_byte_cols)
    require(bool(np.all(token_ids[1:] > token_ids[:-1])), "dfa.token_ids must be strictly ascending")
    in_range("dfa.token_ids", token_ids, 0, 2**31 - 1)
    require(not delta[DEAD].any() and not accept[DEAD], "state 0 must be the dead state")
    start = get_field(get_field(meta, "dfa", dict), "start", int, "metadata.dfa")
    require(0 <= start < n_states, f"metadata.dfa.start {start} outside [0, {n_states})")
    check_coreachable(delta if calls is None else np.column_stack([delta, calls]), accept)
    return DFATable(delta=delta, byte_class=classes, token_ids=token_ids, accept=accept, start=start)



def check_coreachable(delta: np.ndarray, accept: np.ndarray) -> None:
    """Every state but the dead one must be able to reach an accepting state.

    Masks treat "not dead" as "can still complete"; a trap state would let a matcher allow
    tokens after which the output can never be completed. Linear in the edges: wide
    frontiers step in numpy, narrow ones in Python (each state is expanded once).
    """
    src = np.repeat(np.arange(delta.shape[0]), delta.shape[1])
    order, indptr = grouped(delta.reshape(-1).astype(np.int64), delta.shape[0])
    reach = accept.copy()
    frontier = np.flatnonzero(reach)
    while len(frontier) >= NARROW_FRONTIER:
        found = src[members(order, indptr, frontier)]
        found = np.unique(found[~reach[found]])
        reach[found] = True
        frontier = found
    if len(frontier):
        _reach_in_python(src, order, indptr, reach, frontier)
    reach[DEAD] = True
    bad = np.flatnonzero(~reach)
    require(not len(bad), f"dfa: state {int(bad[0]) if len(bad) else 0} cannot reach an accepting state")


def _reach_in_python(src: np.ndarray, order: np.ndarray, indptr: np.ndarray, reach: np.ndarray,
                     frontier: np.ndarray) -> None:
    """Mark in ``reach`` every state with a path into ``frontier`` (depth-first, each
    state's predecessors read once)."""
    preds, ptr, seen = src[order], indptr.tolist(), bytearray(reach.tobytes())
    stack = frontier.tolist()
    while stack:
        q = stack.pop()
        for p in preds[ptr[q]:ptr[q + 1]].tolist():
            if not seen[p]:
                seen[p] = 1
                stack.append(p)
    reach[:] = np.frombuffer(bytes(seen), dtype=bool)


def read_rows(arrays: dict, n_states: int, vocab_size: int, n_targets: int | None = None) -> TokenRows:
    """The token-table section, fully checked against the DFA's state count and vocabulary
    (next states in ``[1, n_targets)``, ``n_targets`` the state count by default)."""
    check_arrays(arrays, TOKEN_ARRAYS)
    indptr, ids = arrays["tokens.indptr"], arrays["tokens.ids"]
    nxt, forced = arrays["tokens.next"], arrays["tokens.forced"]
    require(indptr.shape == (n_states + 1,), "tokens.indptr must have one entry per state plus one")
    require(forced.shape == (n_states,), "tokens.forced must have one entry per state")
    require(indptr[0] == 0 and indptr[-1] == len(ids), "tokens.indptr must run from 0 to len(tokens.ids)")
    require(bool(np.all(np.diff(indptr) >= 0)), "tokens.indptr must be non-decreasing")
    require(nxt.shape == ids.shape, "tokens.next and tokens.ids differ in length")
    in_range("tokens.ids", ids, 0, vocab_size)
    in_range("tokens.next", nxt, 1, n_targets or n_states)  # an allowed token never leads to the dead state
    in_range("tokens.forced", forced, -1, vocab_size)
    row_start = np.zeros(len(ids), dtype=bool)
    row_start[indptr[:-1][np.diff(indptr) > 0]] = True
    ascending = np.ones(len(ids), dtype=bool)
    ascending[1:] = ids[1:] > ids[:-1]
    require(bool(np.all(ascending | row_start)), "tokens.ids must be strictly ascending within each row")
    _check_forced(indptr, ids, forced)
    return TokenRows(states=np.arange(n_states), indptr=indptr, token_ids=ids, next_state=nxt,
                     forced_token=forced)


def _check_forced(indptr: np.ndarray, ids: np.ndarray, forced: np.ndarray) -> None:
    """A forced token must be one of its state's allowed tokens."""
    for q in np.flatnonzero(forced >= 0):
        row = ids[indptr[q] : indptr[q + 1]]
        i = int(row.searchsorted(forced[q]))
        require(i < len(row) and row[i] == forced[q],
                f"tokens.forced[{q}] = {int(forced[q])} is not an allowed token of state {q}")
