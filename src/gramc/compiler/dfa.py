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
from gramc.errors import BackendUnavailableError
from gramc.limits import DEFAULT_LIMITS, Deadline, Limits


def mask_matrix(masks: list[int]) -> np.ndarray:
    """256-bit byte masks as a bool matrix, a row per mask and a column per byte."""
    raw = np.frombuffer(b"".join(m.to_bytes(32, "little") for m in masks), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little").reshape(len(masks), 256).astype(bool)


def byte_classes(masks: set[int]) -> np.ndarray:
    """The coarsest partition of 0..255 that no mask splits: uint8 class id per byte (bytes
    in the same masks share a class).

    Classes are numbered in order of their smallest byte, so the result is canonical.
    """
    if not masks:
        return np.zeros(256, dtype=np.uint8)
    in_masks = np.packbits(mask_matrix(list(masks)), axis=0).T  # per byte, the masks holding it
    seen: dict[bytes, int] = {}  # bytes in order: a class is numbered at its smallest byte
    return np.array([seen.setdefault(row.tobytes(), len(seen)) for row in in_masks], dtype=np.uint8)


#: Closures kept by target set during one subset construction (a bound on its memory).
MAX_CACHED_CLOSURES = 100_000


#: Bytes per cell of a dense transition table while a DFA is built: the int32 tables of the
#: subset construction, minimisation and the canonical renumbering (3 x 4), and
#: minimisation's reverse edges (an int64 sort order and int64 predecessor ids, 2 x 8).
TABLE_CELL_BYTES = 3 * 4 + 2 * 8


#: Bytes a subset's NFA state costs held in Python sets (the subset, and the target set its
#: closure was cached under): frozenset slots at their load factor, twice.
SUBSET_ENTRY_BYTES = 64
#: NFA states added to the subsets between two checks of ``max_memory``.
SUBSET_CHECK_EVERY = 1 << 20


def _check_table_memory(n_states: int, n_cols: int, limits: Limits, held: int = 0) -> None:
    """``max_memory`` against the dense int32 tables of ``n_states`` states and ``held``
    bytes that are alive with them (the subsets, the automata built before)."""
    limits.check_memory(held + TABLE_CELL_BYTES * n_states * n_cols,
                        f"the transition tables of {n_states:,} DFA states x {n_cols} columns"
                        + (f", with {held:,} bytes held beside them" if held else ""))


def subset_table(nfa: NFA, classes: np.ndarray, token_ids: list[int], calls: list[int],
                 limits: Limits, deadline: Deadline, held: int = 0, what: str = "the DFA"):
    """Reachable subsets of the NFA as a dense table ``(delta, accept)``; state 0 is the empty
    set (DEAD), 1 the start's closure.

    Columns: the byte classes, then one per id of ``token_ids``, then one per call target of
    ``calls`` (ascending; the NFA calls no other). ``max_memory`` bounds the subsets, the
    tables and ``held`` (bytes the caller keeps alive meanwhile) together; ``what`` names the
    DFA in a limit's message. Two constructions give the same sets, chosen here:

    - compiled (:mod:`gramc.compiler.subsets`) where numba is installed: sets as sorted
      runs of one int32 pool, each NFA state's closure made once;
    - otherwise :func:`_subsets_in_python`, sets as frozensets.

    The numbering of the sets may differ; minimisation and :func:`canonical` make the same
    table of both.
    """
    try:
        from gramc.compiler.subsets import Subsets
    except BackendUnavailableError:  # no numba: it is optional for compiling
        return _subsets_in_python(nfa, classes, token_ids, calls, limits, deadline, held, what)
    return _subsets_compiled(Subsets, nfa, classes, token_ids, calls, limits, deadline, held, what)


def _columns(classes: np.ndarray, token_ids: list[int], calls: list[int]):
    """The table's columns: (column per special token id, column per call target, total
    columns)."""
    n_classes = int(classes.max()) + 1
    token_col = {t: n_classes + i for i, t in enumerate(token_ids)}
    call_base = n_classes + len(token_ids)
    call_col = {c: call_base + i for i, c in enumerate(calls)}
    return token_col, call_col, call_base + len(calls)


def _mask_columns(masks: list[int], classes: np.ndarray) -> np.ndarray:
    """Per mask of ``masks``, the byte-class columns it holds (a bool matrix): ``classes``
    must be ones no mask splits."""
    _, first_byte = np.unique(classes, return_index=True)
    return mask_matrix(masks)[:, first_byte]


#: New DFA states the compiled construction finds between two checks of the limits (or
#: :data:`SUBSET_CHECK_EVERY` NFA states added to its sets).
COMPILED_CHUNK = 1024


def _subsets_compiled(subsets_cls, nfa: NFA, classes: np.ndarray, token_ids: list[int], calls: list[int],
                      limits: Limits, deadline: Deadline, held: int, what: str):
    """:func:`subset_table` by :class:`gramc.compiler.subsets.Subsets`, its limits checked
    every :data:`COMPILED_CHUNK` new states."""
    token_col, call_col, n_cols = _columns(classes, token_ids, calls)
    n = nfa.n_states
    kind = np.full(n, 3, dtype=np.int8)
    mask_ids: dict[int, int] = {}
    mask = np.array([mask_ids.setdefault(m, len(mask_ids)) if m else -1 for m in nfa.cls], dtype=np.int64)
    tok_col = [token_col[t] if t >= 0 else -1 for t in nfa.tok]
    col = np.array([t if t >= 0 else (call_col[c] if c >= 0 else -1) for t, c in zip(tok_col, nfa.call)],
                   dtype=np.int64)
    eps_len = np.fromiter(map(len, nfa.eps), dtype=np.int64, count=n)
    kind[col >= 0] = 2
    kind[mask >= 0] = 1
    kind[eps_len > 0] = 0
    rows, cols = np.nonzero(_mask_columns(list(mask_ids), classes))  # by mask, then column
    mask_ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(mask_ids)))]).astype(np.int64)
    mask_cols = cols.astype(np.int64)
    eps_ptr = np.concatenate([[0], np.cumsum(eps_len)]).astype(np.int64)
    eps_idx = np.fromiter((t for e in nfa.eps for t in e), dtype=np.int64, count=int(eps_ptr[-1]))
    work = subsets_cls(kind, mask, col, np.asarray(nfa.nxt, dtype=np.int64), eps_ptr, eps_idx, mask_ptr,
                       mask_cols, n_cols, nfa.start, nfa.accept)
    while True:
        work.run(COMPILED_CHUNK, SUBSET_CHECK_EVERY)
        limits.check("max_dfa_states", work.n_states, what)
        if work.memory() > TABLE_CELL_BYTES * work.n_states * n_cols:  # name the larger part first
            limits.check_memory(held + work.memory(),
                                f"the NFA state sets of {work.n_states:,} DFA states ({work.entries:,} NFA "
                                "states in all) in the subset construction"
                                + (f", with {held:,} bytes held beside them" if held else ""))
        _check_table_memory(work.n_states, n_cols, limits, held + work.memory())
        if work.finished():
            return work.table()
        deadline.check()


