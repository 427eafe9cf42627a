"""Hopcroft's DFA minimisation, compiled with numba: the coarsest partition of a complete
DFA's states into Myhill-Nerode classes in O(k n log n) steps (n states, k columns).

:func:`gramc.compiler.dfa.minimize` uses it where numba is installed and the table is
small enough for its work arrays (:data:`MAX_CELLS`); the numpy refinement there serves the
rest. This module imports numba: import it only where numba is wanted.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.jit import numba

__all__ = ["MAX_CELLS", "hopcroft_blocks"]

#: Most table cells (states x columns) minimised here: the work arrays take ~21 bytes a cell.
MAX_CELLS = 1 << 22


def hopcroft_blocks(delta: np.ndarray, accept: np.ndarray) -> np.ndarray:
    """The class of every state of the complete DFA ``delta`` (``[state, column]``, every
    target a state) whose accepting states are ``accept``; classes are numbered from 0."""
    return _hopcroft(np.ascontiguousarray(delta, dtype=np.int32), np.ascontiguousarray(accept, dtype=np.bool_))


@numba.njit(cache=True, nogil=True)
def _hopcroft(delta, accept):  # pragma: no cover - compiled; tested through hopcroft_blocks
    n, k = delta.shape
    # Predecessors by (column, target): pred[start[c * n + t]:start[c * n + t + 1]].
    start = np.zeros(n * k + 1, np.int64)
    for q in range(n):
        for c in range(k):
            start[c * n + delta[q, c] + 1] += 1
    for i in range(n * k):
        start[i + 1] += start[i]
    pred = np.empty(n * k, np.int32)
    fill = start[:-1].copy()
    for q in range(n):
        for c in range(k):
            key = c * n + delta[q, c]
            pred[fill[key]] = q
            fill[key] += 1
    # The partition: each block a range first..end of ``elems``; its marked states are kept
    # at the front of the range, first..mid.
    elems = np.empty(n, np.int64)
    loc = np.empty(n, np.int64)
    block = np.zeros(n, np.int64)
    first = np.zeros(n, np.int64)
    end = np.zeros(n, np.int64)
    mid = np.zeros(n, np.int64)
    n_acc = 0
    for q in range(n):
        if accept[q]:
            n_acc += 1
    i_acc, i_rej = 0, n_acc
    for q in range(n):
        if accept[q]:
            elems[i_acc] = q
            loc[q] = i_acc
            i_acc += 1
        else:
            elems[i_rej] = q
            loc[q] = i_rej
            block[q] = 1 if n_acc > 0 else 0
            i_rej += 1
    n_blocks = 0
    if n_acc > 0:
        end[0] = n_acc
        n_blocks = 1
    if n_acc < n:
        first[n_blocks] = n_acc
        mid[n_blocks] = n_acc
        end[n_blocks] = n
        n_blocks += 1
    # The splitters to process, (block, column), each at most once at a time.
    waiting = np.zeros(n * k, np.bool_)
    stack_b = np.empty(n * k, np.int32)
    stack_c = np.empty(n * k, np.int32)
    top = 0
    if n_blocks == 2:
        smaller = 0 if n_acc <= n - n_acc else 1
        for c in range(k):
            waiting[smaller * k + c] = True
            stack_b[top] = smaller
            stack_c[top] = c
            top += 1
    splitter = np.empty(n, np.int64)
    touched = np.empty(n, np.int64)
    while top > 0:
        top -= 1
        b = stack_b[top]
        c = stack_c[top]
        waiting[b * k + c] = False
        size = end[b] - first[b]
        for i in range(size):  # a copy: marking below reorders the block's own range
            splitter[i] = elems[first[b] + i]
        n_touched = 0
        for i in range(size):
            key = c * n + splitter[i]
            for j in range(start[key], start[key + 1]):
                q = pred[j]
                y = block[q]
                p = loc[q]
                if p < mid[y]:
                    continue  # marked already
                if mid[y] == first[y]:
                    touched[n_touched] = y
                    n_touched += 1
                r = elems[mid[y]]
                elems[p] = r
                loc[r] = p
                elems[mid[y]] = q
                loc[q] = mid[y]
                mid[y] += 1
        for t in range(n_touched):
            y = touched[t]
            m = mid[y]
            if m == end[y]:  # every state moved: no split
                mid[y] = first[y]
                continue
            z = n_blocks  # the marked part becomes a new block
            n_blocks += 1
            first[z] = first[y]
            mid[z] = first[y]
            end[z] = m
            first[y] = m
            mid[y] = m
            for i in range(first[z], end[z]):
                block[elems[i]] = z
            z_smaller = end[z] - first[z] <= end[y] - first[y]
            for cc in range(k):
                s = z if waiting[y * k + cc] or z_smaller else y
                if not waiting[s * k + cc]:
                    waiting[s * k + cc] = True
                    stack_b[top] = s
                    stack_c[top] = cc
                    top += 1
    return block
