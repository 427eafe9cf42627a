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

#: Layout 2 adds the ``counted`` kind (docs/format/gmask-v1.md, 11.6); ``dfa`` and ``pda``
#: files are still written as layout 1.
SUPPORTED_ARTIFACT_VERSIONS = (1, 2)

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


def read_dfa(meta: dict, arrays: dict, calls: np.ndarray | None = None) -> DFATable:
    """The DFA section, fully checked. ``calls`` (already checked: a state per state, 0 for
    none) are more edges for the check that every state can reach acceptance: a counted DFA's
    calls, whose items cannot be empty."""
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
    _check_coreachable(delta if calls is None else np.column_stack([delta, calls]), accept)
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


def read_rows(arrays: dict, n_states: int, vocab_size: int, n_targets: int | None = None) -> TokenRows:
    """The token-table section, fully checked against the DFA's state count and vocabulary
    (next states in ``[1, n_targets)``, ``n_targets`` the state count by default)."""
    _check_arrays(arrays, _TOKEN_ARRAYS)
    indptr, ids = arrays["tokens.indptr"], arrays["tokens.ids"]
    nxt, forced = arrays["tokens.next"], arrays["tokens.forced"]
    _require(indptr.shape == (n_states + 1,), "tokens.indptr must have one entry per state plus one")
    _require(forced.shape == (n_states,), "tokens.forced must have one entry per state")
    _require(indptr[0] == 0 and indptr[-1] == len(ids), "tokens.indptr must run from 0 to len(tokens.ids)")
    _require(bool(np.all(np.diff(indptr) >= 0)), "tokens.indptr must be non-decreasing")
    _require(nxt.shape == ids.shape, "tokens.next and tokens.ids differ in length")
    _in_range("tokens.ids", ids, 0, vocab_size)
    _in_range("tokens.next", nxt, 1, n_targets or n_states)  # an allowed token never leads to the dead state
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


def _no_extra(arrays: dict, *specs: dict) -> None:
    expected = set().union(*specs)
    extra = sorted(set(arrays) - expected)
    _require(not extra, f"unexpected arrays {extra}")


def read_artifact(meta: dict, arrays: dict):
    """Check a container's contents and decode them into a DFA or PDA artifact."""
    version = _get(meta, "artifact_version", int)
    if version not in SUPPORTED_ARTIFACT_VERSIONS:
        raise ArtifactVersionError((version, 0), f"artifact layout {SUPPORTED_ARTIFACT_VERSIONS}")
    kind = _get(meta, "kind", str)
    _require(kind in ("dfa", "pda", "counted"),
             f"unknown artifact kind {kind!r} (this gramc reads 'dfa', 'pda' and 'counted')")
    _require(kind != "counted" or version >= 2, "the 'counted' kind needs artifact layout 2")
    source = _get(meta, "source", dict)
    info = _read_vocab(meta)
    if kind == "counted":
        from gramc.runtime.counted import read_counted_artifact

        return read_counted_artifact(meta, arrays, source, info)
    return (_read_dfa_artifact if kind == "dfa" else _read_pda_artifact)(meta, arrays, source, info)


def _read_dfa_artifact(meta: dict, arrays: dict, source: dict, info):
    from gramc.runtime.artifact import Artifact
    from gramc.runtime.token_table import TokenTable

    dfa = read_dfa(meta, arrays)
    _no_extra(arrays, _DFA_ARRAYS, _TOKEN_ARRAYS if info else {})
    if info is None:
        return Artifact(dfa, source)
    _in_range("dfa.token_ids", dfa.token_ids, 0, info.size)
    rows = read_rows(arrays, dfa.n_states, info.size)
    return Artifact(dfa, source, info, TokenTable.eager(dfa, rows, info.size, info.eos_ids))


# ---------------------------------------------------------------- PDA artifacts

_PDA_ARRAYS = {
    "pda.delta": (np.int32, 2),
    "pda.byte_class": (np.uint8, 1),
    "pda.token_ids": (np.int32, 1),
    "pda.accept": (np.bool_, 1),
    "pda.node_rule": (np.int32, 1),
    "pda.rule_start": (np.int32, 1),
}
_NODE_ARRAYS = {
    "nodes.accepted": (np.uint32, 2),
    "nodes.unc_indptr": (np.int64, 1),
    "nodes.unc_ids": (np.int32, 1),
    "vocab.bytes": (np.uint8, 1),
    "vocab.lengths": (np.uint16, 1),
    "vocab.special_ids": (np.int32, 1),
}