def _subsets_in_python(nfa: NFA, classes: np.ndarray, token_ids: list[int], calls: list[int],
                       limits: Limits, deadline: Deadline, held: int = 0, what: str = "the DFA"):
    """:func:`subset_table` with frozensets (the construction without numba)."""
    token_col, call_col, n_cols = _columns(classes, token_ids, calls)
    # Each byte mask as the set of its class columns, bit c for column c.
    masks = sorted(set(nfa.cls) - {0})
    mask_bits = {mask: sum(1 << c for c in np.flatnonzero(row).tolist())
                 for mask, row in zip(masks, _mask_columns(masks, classes))}

    start = nfa.closure([nfa.start])
    index = {frozenset(): DEAD, start: 1}
    subsets = [frozenset(), start]
    # The table's edges as (state, column group, target); a group is a set of columns, bit c
    # for column c, numbered in ``groups`` (the same few groups recur in most states).
    edge_state: list[int] = []
    edge_group: list[int] = []
    edge_target: list[int] = []
    group_ids: dict[int, int] = {}
    accepting = [False, nfa.accept in start]
    work = deque([start])
    # Closures by target set: the classes of one byte set move alike, and many subsets move
    # to the same NFA states.
    closed: dict[frozenset, frozenset] = {}
    entries = checked = len(start)  # NFA states in the subsets: an ambiguous repetition makes
    n_cls, n_tok, n_call, n_nxt = nfa.cls, nfa.tok, nfa.call, nfa.nxt
    while work:  # them grow with the DFA (a{1,n} nested: n^2 / 2 in all)
        subset = work.popleft()
        here = index[subset]
        by_mask: dict[int, list[int]] = {}
        moves: dict[int, set[int]] = {}
        for s in subset:
            mask = n_cls[s]
            if mask:
                by_mask.setdefault(mask, []).append(n_nxt[s])
            elif n_tok[s] >= 0:
                moves.setdefault(token_col[n_tok[s]], set()).add(n_nxt[s])
            elif n_call[s] >= 0:
                moves.setdefault(call_col[n_call[s]], set()).add(n_nxt[s])
        # The byte columns move by groups: the columns the same masks hold go to the same
        # NFA states, so each group's target is made once (a string body's mask holds most
        # columns).
        groups = [(bits, frozenset(targets)) for bits, targets in _column_groups(by_mask, mask_bits)]
        groups += [(1 << col, frozenset(targets)) for col, targets in moves.items()]
        for bits, key in groups:
            target = closed.get(key)
            if target is None:
                if len(closed) >= MAX_CACHED_CLOSURES:
                    closed.clear()
                target = closed[key] = nfa.closure(key)
            if target not in index:
                index[target] = len(subsets)
                subsets.append(target)
                accepting.append(nfa.accept in target)
                work.append(target)
                entries += len(target)
                if entries - checked >= SUBSET_CHECK_EVERY:
                    checked = entries
                    limits.check_memory(held + SUBSET_ENTRY_BYTES * entries, f"the NFA state sets of "
                                        f"{len(subsets):,} DFA states ({entries:,} NFA states in all) in the "
                                        "subset construction" + (f", with {held:,} bytes held beside them"
                                                                 if held else ""))
                    deadline.check()
                if len(subsets) % 1024 == 0:
                    limits.check("max_dfa_states", len(subsets), what)
                    _check_table_memory(len(subsets), n_cols, limits, held + SUBSET_ENTRY_BYTES * entries)
                    deadline.check()
            edge_state.append(here)
            edge_group.append(group_ids.setdefault(bits, len(group_ids)))
            edge_target.append(index[target])
    limits.check("max_dfa_states", len(subsets), what)
    _check_table_memory(len(subsets), n_cols, limits, held + SUBSET_ENTRY_BYTES * entries)
    delta = np.zeros((len(subsets), n_cols), dtype=np.int32)
    states, group, targets = (np.array(x, dtype=np.int64) for x in (edge_state, edge_group, edge_target))
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(group_ids) + 1))
    width = (n_cols + 7) // 8
    for bits, g in group_ids.items():
        cols = np.flatnonzero(np.unpackbits(np.frombuffer(bits.to_bytes(width, "little"), np.uint8),
                                            bitorder="little"))
        edges = order[bounds[g]:bounds[g + 1]]
        delta[states[edges][:, None], cols] = targets[edges][:, None]
    return delta, np.array(accepting, dtype=bool)


