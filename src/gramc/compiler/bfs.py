"""Breadth-first numbering of a DFA's states, compiled with numba.

:func:`gramc.compiler.dfa.canonical` uses it where numba is installed; its numpy version,
one round of array calls per breadth-first level, costs ~10 us a level, and a DFA of long
literals (property names, enum values) is hundreds of levels deep. Both give the same
numbers. This module imports numba: import it only where numba is wanted.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.jit import numba

__all__ = ["bfs_numbers"]


def bfs_numbers(delta: np.ndarray, start: int, dead: int) -> np.ndarray:
    """Per state of ``delta`` (``[state, column]``), its number in a breadth-first visit
    from ``start`` over the columns in order (``dead`` is 0, ``start`` 1 unless it is
    ``dead``; -1 for states never reached)."""
    return _bfs(np.ascontiguousarray(delta, dtype=np.int64), start, dead)


@numba.njit(cache=True, nogil=True)
def _bfs(delta, start, dead):  # pragma: no cover - compiled; tested through bfs_numbers
    n, k = delta.shape
    number = np.full(n, -1, np.int64)
    order = np.empty(n, np.int64)
    number[dead] = 0
    count = 1
    if start == dead:
        return number
    number[start] = 1
    order[0] = start
    count = 2
    head, tail = 0, 1
    while head < tail:
        q = order[head]
        head += 1
        for c in range(k):
            t = delta[q, c]
            if number[t] < 0:
                number[t] = count
                count += 1
                order[tail] = t
                tail += 1
    return number
