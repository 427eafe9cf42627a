"""The subset construction, compiled with numba: an NFA's reachable state sets as a dense table.

:func:`gramc.compiler.dfa.subset_table` uses it where numba is installed; the Python
construction there serves the rest. Both give the same sets, so the same minimal DFA. Here a
set is a run of int32 NFA states in one pool, found again through an open-addressing table of
order-free 64-bit hashes (a candidate is compared through the marks of the set being looked
up: nothing is sorted); the epsilon closure of each NFA state is made once and kept; and the
columns of one DFA state that the same NFA states move on share one target set. The work runs
in chunks of new states, so that the caller checks its limits (states, memory, time) between
them. This module imports numba: import it only where numba is wanted.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.jit import numba

__all__ = ["POOL_ENTRY_BYTES", "STATE_BYTES", "Subsets"]

#: Bytes per NFA state held in the sets' pool (int32), and per DFA state held beside it (its
#: offset, hash and hash-table slots): what ``max_memory`` counts for the sets.
POOL_ENTRY_BYTES = 4
STATE_BYTES = 40

_NO_CLOSURE = -1


class Subsets:
    """One subset construction in progress: the NFA as arrays, the sets found so far and the
    table's rows, grown by :meth:`run` a chunk at a time.

    ``kind`` per NFA state: 0 a split (its closure passes through it), 1 a byte edge on
    ``mask[s]`` (columns ``mask_cols[mask_ptr[m]:mask_ptr[m + 1]]``), 2 an edge on column
    ``col[s]`` (a special token or a call), 3 none (the accepting state, a dead end).
    """

    def __init__(self, kind: np.ndarray, mask: np.ndarray, col: np.ndarray, nxt: np.ndarray,
                 eps_ptr: np.ndarray, eps_idx: np.ndarray, mask_ptr: np.ndarray, mask_cols: np.ndarray,
                 n_cols: int, start: int, accept: int):
        self.nfa = (kind, mask, col, nxt, eps_ptr, eps_idx, mask_ptr, mask_cols)
        self.n_cols, self.accept_state = n_cols, accept
        n = len(kind)
        self.cl_off = np.full(n, _NO_CLOSURE, dtype=np.int64)  # each NFA state's closure, made once
        self.cl_len = np.zeros(n, dtype=np.int64)
        self.cl_pool = np.empty(max(16, n), dtype=np.int32)
        self.cl_marks = np.full(n, -1, dtype=np.int64)
        self.stack = np.empty(max(1, n), dtype=np.int64)  # a closure's walk
        self.scratch = np.zeros(n, dtype=np.int64)  # stamps: one per target set built
        self.n_cl = 0
        self.pool = np.empty(1024, dtype=np.int32)
        self.set_off = np.zeros(1025, dtype=np.int64)  # set d is pool[set_off[d]:set_off[d + 1]]
        self.hashes = np.zeros(1024, dtype=np.uint64)
        self.slots = np.zeros(2048, dtype=np.int64)  # DFA state + 1 per used slot
        self.delta = np.zeros((1024, n_cols), dtype=np.int32)
        self.accepting = np.zeros(1024, dtype=np.bool_)
        self.n_states = 1  # the empty set is state 0, DEAD
        self.done = 1  # states whose rows are made
        self.stamp = 0
        _insert_start(self, start)

    @property
    def entries(self) -> int:
        """NFA states in all the sets so far."""
        return int(self.set_off[self.n_states])

    def memory(self) -> int:
        """Bytes held by the sets and their index (the rows are counted by the caller)."""
        return POOL_ENTRY_BYTES * self.entries + STATE_BYTES * self.n_states

    def finished(self) -> bool:
        return self.done == self.n_states

    def run(self, chunk: int, chunk_entries: int) -> None:
        """Make the rows of the states found, until all are made, or ``chunk`` new states or
        ``chunk_entries`` more NFA states in the sets have been found (the caller then
        checks its limits and runs again)."""
        self._reserve(chunk + self.n_cols)  # a state's row finds at most a state per column
        (kind, mask, col, nxt, eps_ptr, eps_idx, mask_ptr, mask_cols) = self.nfa
        out = _run(kind, mask, col, nxt, eps_ptr, eps_idx, mask_ptr, mask_cols, self.accept_state,
                   self.cl_off, self.cl_len, self.cl_pool, self.n_cl, self.cl_marks, self.stack, self.scratch,
                   self.stamp, self.pool, self.set_off, self.hashes, self.slots, self.delta, self.accepting,
                   self.n_states, self.done, self.n_states + chunk, self.entries + chunk_entries)
        self.cl_pool, self.n_cl, self.stamp, self.pool, self.n_states, self.done = out

    def _reserve(self, extra: int) -> None:
        """Room for ``extra`` more states in the per-state arrays, and a hash table at most
        half full with them (grown here, between runs, so the kernels never grow them)."""
        need = self.n_states + extra
        if need > len(self.hashes):
            cap = max(need, 2 * len(self.hashes))
            n = self.n_states
            self.hashes = np.concatenate([self.hashes[:n], np.zeros(cap - n, dtype=np.uint64)])
            self.set_off = np.concatenate([self.set_off[: n + 1], np.zeros(cap - n, dtype=np.int64)])
            self.delta = np.concatenate([self.delta[:n], np.zeros((cap - n, self.n_cols), dtype=np.int32)])
            self.accepting = np.concatenate([self.accepting[:n], np.zeros(cap - n, dtype=np.bool_)])
        if 2 * need > len(self.slots):
            size = len(self.slots)
            while size < 2 * need:
                size *= 2
            self.slots = np.zeros(size, dtype=np.int64)
            _rehash(self.hashes, self.n_states, self.slots)

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows and accepting flags of every state (once :meth:`finished`)."""
        return self.delta[: self.n_states].copy(), self.accepting[: self.n_states].copy()