def _column_groups(by_mask: dict[int, list[int]], mask_bits: dict[int, int]) -> list[tuple[int, list[int]]]:
    """The byte columns of one subset's moves in groups of the same target states:
    ``(column bits, NFA states)`` per group, from the targets reached by each byte mask."""
    groups: list[tuple[int, list[int]]] = []
    for mask, targets in by_mask.items():
        bits = mask_bits[mask]
        split = []
        for have, reached in groups:
            both = have & bits
            if both:
                split.append((both, reached + targets))
                if have ^ both:
                    split.append((have ^ both, reached))
                bits ^= both
            else:
                split.append((have, reached))
        if bits:
            split.append((bits, targets))
        groups = split
    return groups


def minimize(delta: np.ndarray, accept: np.ndarray, deadline: Deadline) -> np.ndarray:
    """Myhill-Nerode classes by partition refinement.

    Returns the block id of every state; the dead state 0 shares its block with every state
    that cannot reach acceptance. Two algorithms, chosen here:

    - Hopcroft's, compiled (:mod:`gramc.compiler.hopcroft`), where numba is installed and the
      table has at most :data:`~gramc.compiler.hopcroft.MAX_CELLS` cells: O(k n log n).
    - Otherwise :func:`_refine_incremental`, vectorised with numpy: it compares 64-bit
      hashes of the signatures and re-examines only the predecessors of states that moved,
      so a deep automaton (a long counted repetition, one level per round) costs rounds
      proportional to its depth (each a dozen numpy calls) but work proportional to what
      changes.

    The result is then verified to be a congruence that respects acceptance, which makes it
    language-preserving whatever happened, and recomputed exactly (:func:`_refine_exact`)
    if it is not.
    """
    used = delta.any(axis=0)
    if not used.all():  # a PDA rule's table has a column per rule, mostly never taken
        delta = np.ascontiguousarray(delta[:, used])
    block = _hopcroft(delta, accept)
    if block is None:
        block = _refine_incremental(delta, accept, deadline)
    if _is_congruence(delta, accept, block):
        return block
    return _refine_exact(delta, accept, deadline)


