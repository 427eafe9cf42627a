"""Binding a PDA to a vocabulary: per node, the tokens accepted or rejected whatever the stack.

For a node ``n`` of rule ``r``, consider what can be read from ``n`` while ``r`` stays on the
stack (*inside*): bytes of ``r`` itself and of the rules it calls, nested up to ``depth``
calls deep. Where ``r`` may return, the parse continues in a caller that only the stack
knows; here it continues *outside*, in every place that calls ``r`` (and, when those return,
every place that calls them): an over-approximation of any real stack. Both are regular, so
their DFA (the *expanded* automaton, by subset construction over (call path, node, outside)
configurations) can be walked with the token trie like any DFA. A state is *marked* where a
call would go deeper than ``depth``. Then per token:

- accepted: read to its end in a state with an inside configuration. Whatever the stack
  holds, the token is allowed.
- uncertain: read to its end only outside, or passed a marked state: only the real stack
  can tell; the runtime checks these few with the Earley parser.
- rejected: everything else. No stack can rescue it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gramc.automata.bind import STATE_CHUNK, walk_states
from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD
from gramc.automata.trie import TokenTrie
from gramc.runtime.bitmask import pack_rows

#: Calls expanded inside a node's region (deeper calls make tokens uncertain).
DEFAULT_DEPTH = 2

Config = tuple[tuple[int, ...], int, bool]  # (return nodes of calls taken, node, outside)


@dataclass(frozen=True, eq=False)
class ExpandedDFA:
    """The expanded automaton: ``delta`` over the PDA's byte and token columns, ``marker`` and
    ``inside`` per state, and ``start[n]`` the state of node ``n`` (state 0 is dead)."""

    delta: np.ndarray
    marker: np.ndarray
    inside: np.ndarray
    start: np.ndarray


#: States of the expanded automaton before a shallower expansion is tried.
MAX_EXPANDED_STATES = 50_000


def expand(table: PDATable, depth: int = DEFAULT_DEPTH, max_states: int = MAX_EXPANDED_STATES) -> ExpandedDFA:
    """Subset construction of every node's region (see the module docstring).

    When the automaton would exceed ``max_states``, the expansion is retried with fewer
    calls expanded (down to none): masks stay exact, only more tokens become uncertain.
    """
    for d in range(depth, -1, -1):
        try:
            return _expand(table, d, max_states)
        except _TooLarge:
            continue
    from gramc.errors import LimitExceededError

    raise LimitExceededError("max_expanded_states", max_states, max_states,
                             "the grammar's rule regions are too large to precompute")


class _TooLarge(Exception):
    pass


def _expand(table: PDATable, depth: int, max_states: int) -> ExpandedDFA:
    n_cols = table.n_byte_classes + len(table.token_ids)
    rows = table.delta[:, :n_cols].tolist()
    live = [[c for c, t in enumerate(row) if t != DEAD] for row in rows]
    calls, accept, rule_start = table.calls(), table.accept.tolist(), table.rule_start.tolist()
    node_rule = table.node_rule.tolist()
    returns: dict[int, list[int]] = {}
    for callees in calls:
        for r, ret in callees:
            returns.setdefault(r, []).append(ret)

    def close(configs: set[Config]) -> tuple[frozenset[Config], bool]:
        out: set[Config] = set()
        marked, work = False, list(configs)
        while work:
            cfg = work.pop()
            if cfg in out:
                continue
            out.add(cfg)
            path, n, outside = cfg
            for r, ret in calls[n]:
                if len(path) < depth and not outside:
                    work.append((path + (ret,), rule_start[r], outside))
                else:  # too deep, or outside (kept shallow: it only filters uncertain tokens)
                    marked = True
            if accept[n]:
                if path:
                    work.append((path[:-1], path[-1], outside))
                else:
                    work.extend(((), ret, True) for ret in returns.get(node_rule[n], ()))
        return frozenset(out), marked

    index: dict[frozenset[Config], int] = {frozenset(): DEAD}
    marks, insides, table_rows, work = [False], [False], [[DEAD] * n_cols], []

    def state_of(configs: set[Config]) -> int:
        key, marked = close(configs)
        if key not in index:
            if len(index) >= max_states:
                raise _TooLarge
            index[key] = len(marks)
            marks.append(marked)
            insides.append(any(not outside for _, _, outside in key))
            table_rows.append(None)
            work.append(key)
        return index[key]

    start = [DEAD] + [state_of({((), n, False)}) for n in range(1, table.n_nodes)]
    while work:
        key = work.pop()
        moves: dict[int, set[Config]] = {}
        for path, n, outside in key:
            for c in live[n]:
                moves.setdefault(c, set()).add((path, rows[n][c], outside))
        row = [DEAD] * n_cols
        for c, targets in moves.items():
            row[c] = state_of(targets)
        table_rows[index[key]] = row
    return ExpandedDFA(np.array(table_rows, dtype=np.int32), np.array(marks, dtype=bool),
                       np.array(insides, dtype=bool), np.array(start, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class NodeTokens:
    """Per PDA node: packed bitmask rows of accepted tokens, CSR rows of uncertain ids."""

    accepted: np.ndarray  # uint32 [N, W]
    unc_indptr: np.ndarray  # int64 [N + 1]
    unc_ids: np.ndarray  # int32, ascending within each row


def bind_nodes(table: PDATable, trie: TokenTrie, nodes: np.ndarray, depth: int = DEFAULT_DEPTH,
               expanded: ExpandedDFA | None = None) -> NodeTokens:
    """Accepted and uncertain tokens of each of ``nodes`` (see the module docstring)."""
    x = expanded or expand(table, depth)
    V = trie.vocab_size
    nbc = table.n_byte_classes
    acc_parts, unc_rows = [], []
    for lo in range(0, len(nodes), STATE_CHUNK):
        chunk = np.asarray(nodes[lo : lo + STATE_CHUNK], dtype=np.int64)
        states = x.start[chunk]
        emits, hits = walk_states(x.delta, table.byte_class, trie, states, x.marker)
        accepted = np.zeros((len(chunk), V), dtype=bool)
        unc = _ranges_to_mask(hits, len(chunk), trie)
        srows, scols = np.nonzero(x.delta[states][:, nbc:] != DEAD)
        ends = [(r, t, s) for r, t, s, _ in emits]
        ends.append((srows, table.token_ids[scols], x.delta[states[srows], nbc + scols]))
        for rows, tokens, end in ends:
            inside = x.inside[end]
            accepted[rows[inside], tokens[inside]] = True
            unc[rows[~inside], tokens[~inside]] = True
        root = x.marker[states]
        if len(table.token_ids):
            unc[np.ix_(root, table.token_ids)] = True
        unc &= ~accepted
        acc_parts.append(accepted)
        unc_rows.extend(np.flatnonzero(u).astype(np.int32) for u in unc)
    accepted = np.concatenate(acc_parts) if acc_parts else np.zeros((0, V), dtype=bool)
    counts = np.array([len(u) for u in unc_rows], dtype=np.int64)
    ids = np.concatenate(unc_rows) if unc_rows else np.zeros(0, dtype=np.int32)
    return NodeTokens(
        accepted=_pack(accepted, V),
        unc_indptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        unc_ids=ids,
    )


def _ranges_to_mask(hits, n_rows: int, trie: TokenTrie) -> np.ndarray:
    """Bool [n_rows, V]: tokens at the sorted positions covered by the hit ranges."""
    n_sorted = len(trie.sorted_ids)
    diff = np.zeros((n_rows, n_sorted + 1), dtype=np.int32)
    for rows, lo, hi in hits:
        np.add.at(diff, (rows, lo), 1)
        np.add.at(diff, (rows, hi), -1)
    covered = np.cumsum(diff[:, :n_sorted], axis=1) > 0
    out = np.zeros((n_rows, trie.vocab_size), dtype=bool)
    out[:, trie.sorted_ids] = covered
    return out


def _pack(dense: np.ndarray, V: int) -> np.ndarray:
    rows, cols = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=dense.shape[0]))])
    return pack_rows(indptr, cols, V)