def _insert_start(s: Subsets, start: int) -> None:
    (kind, mask, col, nxt, eps_ptr, eps_idx, mask_ptr, mask_cols) = s.nfa
    out = _start(kind, eps_ptr, eps_idx, s.accept_state, start, s.cl_off, s.cl_len, s.cl_pool, s.n_cl,
                 s.cl_marks, s.stack, s.scratch, s.stamp, s.pool, s.set_off, s.hashes, s.slots, s.accepting)
    s.cl_pool, s.n_cl, s.stamp, s.pool, s.n_states = out


# The kernels below are compiled; tests reach them through Subsets (their Python lines never run).

@numba.njit(cache=True, nogil=True)
def _closure(s, kind, eps_ptr, eps_idx, cl_off, cl_len, cl_pool, n_cl, marks, stack):  # pragma: no cover
    """Make the epsilon closure of NFA state ``s`` (its non-split states) once; returns the
    pool (grown) and its new length. ``marks``: a walk marks the states it met with its root
    (each root is walked once), -1 where none has; ``stack``: room for every NFA state."""
    if cl_off[s] != _NO_CLOSURE:
        return cl_pool, n_cl
    stack[0] = s
    top = 1
    marks[s] = s
    start = n_cl
    while top:
        top -= 1
        u = stack[top]
        if kind[u] == 0:
            for i in range(eps_ptr[u + 1] - 1, eps_ptr[u] - 1, -1):
                v = eps_idx[i]
                if marks[v] != s:
                    marks[v] = s
                    stack[top] = v
                    top += 1
        else:
            cl_pool = _append(cl_pool, n_cl, u)
            n_cl += 1
    cl_off[s] = start
    cl_len[s] = n_cl - start
    return cl_pool, n_cl


@numba.njit(cache=True, nogil=True)
def _append(values, n, value):  # pragma: no cover
    """``values`` (int32, its first ``n`` used) with ``value`` at ``n``, doubled if full."""
    if n == len(values):
        grown = np.empty(2 * len(values), np.int32)
        grown[:n] = values[:n]
        values = grown
    values[n] = value
    return values


@numba.njit(cache=True, nogil=True)
def _hash(values):  # pragma: no cover
    """A 64-bit hash of the set ``values`` whatever their order (a sum of mixed elements)."""
    h = np.uint64(len(values))
    for v in values:
        x = np.uint64(v) + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        h += x ^ (x >> np.uint64(31))
    return h


@numba.njit(cache=True, nogil=True)
def _find_or_add(found, n_found, scratch, stamp, accept_state, pool, set_off, hashes, slots, accepting,
                 n_states):  # pragma: no cover
    """The DFA state of the set ``found[:n_found]`` (its states, and only they, are marked
    ``stamp`` in ``scratch``), added if new (the caller left room for it: see
    :meth:`Subsets._reserve`). Returns it, the pool (grown) and the number of states."""
    values = found[:n_found]
    h = _hash(values)
    mask = len(slots) - 1
    i = np.int64(h & np.uint64(mask))
    while slots[i]:
        d = slots[i] - 1
        if hashes[d] == h and set_off[d + 1] - set_off[d] == n_found:
            same = True
            for j in range(set_off[d], set_off[d + 1]):
                if scratch[pool[j]] != stamp:
                    same = False
                    break
            if same:
                return d, pool, n_states
        i = (i + 1) & mask
    d = n_states
    end = set_off[d] + n_found
    if end > len(pool):
        grown = np.empty(max(2 * len(pool), end), np.int32)
        grown[: set_off[d]] = pool[: set_off[d]]
        pool = grown
    pool[set_off[d]:end] = values
    set_off[d + 1] = end
    hashes[d] = h
    slots[i] = d + 1
    accepting[d] = scratch[accept_state] == stamp
    return d, pool, n_states + 1


@numba.njit(cache=True, nogil=True)
def _rehash(hashes, n_states, slots):  # pragma: no cover
    """Put states ``1 .. n_states - 1`` into the empty open-addressing table ``slots``
    (state 0, the empty set, is never looked up)."""
    mask = len(slots) - 1
    for e in range(1, n_states):
        j = np.int64(hashes[e] & np.uint64(mask))
        while slots[j]:
            j = (j + 1) & mask
        slots[j] = e + 1


