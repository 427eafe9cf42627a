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

from functools import lru_cache

from gramc.automata.tables import DEAD, DFATable
from gramc.compiler.dfa import build_dfa
from gramc.compiler.ir import NOTHING, Expr, Grammar
from gramc.compiler.regular import combine
from gramc.limits import DEFAULT_LIMITS

__all__ = ["dfa_of", "intersection", "difference", "is_empty", "matches"]


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
    return combine(dfa_of(a), dfa_of(b), True, DEFAULT_LIMITS)


def difference(a: Expr, b: Expr) -> Expr:
    """The strings ``a`` matches and ``b`` does not."""
    if a is NOTHING or a is b:
        return NOTHING
    if b is NOTHING:
        return a
    return combine(dfa_of(a), dfa_of(b), False, DEFAULT_LIMITS)
