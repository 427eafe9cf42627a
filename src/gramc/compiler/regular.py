"""Regular languages given as DFAs, back to IR: state elimination.

Shared by the grammar frontends (``A - B`` exclusion) and the JSON Schema walker
(intersections and differences of string languages): both build a product DFA and need an
IR expression for it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from gramc.automata.tables import DEAD
from gramc.compiler.ir import EMPTY, NOTHING, Bytes, Expr, Repeat, alt, optional, repeat, seq


def dfa_to_ir(delta: np.ndarray, accept: np.ndarray, start: int, masks: list[int]) -> Expr:
    """An IR expression for a trimmed DFA (state 0 dead) by state elimination.

    ``masks[c]`` is the byte set of column ``c``. States are eliminated cheapest first
    (fewest in-edges times out-edges), which keeps the expression small in practice.
    """
    if start == DEAD:
        return NOTHING
    n = len(delta)
    src, dst = n, n + 1
    out: dict[int, dict[int, Expr]] = {s: {} for s in range(n + 2)}
    inn: dict[int, dict[int, Expr]] = {s: {} for s in range(n + 2)}

    def add(p: int, q: int, e: Expr) -> None:
        e = _union(out[p][q], e) if q in out[p] else e
        out[p][q] = inn[q][p] = e

    for p in range(1, n):
        by_target: dict[int, int] = {}
        for c, q in enumerate(delta[p].tolist()):
            if q != DEAD:
                by_target[q] = by_target.get(q, 0) | masks[c]
        for q, mask in by_target.items():
            add(p, q, Bytes(mask))
        if accept[p]:
            add(p, dst, EMPTY)
    add(src, start, EMPTY)
    # Cheapest state first, from a heap with stale entries skipped: recomputing the minimum
    # over every remaining state per elimination is quadratic (a maxLength-500 pattern
    # product has tens of thousands of states).
    cost = lambda s: len(inn[s]) * len(out[s])  # noqa: E731
    heap = [(cost(s), s) for s in range(1, n)]
    heapq.heapify(heap)
    done = [False] * n
    while heap:
        c, k = heapq.heappop(heap)
        if done[k] or c != cost(k):
            continue
        done[k] = True
        touched = set(inn[k]) | set(out[k])
        _eliminate(k, out, inn, add)
        for t in touched:
            if 0 < t < n and not done[t]:
                heapq.heappush(heap, (cost(t), t))
    return out[src].get(dst, NOTHING)


def _union(a: Expr, b: Expr) -> Expr:
    """``a | b``, written ``(a | b')?`` when one side is empty or optional."""
    for x, y in ((a, b), (b, a)):
        if x is EMPTY:
            return optional(y)
        if isinstance(x, Repeat) and (x.min, x.max) == (0, 1):
            return optional(_union(x.item, y))
    return alt(a, b)


def _eliminate(k: int, out: dict, inn: dict, add: Callable[[int, int, Expr], None]) -> None:
    loop = out[k].pop(k, None)
    inn[k].pop(k, None)
    star = repeat(loop, 0, None) if loop is not None else EMPTY
    preds, succs = inn.pop(k), out.pop(k)
    for p in preds:
        del out[p][k]
    for q in succs:
        del inn[q][k]
    for p, ep in preds.items():
        for q, eq in succs.items():
            add(p, q, seq(ep, star, eq))