def _hopcroft(delta: np.ndarray, accept: np.ndarray) -> np.ndarray | None:
    """:func:`~gramc.compiler.hopcroft.hopcroft_blocks`, or None without numba or past its
    size bound."""
    try:
        from gramc.compiler.hopcroft import MAX_CELLS, hopcroft_blocks
    except BackendUnavailableError:  # no numba: it is optional for compiling
        return None
    if delta.size > MAX_CELLS:
        return None
    return hopcroft_blocks(delta, accept)


_WEIGHTS = np.random.default_rng(0x6D6173).integers(1, 2**63, size=4096, dtype=np.uint64) | np.uint64(1)


def _hash_weights(cols: int) -> np.ndarray:
    """Odd 64-bit multipliers, one per column, for :func:`_refine_incremental`'s hashes."""
    return _WEIGHTS[np.arange(cols) % len(_WEIGHTS)] ^ (np.arange(cols, dtype=np.uint64) << np.uint64(32))


def _predecessors(delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the reverse edges: the predecessors of ``t`` are ``pred[ptr[t]:ptr[t + 1]]``."""
    n, k = delta.shape
    targets = delta.ravel()
    order = np.argsort(targets, kind="stable")
    pred = (order // k).astype(np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(targets, minlength=n), out=ptr[1:])
    return pred, ptr


def _gather_ranges(values: np.ndarray, ptr: np.ndarray, items: np.ndarray) -> np.ndarray:
    """``concatenate(values[ptr[i]:ptr[i + 1]] for i in items)`` without a Python loop."""
    lengths = ptr[items + 1] - ptr[items]
    total = int(lengths.sum())
    if total == 0:
        return values[:0]
    offsets = np.repeat(ptr[items] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return values[offsets + np.arange(total)]


def _refine_incremental(delta: np.ndarray, accept: np.ndarray, deadline: Deadline) -> np.ndarray:
    """Moore refinement that only re-hashes the states whose successors changed block.

    Invariant between rounds: every state not in ``dirty`` has the signature hash
    ``block_hash`` of its block. When a block splits, its largest part keeps the id (and,
    if that part is one whose hash changed, the unchanged states move out instead), so
    only the states given a new id make their predecessors dirty; as in Hopcroft's
    algorithm, a state moves only into a block at most half the size of its old one,
    which bounds the total work by O(edges log states).
    """
    n = len(accept)
    block = accept.astype(np.int64)
    size = np.zeros(n + 1, dtype=np.int64)
    size[:2] = np.bincount(block, minlength=2)
    n_blocks = 2
    block_hash = np.zeros(n + 1, dtype=np.uint64)
    hash_set = np.zeros(n + 1, dtype=bool)
    pred, ptr = _predecessors(delta)
    weights = _hash_weights(delta.shape[1])
    dirty = np.arange(n, dtype=np.int64)
    while len(dirty):
        deadline.check()
        hashes = block[delta[dirty]].astype(np.uint64) @ weights
        own = block[dirty]
        changed = ~hash_set[own] | (hashes != block_hash[own])
        states, hashes, own = dirty[changed], hashes[changed], own[changed]
        if not len(states):
            break
        order = np.lexsort((hashes, own))
        states, hashes, own = states[order], hashes[order], own[order]
        new_group = np.ones(len(states), dtype=bool)
        new_group[1:] = (own[1:] != own[:-1]) | (hashes[1:] != hashes[:-1])
        starts = np.flatnonzero(new_group)
        group_size = np.diff(np.append(starts, len(states)))
        group_block, group_hash = own[starts], hashes[starts]
        # The largest changed group of each block keeps the id if it outnumbers the
        # block's unchanged states; those then move to a new block with the old hash.
        by_size = np.lexsort((-group_size, group_block))
        first_of_block = np.ones(len(by_size), dtype=bool)
        first_of_block[1:] = group_block[by_size][1:] != group_block[by_size][:-1]
        largest = by_size[first_of_block]
        largest_block = group_block[largest]
        changed_in_block = np.bincount(group_block, weights=group_size, minlength=n_blocks)
        unchanged = size[largest_block] - changed_in_block[largest_block].astype(np.int64)
        takes_id = group_size[largest] > unchanged
        keeps = np.zeros(len(starts), dtype=bool)
        keeps[largest[takes_id]] = True
        evicted_blocks = largest_block[takes_id & (unchanged > 0)]
        moved_parts = [np.empty(0, dtype=np.int64)]
        if len(evicted_blocks):
            stay = np.isin(block, evicted_blocks)
            stay[states] = False
            rest = np.flatnonzero(stay)
            rest_block = block[rest]
            old_ids, inverse = np.unique(rest_block, return_inverse=True)
            new_ids = n_blocks + np.arange(len(old_ids))
            n_blocks += len(old_ids)
            size[new_ids] = np.bincount(inverse.reshape(-1))
            size[old_ids] -= size[new_ids]
            block_hash[new_ids] = block_hash[old_ids]
            hash_set[new_ids] = True
            block[rest] = new_ids[inverse.reshape(-1)]
            moved_parts.append(rest)
        block_hash[group_block[keeps]] = group_hash[keeps]
        hash_set[group_block[keeps]] = True
        movers = np.flatnonzero(~keeps)
        new_ids = n_blocks + np.arange(len(movers))
        n_blocks += len(movers)
        np.subtract.at(size, group_block[movers], group_size[movers])
        size[new_ids] = group_size[movers]
        block_hash[new_ids] = group_hash[movers]
        hash_set[new_ids] = True
        member_group = np.cumsum(new_group) - 1
        target = np.full(len(starts), -1, dtype=np.int64)
        target[movers] = new_ids
        moving = target[member_group] >= 0
        block[states[moving]] = target[member_group][moving]
        moved_parts.append(states[moving])
        dirty = np.unique(_gather_ranges(pred, ptr, np.concatenate(moved_parts)))
    _, block = np.unique(block, return_inverse=True)
    return block.reshape(-1)


def _refine_exact(delta: np.ndarray, accept: np.ndarray, deadline: Deadline) -> np.ndarray:
    """Plain Moore rounds comparing whole signature rows (no hashing): the fallback."""
    block = accept.astype(np.int64)
    n_blocks = len(np.unique(block))
    while True:
        deadline.check()
        signature = np.concatenate([block[:, None], block[delta]], axis=1)
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
    number = _bfs_numbers(q_delta, start_block, dead_block)
    count = int((number >= 0).sum())
    old = np.argsort(np.where(number >= 0, number, n_blocks + 1))[:count]
    renumber = np.zeros(n_blocks, dtype=np.int32)
    renumber[old] = np.arange(len(old), dtype=np.int32)
    new_delta = renumber[q_delta[old]].astype(np.int32)
    return new_delta, q_accept[old], (1 if start_block != dead_block else DEAD)


def _bfs_numbers(delta: np.ndarray, start: int, dead: int) -> np.ndarray:
    """Each state's breadth-first number from ``start`` (``dead`` 0, -1 if unreached): a FIFO
    queue's order, successors in column order, first sight wins. Compiled where numba is
    installed (:func:`gramc.compiler.bfs.bfs_numbers`), else one level of numpy calls at a
    time."""
    try:
        from gramc.compiler.bfs import bfs_numbers
    except BackendUnavailableError:  # no numba: it is optional for compiling
        return _bfs_numbers_by_level(delta, start, dead)
    return bfs_numbers(delta, start, dead)


def _bfs_numbers_by_level(delta: np.ndarray, start: int, dead: int) -> np.ndarray:
    """:func:`_bfs_numbers` with numpy, a level at a time (a level's states in number order,
    each one's successors in column order)."""
    number = np.full(len(delta), -1, dtype=np.int64)
    number[dead] = 0
    count = 1
    frontier = np.zeros(0, dtype=np.int64)
    if start != dead:
        number[start], count = 1, 2
        frontier = np.array([start], dtype=np.int64)
    while len(frontier):
        succ = delta[frontier].reshape(-1)
        unseen = succ[number[succ] < 0]
        _, first = np.unique(unseen, return_index=True)
        frontier = unseen[np.sort(first)]
        number[frontier] = np.arange(count, count + len(frontier))
        count += len(frontier)
    return number


def merge_byte_columns(delta: np.ndarray, classes: np.ndarray, n_byte_classes: int):
    """Merge byte classes whose columns became identical after minimisation (the merged
    classes numbered in order of their first column)."""
    # Columns grouped by their bytes (np.unique(axis=1) would sort whole columns of a large
    # table), and a table with nothing to merge is kept as it is.
    columns = np.ascontiguousarray(delta[:, :n_byte_classes].T)
    seen: dict[bytes, int] = {}
    inverse = np.array([seen.setdefault(column.tobytes(), len(seen)) for column in columns], dtype=np.int64)
    if len(seen) == n_byte_classes:
        return np.ascontiguousarray(delta, dtype=np.int32), classes.astype(np.uint8)
    keep = np.unique(inverse, return_index=True)[1]  # each merged class's first column
    new_delta = np.concatenate([delta[:, keep], delta[:, n_byte_classes:]], axis=1)
    return np.ascontiguousarray(new_delta, dtype=np.int32), inverse[classes].astype(np.uint8)


def determinize(nfa: NFA, classes: np.ndarray, token_ids: list[int], n_calls: int,
                limits: Limits, deadline: Deadline, held: int = 0,
                what: str = "the DFA") -> tuple[np.ndarray, np.ndarray, int]:
    """The canonical minimal DFA of ``nfa`` over fixed columns: (delta, accept, start);
    ``held``: bytes the caller keeps alive meanwhile, counted against ``max_memory``;
    ``what`` names the DFA in a limit's message."""
    delta, accept, start, used = determinize_used(nfa, classes, token_ids, limits, deadline, held, what)
    n_cols = int(classes.max()) + 1 + len(token_ids) + n_calls
    if len(used) == n_cols:
        return delta, accept, start
    full = np.zeros((len(delta), n_cols), dtype=np.int32)
    full[:, used] = delta
    return full, accept, start


def determinize_used(nfa: NFA, classes: np.ndarray, token_ids: list[int],
                     limits: Limits, deadline: Deadline, held: int = 0,
                     what: str = "the DFA") -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """:func:`determinize` with only the columns some state takes: ``(delta[:, used],
    accept, start, used)``, ``used`` ascending, call target ``r`` being column
    ``B + T + r``. A PDA rule calls few of the grammar's rules: the subset construction
    makes columns for those only, minimising and renumbering on the used columns (the
    numbering only follows live edges, so it is the same) keeps their int64 temporaries the
    rule's size, and the rule is held compact until the PDA's table is stacked."""
    calls = sorted({c for c in nfa.call if c >= 0})
    delta, accept = subset_table(nfa, classes, token_ids, calls, limits, deadline, held, what)
    used = np.flatnonzero(delta.any(axis=0))
    if len(used) < delta.shape[1]:
        delta = np.ascontiguousarray(delta[:, used])
    call_base = int(classes.max()) + 1 + len(token_ids)
    is_call = used >= call_base
    used[is_call] = call_base + np.array(calls, dtype=np.int64)[used[is_call] - call_base]
    block = minimize(delta, accept, deadline)
    delta, accept, start = canonical(delta, accept, block, start=1)
    return delta, accept, start, used


def build_dfa(grammar: Grammar, limits: Limits = DEFAULT_LIMITS, deadline: Deadline | None = None) -> DFATable:
    """The canonical minimal DFA of a non-recursive grammar (within ``deadline``, by default
    a fresh one of ``limits.max_compile_seconds``)."""
    deadline = deadline or Deadline(limits.max_compile_seconds, "building the DFA")
    nfa = build_nfa(grammar, limits)
    classes = byte_classes(set(nfa.cls) - {0})
    token_ids = sorted({t for t in nfa.tok if t >= 0})
    delta, accept, start = determinize(nfa, classes, token_ids, 0, limits, deadline,
                                       what=f"the DFA of rule {grammar.start!r}, other rules inlined")
    delta, classes = merge_byte_columns(delta, classes, int(classes.max()) + 1)
    return DFATable(delta=delta, byte_class=classes, token_ids=np.array(token_ids, dtype=np.int32),
                    accept=accept, start=start)