def read_pda(meta: dict, arrays: dict):
    """The PDA section, fully checked (shapes, ranges, rule structure, productivity)."""
    from gramc.automata.pda_table import PDATable

    _check_arrays(arrays, _PDA_ARRAYS)
    delta, classes = arrays["pda.delta"], arrays["pda.byte_class"]
    token_ids, accept = arrays["pda.token_ids"], arrays["pda.accept"]
    node_rule, rule_start = arrays["pda.node_rule"], arrays["pda.rule_start"]
    n_nodes, n_cols = delta.shape
    n_rules = len(rule_start)
    n_byte_cols = n_cols - len(token_ids) - n_rules
    info = _get(meta, "pda", dict)
    names = _get(info, "rule_names", list, "metadata.pda")
    start_rule = _get(info, "start_rule", int, "metadata.pda")
    depth = _get(info, "depth", int, "metadata.pda")
    _require(n_nodes >= 2 and n_rules >= 1 and n_byte_cols >= 1, "pda.delta has too few nodes or columns")
    _require(classes.shape == (256,), "pda.byte_class must have 256 entries")
    _require(accept.shape == (n_nodes,) and node_rule.shape == (n_nodes,), "pda node arrays differ in length")
    _require(len(names) == n_rules and all(isinstance(n, str) for n in names), "metadata.pda.rule_names must name every rule")
    _require(0 <= start_rule < n_rules and 0 <= depth <= 8, "metadata.pda start_rule or depth out of range")
    _in_range("pda.delta", delta, 0, n_nodes)
    _in_range("pda.byte_class", classes, 0, n_byte_cols)
    _in_range("pda.rule_start", rule_start, 1, n_nodes)
    _require(node_rule[0] == -1 and not delta[DEAD].any() and not accept[DEAD], "node 0 must be the dead node")
    _in_range("pda.node_rule", node_rule[1:], 0, n_rules)
    _require(bool(np.all(node_rule[rule_start] == np.arange(n_rules))), "pda.rule_start nodes must belong to their rules")
    _require(bool(np.all(token_ids[1:] > token_ids[:-1])), "pda.token_ids must be strictly ascending")
    _in_range("pda.token_ids", token_ids, 0, 2**31 - 1)
    src, cols = np.nonzero(delta != DEAD)
    dst = delta[src, cols]
    _require(bool(np.all(node_rule[dst] == node_rule[src])), "pda.delta must stay inside each rule")
    _check_productive(delta, accept, node_rule, rule_start, n_nodes - n_rules if False else n_cols - n_rules)
    return PDATable(delta=delta, byte_class=classes, token_ids=token_ids, accept=accept,
                    node_rule=node_rule, rule_start=rule_start, start_rule=start_rule,
                    rule_names=tuple(names)), depth


def _check_productive(delta, accept, node_rule, rule_start, call_base: int) -> None:
    """Every node must be able to finish its rule, through calls of rules that can finish.

    The Earley runtime treats "some item is left" as "the input can still be completed".
    """
    n_rules = len(rule_start)
    rule_ok = np.zeros(n_rules, dtype=bool)
    while True:
        cols_ok = np.concatenate([np.ones(call_base, dtype=bool), rule_ok])
        reach = accept.copy()
        while True:
            grown = reach | ((delta != DEAD) & reach[delta] & cols_ok).any(axis=1)
            if np.array_equal(grown, reach):
                break
            reach = grown
        new_ok = reach[rule_start]
        if np.array_equal(new_ok, rule_ok):
            break
        rule_ok = new_ok
    reach[DEAD] = True
    bad = np.flatnonzero(~reach)
    _require(not len(bad), f"pda: node {int(bad[0]) if len(bad) else 0} cannot finish its rule")


VOCAB_BYTES_ARRAYS = {
    "vocab.bytes": (np.uint8, 1),
    "vocab.lengths": (np.uint16, 1),
    "vocab.special_ids": (np.int32, 1),
}


def read_token_bytes(arrays: dict, info):
    """The vocabulary stored as token bytes (``vocab.*``), checked against its fingerprint."""
    from gramc.runtime.pda_artifact import unpack_tokens
    from gramc.vocab import Vocab

    _check_arrays(arrays, VOCAB_BYTES_ARRAYS)
    lengths, blob = arrays["vocab.lengths"], arrays["vocab.bytes"]
    _require(lengths.shape == (info.size,) and int(lengths.sum(dtype=np.int64)) == len(blob),
             "vocab.lengths must have one entry per token and add up to len(vocab.bytes)")
    special = arrays["vocab.special_ids"]
    _in_range("vocab.special_ids", special, 0, info.size)
    vocab = Vocab(unpack_tokens(blob, lengths), special_ids=special.tolist(), eos_ids=info.eos_ids)
    _require(vocab.fingerprint == info.fingerprint,
             "the stored token bytes do not match the recorded vocabulary fingerprint")
    return vocab


def _read_pda_artifact(meta: dict, arrays: dict, source: dict, info):
    from gramc.automata.pda_bind import NodeTokens
    from gramc.runtime.pda_artifact import pda_from_parts

    pda, depth = read_pda(meta, arrays)
    _no_extra(arrays, _PDA_ARRAYS, _NODE_ARRAYS if info else {})
    if info is None:
        return pda_from_parts(pda, source, depth, None, None, None, ())
    _check_arrays(arrays, _NODE_ARRAYS)
    _in_range("pda.token_ids", pda.token_ids, 0, info.size)
    vocab = read_token_bytes(arrays, info)
    tokens = vocab.tokens
    acc, indptr, ids = arrays["nodes.accepted"], arrays["nodes.unc_indptr"], arrays["nodes.unc_ids"]
    n = pda.n_nodes - 1
    _require(acc.shape == (n, (info.size + 31) // 32), "nodes.accepted must have one mask row per node")
    _require(indptr.shape == (n + 1,) and indptr[0] == 0 and indptr[-1] == len(ids)
             and bool(np.all(np.diff(indptr) >= 0)), "nodes.unc_indptr must run from 0 to len(nodes.unc_ids)")
    _in_range("nodes.unc_ids", ids, 0, info.size)
    nodes = NodeTokens(accepted=acc, unc_indptr=indptr, unc_ids=ids)
    return pda_from_parts(pda, source, depth, info, nodes, tokens, vocab.special_ids)
