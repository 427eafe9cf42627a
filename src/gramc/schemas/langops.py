"""Exact operations on regular IR languages: intersection, difference, emptiness, membership.

The schema compiler needs these where a JSON Schema keyword combines string or number
languages (two ``pattern``\\ s, ``not``, ``oneOf`` over scalars, object keys that are "any
string but the declared names"). Each operand is built into a minimal DFA, the product
automaton is explored breadth-first, minimised, and turned back into an IR expression by
state elimination. Operands must be regular (no rule references); results are exact.

>>> from gramc.compiler.ir import literal, alt, byte_range, repeat
>>> print(difference(repeat(byte_range(0x61, 0x62), 1, 1), literal(b"a")))
"b"
>>> is_empty(intersection(literal(b"x"), literal(b"y")))
True
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from gramc.automata.tables import DEAD, DFATable
from gramc.compiler.dfa import build_dfa, canonical, minimize
from gramc.compiler.regular import dfa_to_ir
from gramc.compiler.ir import NOTHING, Expr, Grammar
from gramc.limits import DEFAULT_LIMITS, Deadline

__all__ = ["dfa_of", "intersection", "difference", "is_empty", "matches", "dfa_to_ir"]


@lru_cache(maxsize=4096)
def dfa_of(expr: Expr) -> DFATable:
    """The minimal DFA of a rule-free expression (cached: expressions are interned)."""
    return build_dfa(Grammar.single(expr, "x"), DEFAULT_LIMITS)


def is_empty(expr: Expr) -> bool:
    """True when ``expr`` matches no string."""
    return expr is NOTHING or dfa_of(expr).start == DEAD


def matches(expr: Expr, data: bytes) -> bool:
    """True when ``expr`` matches all of ``data``."""
    table = dfa_of(expr)
    state = table.step_bytes(table.start, data) if table.start != DEAD else DEAD
    return state != DEAD and bool(table.accept[state])


def intersection(a: Expr, b: Expr) -> Expr:
    """The strings both ``a`` and ``b`` match."""
    if a is NOTHING or b is NOTHING:
        return NOTHING
    if a is b:
        return a
    return _product(a, b, lambda x, y: x and y)


def difference(a: Expr, b: Expr) -> Expr:
    """The strings ``a`` matches and ``b`` does not."""
    if a is NOTHING or a is b:
        return NOTHING
    if b is NOTHING:
        return a
    return _product(a, b, lambda x, y: x and not y)


def _product(a: Expr, b: Expr, accept_fn: Callable[[bool, bool], bool]) -> Expr:
    da, db = dfa_of(a), dfa_of(b)
    if da.start == DEAD:
        return NOTHING
    key = da.byte_class.astype(np.int64) * 256 + db.byte_class.astype(np.int64)
    cols, inverse = np.unique(key, return_inverse=True)
    col_a, col_b = (cols // 256).tolist(), (cols % 256).tolist()
    masks = [0] * len(cols)
    for byte, c in enumerate(inverse.reshape(-1).tolist()):
        masks[c] |= 1 << byte
    index: dict[tuple[int, int], int] = {(da.start, db.start): 1}
    pairs = [(da.start, db.start)]
    rows: list[list[int]] = [[DEAD] * len(cols)]
    accept: list[bool] = [False]
    k = 0
    while k < len(pairs):
        x, y = pairs[k]
        k += 1
        row = []
        for ca, cb in zip(col_a, col_b):
            nxt = (int(da.delta[x, ca]), int(db.delta[y, cb]) if y != DEAD else DEAD)
            if nxt[0] == DEAD:
                row.append(DEAD)
                continue
            if nxt not in index:
                index[nxt] = len(index) + 1
                pairs.append(nxt)
                DEFAULT_LIMITS.check("max_dfa_states", len(index))
            row.append(index[nxt])
        rows.append(row)
        accept.append(accept_fn(bool(da.accept[x]), y != DEAD and bool(db.accept[y])))
    delta, acc = np.array(rows, dtype=np.int64), np.array(accept, dtype=bool)
    block = minimize(delta, acc, Deadline(DEFAULT_LIMITS.max_compile_seconds))
    delta, acc, start = canonical(delta, acc, block, start=1)
    return dfa_to_ir(delta, acc, start, masks)
