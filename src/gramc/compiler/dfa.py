"""NFA -> minimal DFA: byte equivalence classes, subset construction, minimisation.

The result is a :class:`~gramc.automata.tables.DFATable` in canonical form: state 0 is the
dead state, the start state is 1 (unless the language is empty), and the other states are
numbered in breadth-first order over the columns. The same language therefore always gives
the same table, whatever the frontend or the NFA looked like, which keeps artifacts
deterministic and lets tests compare automata by equality.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from gramc.automata.tables import DEAD, DFATable
from gramc.compiler.ir import Grammar
from gramc.compiler.nfa import NFA, build_nfa
from gramc.limits import DEFAULT_LIMITS, Deadline, Limits


def mask_members(mask: int) -> np.ndarray:
    """A 256-bit byte mask as a 0/1 array indexed by byte."""
    raw = np.frombuffer(mask.to_bytes(32, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little").astype(np.int64)


def byte_classes(masks: set[int]) -> np.ndarray:
    """The coarsest partition of 0..255 that no mask splits: uint8 class id per byte.

    Classes are numbered in order of their smallest byte, so the result is canonical.
    """
    ids = np.zeros(256, dtype=np.int64)
    for mask in sorted(masks):
        ids = ids * 2 + mask_members(mask)
        _, ids = np.unique(ids, return_inverse=True)
    _, first = np.unique(ids, return_index=True)
    order = np.argsort(np.argsort(first))  # rank classes by their smallest byte
    return order[ids].astype(np.uint8)


def _subset_construction(nfa: NFA, classes: np.ndarray, token_ids: list[int], n_calls: int,
                         limits: Limits, deadline: Deadline):
    """Reachable subsets of the NFA as a dense table.

    Columns: the byte classes, then one per id of ``token_ids``, then one per call target
    ``0..n_calls-1``.
    """
    n_classes = int(classes.max()) + 1
    token_col = {t: n_classes + i for i, t in enumerate(token_ids)}
    call_base = n_classes + len(token_ids)
    mask_cols: dict[int, list[int]] = {}
    for mask in set(nfa.cls) - {0}:
        mask_cols[mask] = np.unique(classes[mask_members(mask) == 1]).tolist()

    start = nfa.closure([nfa.start])
    index = {frozenset(): DEAD, start: 1}
    subsets = [frozenset(), start]
    rows: list[dict[int, int]] = [{}, {}]
    accepting = [False, nfa.accept in start]
    work = deque([start])
    while work:
        subset = work.popleft()
        row = rows[index[subset]]
        moves: dict[int, set[int]] = {}
        for s in subset:
            if nfa.cls[s]:
                for c in mask_cols[nfa.cls[s]]:
                    moves.setdefault(c, set()).add(nfa.nxt[s])
            elif nfa.tok[s] >= 0:
                moves.setdefault(token_col[nfa.tok[s]], set()).add(nfa.nxt[s])
            elif nfa.call[s] >= 0:
                moves.setdefault(call_base + nfa.call[s], set()).add(nfa.nxt[s])
        for col, targets in moves.items():
            target = nfa.closure(targets)
            if target not in index:
                index[target] = len(subsets)
                subsets.append(target)
                rows.append({})
                accepting.append(nfa.accept in target)
                work.append(target)
                if len(subsets) % 1024 == 0:
                    limits.check("max_dfa_states", len(subsets))
                    deadline.check()
            row[col] = index[target]
    limits.check("max_dfa_states", len(subsets))
    delta = np.zeros((len(rows), call_base + n_calls), dtype=np.int32)
    for s, row in enumerate(rows):
        for col, t in row.items():
            delta[s, col] = t
    return delta, np.array(accepting, dtype=bool)


def minimize(delta: np.ndarray, accept: np.ndarray, deadline: Deadline) -> np.ndarray:
    """Myhill-Nerode classes by partition refinement (Moore), vectorised with numpy.

    Returns the block id of every state; the dead state 0 shares its block with every state
    that cannot reach acceptance. Deep automata (long counted repetitions) need one round
    per level, so rounds compare 64-bit hashes of the signatures instead of sorting rows;
    the result is then verified to be a congruence that respects acceptance, which makes it
    language-preserving whatever the hashes did, and recomputed exactly if it is not.
    """
    block = _refine(delta, accept, deadline, hashed=True)
    if _is_congruence(delta, accept, block):
        return block
    return _refine(delta, accept, deadline, hashed=False)


_WEIGHTS = np.random.default_rng(0x6D6173).integers(1, 2**63, size=4096, dtype=np.uint64) | np.uint64(1)


def _refine(delta: np.ndarray, accept: np.ndarray, deadline: Deadline, hashed: bool) -> np.ndarray:
    block = accept.astype(np.int64)
    n_blocks = len(np.unique(block))
    cols = delta.shape[1] + 1
    weights = _WEIGHTS[:cols] if hashed and cols <= len(_WEIGHTS) else None
    while True:
        deadline.check()
        signature = np.concatenate([block[:, None], block[delta]], axis=1)
        if weights is not None:
            keys = (signature.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
            _, new_block = np.unique(keys, return_inverse=True)
        else:
            _, new_block = np.unique(signature, axis=0, return_inverse=True)
        new_block = new_block.reshape(-1)
        new_n = int(new_block.max()) + 1
        if new_n == n_blocks:
            return new_block
        block, n_blocks = new_block, new_n


def _is_congruence(delta: np.ndarray, accept: np.ndarray, block: np.ndarray) -> bool:
    """Do all states of each block agree on acceptance and on the blocks they move to?"""
    rep = np.zeros(int(block.max()) + 1, dtype=np.int64)
    rep[block] = np.arange(len(block))
    mine, theirs = rep[block], np.arange(len(block))
    return bool(np.array_equal(accept[mine], accept[theirs])
                and np.array_equal(block[delta[mine]], block[delta[theirs]]))


def canonical(delta: np.ndarray, accept: np.ndarray, block: np.ndarray, start: int) -> tuple:
    """Quotient by ``block`` and renumber: dead = 0, start = 1, then breadth-first."""
    n_blocks = int(block.max()) + 1
    rep = np.zeros(n_blocks, dtype=np.int64)
    rep[block[::-1]] = np.arange(len(block) - 1, -1, -1)
    q_delta = block[delta[rep]]
    q_accept = accept[rep]
    dead_block, start_block = int(block[DEAD]), int(block[start])
    order = {dead_block: 0}
    if start_block != dead_block:
        queue = deque([start_block])
        order[start_block] = 1
        while queue:
            b = queue.popleft()
            for t in q_delta[b]:
                t = int(t)
                if t not in order:
                    order[t] = len(order)
                    queue.append(t)
    old = np.array(sorted(order, key=order.get), dtype=np.int64)
    renumber = np.zeros(n_blocks, dtype=np.int32)
    renumber[old] = np.arange(len(old), dtype=np.int32)
    new_delta = renumber[q_delta[old]].astype(np.int32)
    return new_delta, q_accept[old], (1 if start_block != dead_block else DEAD)


def merge_byte_columns(delta: np.ndarray, classes: np.ndarray, n_byte_classes: int):
    """Merge byte classes whose columns became identical after minimisation."""
    byte_cols = delta[:, :n_byte_classes]
    _, first, inverse = np.unique(byte_cols, axis=1, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    inverse = order[inverse.reshape(-1)]
    keep = np.sort(first)
    new_delta = np.concatenate([byte_cols[:, keep], delta[:, n_byte_classes:]], axis=1)
    return np.ascontiguousarray(new_delta, dtype=np.int32), inverse[classes].astype(np.uint8)


def determinize(nfa: NFA, classes: np.ndarray, token_ids: list[int], n_calls: int,
                limits: Limits, deadline: Deadline) -> tuple[np.ndarray, np.ndarray, int]:
    """The canonical minimal DFA of ``nfa`` over fixed columns: (delta, accept, start)."""
    delta, accept = _subset_construction(nfa, classes, token_ids, n_calls, limits, deadline)
    block = minimize(delta, accept, deadline)
    return canonical(delta, accept, block, start=1)


def build_dfa(grammar: Grammar, limits: Limits = DEFAULT_LIMITS) -> DFATable:
    """The canonical minimal DFA of a non-recursive grammar."""
    deadline = Deadline(limits.max_compile_seconds)
    nfa = build_nfa(grammar, limits)
    classes = byte_classes(set(nfa.cls) - {0})
    token_ids = sorted({t for t in nfa.tok if t >= 0})
    delta, accept, start = determinize(nfa, classes, token_ids, 0, limits, deadline)
    delta, classes = merge_byte_columns(delta, classes, int(classes.max()) + 1)
    return DFATable(delta=delta, byte_class=classes, token_ids=np.array(token_ids, dtype=np.int32),
                    accept=accept, start=start)
