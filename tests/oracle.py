"""An independent reference for IR languages: Brzozowski derivatives over the IR itself.

It shares nothing with the automata code, so tests can compare NFA/DFA/mask results with it.
With the IR's smart constructors, an expression (without rule references) denotes the empty
language exactly when it is ``NOTHING``, which makes "is this a viable prefix" a one-liner.
"""

from __future__ import annotations

from functools import lru_cache

from gramc.compiler.ir import (
    EMPTY,
    NOTHING,
    Alt,
    Bytes,
    Expr,
    Machine,
    Repeat,
    Seq,
    Token,
    alt,
    repeat,
    seq,
)


@lru_cache(maxsize=None)
def nullable(e: Expr) -> bool:
    """Does ``e`` match the empty string?"""
    if e is EMPTY:
        return True
    if isinstance(e, Seq):
        return all(nullable(i) for i in e.items)
    if isinstance(e, Alt):
        return any(nullable(i) for i in e.items)
    if isinstance(e, Repeat):
        return e.min == 0 or nullable(e.item)
    if isinstance(e, Machine):
        return e.accept[e.start]
    return False  # Bytes, Token, NOTHING


@lru_cache(maxsize=200_000)
def derive(e: Expr, b: int) -> Expr:
    """The derivative of ``e`` by the byte ``b``: what may follow once ``b`` is consumed."""
    if isinstance(e, Bytes):
        return EMPTY if e.mask >> b & 1 else NOTHING
    if isinstance(e, Seq):
        head, rest = e.items[0], seq(*e.items[1:])
        d = seq(derive(head, b), rest)
        return alt(d, derive(rest, b)) if nullable(head) else d
    if isinstance(e, Alt):
        return alt(*(derive(i, b) for i in e.items))
    if isinstance(e, Repeat):
        lo = max(e.min - 1, 0)
        hi = None if e.max is None else e.max - 1
        return seq(derive(e.item, b), repeat(e.item, lo, hi))
    if isinstance(e, Machine):  # every state of a Machine can still reach acceptance
        target = e.step(e.start, b)
        return NOTHING if target is None else Machine(e.edges, e.accept, target)
    if isinstance(e, Token) or e is EMPTY or e is NOTHING:
        return NOTHING
    raise TypeError(f"the oracle handles rule-free expressions only, not {e!r}")


def derive_bytes(e: Expr, data: bytes) -> Expr:
    for b in data:
        if e is NOTHING:
            break
        e = derive(e, b)
    return e


def is_viable_prefix(e: Expr, data: bytes) -> bool:
    """Is ``data`` a prefix of some string in the language of ``e``?"""
    return derive_bytes(e, data) is not NOTHING


def fullmatch(e: Expr, data: bytes) -> bool:
    """Is ``data`` in the language of ``e``?"""
    return nullable(derive_bytes(e, data))