@numba.njit(cache=True, nogil=True)
def _start(kind, eps_ptr, eps_idx, accept_state, start, cl_off, cl_len, cl_pool, n_cl, cl_marks, stack, scratch,
           stamp, pool, set_off, hashes, slots, accepting):  # pragma: no cover
    """Add the closure of the NFA's start as DFA state 1 (state 0 is the empty set)."""
    cl_pool, n_cl = _closure(start, kind, eps_ptr, eps_idx, cl_off, cl_len, cl_pool, n_cl, cl_marks, stack)
    found = cl_pool[cl_off[start]:cl_off[start] + cl_len[start]].copy()
    stamp += 1
    for u in found:
        scratch[u] = stamp
    d, pool, n_states = _find_or_add(found, len(found), scratch, stamp, accept_state, pool, set_off, hashes, slots,
                                     accepting, 1)
    return cl_pool, n_cl, stamp, pool, n_states


@numba.njit(cache=True, nogil=True)
def _run(kind, mask, col, nxt, eps_ptr, eps_idx, mask_ptr, mask_cols, accept_state, cl_off, cl_len, cl_pool,
         n_cl, cl_marks, stack, scratch, stamp, pool, set_off, hashes, slots, delta, accepting, n_states, done,
         stop_at, stop_entries):  # pragma: no cover
    """Make rows from state ``done`` on, until every state found has its row or
    ``stop_at`` states, or sets of ``stop_entries`` NFA states in all, are found."""
    n_cols = delta.shape[1]
    count = np.zeros(n_cols + 1, np.int64)
    by_col = np.empty(16, np.int64)  # the set's states moving on each column, column by column
    col_hash = np.zeros(n_cols, np.uint64)
    size = 4
    while size < 2 * n_cols:
        size *= 2
    seen_cols = np.full(size, -1, np.int64)  # columns with a distinct mover list, by hash
    found = np.empty(16, np.int32)
    while done < n_states and n_states < stop_at and set_off[n_states] < stop_entries:
        d = done
        lo, hi = set_off[d], set_off[d + 1]
        # The states moving on each column, in set order (CSR by column).
        count[:] = 0
        for p in range(lo, hi):
            s = pool[p]
            if kind[s] == 1:
                m = mask[s]
                for q in range(mask_ptr[m], mask_ptr[m + 1]):
                    count[mask_cols[q] + 1] += 1
            elif kind[s] == 2:
                count[col[s] + 1] += 1
        for c in range(n_cols):
            count[c + 1] += count[c]
        if count[n_cols] > len(by_col):
            by_col = np.empty(2 * count[n_cols], np.int64)
        fill = count[:n_cols].copy()
        for p in range(lo, hi):
            s = pool[p]
            if kind[s] == 1:
                m = mask[s]
                for q in range(mask_ptr[m], mask_ptr[m + 1]):
                    c = mask_cols[q]
                    by_col[fill[c]] = s
                    fill[c] += 1
            elif kind[s] == 2:
                c = col[s]
                by_col[fill[c]] = s
                fill[c] += 1
        seen_cols[:] = -1
        table_mask = len(seen_cols) - 1
        for c in range(n_cols):
            a, b = count[c], count[c + 1]
            if a == b:
                continue  # DEAD
            h = _hash(by_col[a:b])
            col_hash[c] = h
            # A column whose movers are those of an earlier column goes where it went.
            i = np.int64(h & np.uint64(table_mask))
            same_as = -1
            while seen_cols[i] >= 0:
                e = seen_cols[i]
                if col_hash[e] == h and count[e + 1] - count[e] == b - a:
                    same = True
                    for j in range(b - a):
                        if by_col[count[e] + j] != by_col[a + j]:
                            same = False
                            break
                    if same:
                        same_as = e
                        break
                i = (i + 1) & table_mask
            if same_as >= 0:
                delta[d, c] = delta[d, same_as]
                continue
            seen_cols[i] = c
            # The target set: the union of the movers' next states' closures, sorted.
            stamp += 1
            n_found = 0
            for j in range(a, b):
                t = nxt[by_col[j]]
                cl_pool, n_cl = _closure(t, kind, eps_ptr, eps_idx, cl_off, cl_len, cl_pool, n_cl, cl_marks, stack)
                for k in range(cl_off[t], cl_off[t] + cl_len[t]):
                    u = cl_pool[k]
                    if scratch[u] != stamp:
                        scratch[u] = stamp
                        found = _append(found, n_found, u)
                        n_found += 1
            if n_found == 0:
                continue  # every mover's next state is a dead end of splits: DEAD
            target, pool, n_states = _find_or_add(found, n_found, scratch, stamp, accept_state, pool, set_off, hashes,
                                                  slots, accepting, n_states)
            delta[d, c] = target
        done += 1
    return cl_pool, n_cl, stamp, pool, n_states, done
