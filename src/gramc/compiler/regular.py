"""Regular languages given as DFAs: products, and back to IR by state elimination.

Shared by the grammar frontends (``A - B`` exclusion, Lark's ``&`` and ``~``, structural
tags' free text) and the JSON Schema walker (intersections and differences of string
languages): :func:`intersection`, :func:`difference`, :func:`is_empty` and :func:`matches`
take rule-free IR expressions, build each operand's minimal DFA once (cached: expressions
are interned), explore the product breadth-first, minimise it and turn it back into IR.

>>> from gramc.compiler.ir import literal, byte_range, repeat
>>> print(difference(repeat(byte_range(0x61, 0x62), 1, 1), literal(b"a")))
"b"
>>> is_empty(intersection(literal(b"x"), literal(b"y")))
True
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from gramc.automata.tables import DEAD, DFATable
from gramc.compiler.dfa import build_dfa, canonical, merge_byte_columns, minimize
from gramc.compiler.ir import (
    EMPTY,
    NOTHING,
    Bytes,
    Expr,
    Grammar,
    Machine,
    Repeat,
    alt,
    machine,
    optional,
    repeat,
    seq,
    walk,
)
from gramc.limits import DEFAULT_LIMITS, Deadline, Limits

#: Operand DFAs a process keeps (keyed by interned expression and limits).
DFA_CACHE_SIZE = 4096


@lru_cache(maxsize=DFA_CACHE_SIZE)
def dfa_of(expr: Expr, limits: Limits = DEFAULT_LIMITS) -> DFATable:
    """The minimal DFA of a rule-free expression."""
    return build_dfa(Grammar.single(expr, "x"), limits)


def is_empty(expr: Expr, limits: Limits = DEFAULT_LIMITS) -> bool:
    """True when ``expr`` (rule-free) matches no string."""
    return expr is NOTHING or dfa_of(expr, limits).start == DEAD


def matches(expr: Expr, data: bytes, limits: Limits = DEFAULT_LIMITS) -> bool:
    """True when ``expr`` (rule-free) matches all of ``data``."""
    table = dfa_of(expr, limits)
    state = table.step_bytes(table.start, data) if table.start != DEAD else DEAD
    return state != DEAD and bool(table.accept[state])


def intersection(a: Expr, b: Expr, limits: Limits = DEFAULT_LIMITS) -> Expr:
    """The strings both ``a`` and ``b`` (rule-free) match."""
    if a is NOTHING or b is NOTHING:
        return NOTHING
    if a is b:
        return a
    return combine(dfa_of(a, limits), dfa_of(b, limits), True, limits, _has_machine(a) or _has_machine(b))


def difference(a: Expr, b: Expr, limits: Limits = DEFAULT_LIMITS) -> Expr:
    """The strings ``a`` matches and ``b`` does not (both rule-free)."""
    if a is NOTHING or a is b:
        return NOTHING
    if b is NOTHING:
        return a
    return combine(dfa_of(a, limits), dfa_of(b, limits), False, limits, _has_machine(a) or _has_machine(b))


@lru_cache(maxsize=DFA_CACHE_SIZE)
def _has_machine(expr: Expr) -> bool:
    """Does ``expr`` hold a :class:`~gramc.compiler.ir.Machine` (a language kept as an automaton
    because its regular expression is too large)?"""
    return any(isinstance(node, Machine) for node in walk(expr))


def intersection_machine(a: Expr, b: Expr, limits: Limits = DEFAULT_LIMITS) -> Expr:
    """:func:`intersection` kept as an automaton: the minimal product DFA as one
    :class:`~gramc.compiler.ir.Machine` leaf, for products (residues of a division) whose
    regular expression would be exponentially larger than their states."""
    if a is NOTHING or b is NOTHING:
        return NOTHING
    return combine(dfa_of(a, limits), dfa_of(b, limits), True, limits, as_machine=True)


def dfa_from_transitions(trans: list[dict[int, int]], accept: list[bool], start: int) -> DFATable:
    """The :class:`DFATable` of a DFA given per state as {byte: target} (state 0 dead, with no
    transitions), bytes whose columns are identical merged into classes numbered in byte
    order."""
    delta = np.zeros((len(trans), 256), dtype=np.int32)
    for state, row in enumerate(trans):
        for b, t in row.items():
            delta[state, b] = t
    delta, byte_class = merge_byte_columns(delta, np.arange(256), 256)
    return DFATable(delta=delta, byte_class=byte_class, token_ids=np.zeros(0, dtype=np.int32),
                    accept=np.array(accept, dtype=bool), start=start)


def dfa_to_machine(delta: np.ndarray, accept: np.ndarray, start: int, masks: list[int]) -> Expr:
    """A :class:`~gramc.compiler.ir.Machine` for a DFA (state 0 dead; ``masks[c]`` is the
    byte set of column ``c``)."""
    rows = [[(mask, q) for q, mask in row] for row in _edges_by_target(delta, masks)]
    return machine(rows, accept.tolist(), start)


def _edges_by_target(delta: np.ndarray, masks: list[int]) -> list[list[tuple[int, int]]]:
    """Per state, its (target, byte mask) pairs: the masks of the columns leading to each
    live target OR-ed, targets in the order of their first column (numpy over every edge at
    once: a Python loop per state and column took 2.7 ms for a 270-state object key)."""
    n = len(delta)
    out: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    src, col = np.nonzero(delta != DEAD)  # by state, then column
    if not len(src):
        return out
    words = np.frombuffer(b"".join(m.to_bytes(32, "little") for m in masks), dtype=np.uint64).reshape(-1, 4)
    pair = src.astype(np.int64) * n + delta[src, col]
    order = np.argsort(pair, kind="stable")  # a pair's columns stay ascending
    pair, col = pair[order], col[order]
    first = np.flatnonzero(np.concatenate([[True], pair[1:] != pair[:-1]]))
    ored = np.bitwise_or.reduceat(words[col], first, axis=0)
    by_first_col = np.lexsort((col[first], pair[first] // n))
    for i in by_first_col.tolist():
        p, q = divmod(int(pair[first[i]]), n)
        out[p].append((q, int.from_bytes(ored[i].tobytes(), "little")))
    return out


def combine(a: DFATable, b: DFATable, both: bool, limits: Limits, as_machine: bool = False) -> Expr:
    """IR for the strings of ``a`` that ``b`` matches (``both``) or does not match: a regular
    expression by state elimination, or (``as_machine``: an operand was kept as an automaton,
    so its products would have no compact expression either) one Machine leaf."""
    if a.start == DEAD:
        return NOTHING
    deadline = Deadline(limits.max_compile_seconds)
    delta, accept, masks = product(a, b, both, limits, deadline)
    block = minimize(delta, accept, deadline)
    delta, accept, start = canonical(delta, accept, block, start=1)
    if as_machine:
        return dfa_to_machine(delta, accept, start, masks)
    return dfa_to_ir(delta, accept, start, masks)


def product(a: DFATable, b: DFATable, both: bool, limits: Limits,
            deadline: Deadline) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The product DFA of ``a`` with ``b`` (accepting where ``a`` accepts and ``b`` does,
    or, without ``both``, does not), state 0 dead and 1 the start, over the coarsest common
    byte columns; returns (delta, accept, the byte set of each column).

    Explored breadth first a whole level at a time: pairs are coded ``x * |b| + y`` and
    looked up in a sorted array of the pairs seen, so a 69k-state product (a pattern within
    ``maxLength: 500``) takes numpy passes per level instead of a Python step per edge.
    """
    key = a.byte_class.astype(np.int64) * 256 + b.byte_class.astype(np.int64)
    cols, inverse = np.unique(key, return_inverse=True)
    masks = [0] * len(cols)
    for byte, c in enumerate(inverse.reshape(-1).tolist()):
        masks[c] |= 1 << byte
    step_a = a.delta[:, cols // 256].astype(np.int64)
    step_b = b.delta[:, cols % 256].astype(np.int64)
    nb = len(b.delta)
    known = np.array([a.start * nb + b.start], dtype=np.int64)  # sorted pair codes
    known_id = np.array([1], dtype=np.int64)
    frontier = known.copy()  # the pairs of the last level, in id order
    rows, accept = [np.zeros((1, len(cols)), dtype=np.int64)], [np.zeros(1, dtype=bool)]
    n = 1
    while len(frontier):
        deadline.check()
        x, y = frontier // nb, frontier % nb
        nx = step_a[x]
        code = np.where(nx != DEAD, nx * nb + step_b[y], -1)
        seen = code[code >= 0]
        cand = np.unique(seen)
        at = np.searchsorted(known, cand)
        found = (at < len(known)) & (known[np.minimum(at, len(known) - 1)] == cand)
        new = cand[~found]
        limits.check("max_dfa_states", n + len(new))
        order = np.argsort(np.concatenate([known, new]), kind="stable")
        known = np.concatenate([known, new])[order]
        known_id = np.concatenate([known_id, np.arange(n + 1, n + 1 + len(new))])[order]
        n += len(new)
        ids = np.zeros_like(code)
        live = code >= 0
        ids[live] = known_id[np.searchsorted(known, code[live])]
        rows.append(ids)
        in_b = b.accept[y]
        accept.append(a.accept[x] & (in_b if both else ~in_b))
        frontier = new
    return np.concatenate(rows), np.concatenate(accept), masks


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

    edges = _edges_by_target(delta, masks)
    for p in range(1, n):
        for q, mask in edges[p]:
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
