"""Finite alternations of known spellings as a trie: common prefixes factored once.

A listed ``enum`` of 100,000 strings, or the few multiples of a ``multipleOf`` in a bounded
range, is an alternation of sequences. Written out flat, every later stage (the passes, the
NFA, the subset construction, the IR text) pays for every repeated prefix again. As a trie
each prefix is one path, and sibling branches whose rests are the same expression (IR nodes
are interned, so "the same" is one dictionary lookup) share one branch behind the class of
their first units: ``"v1" | "v2"`` becomes ``"v" [12]``. Built without recursion, in time
linear in the number of units.

>>> from gramc.compiler.ir import format_expr, literal
>>> print(format_expr(trie((byte_units(w), literal(b"!")) for w in (b"x1", b"x2", b"y"))))
"x" [12] "!" | "y!"
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gramc.compiler.ir import Bytes, Expr, alt, seq

__all__ = ["trie", "byte_units"]

_BYTE_UNITS = tuple(Bytes(1 << b) for b in range(256))


def byte_units(data: bytes) -> list[Expr]:
    """One unit per byte of ``data`` (the units of a literal)."""
    return [_BYTE_UNITS[b] for b in data]


def trie(items: Iterable[tuple[Sequence[Expr], Expr]]) -> Expr:
    """The alternation of ``seq(*units, tail)`` over ``items``, with equal leading units
    factored (``a X | a Y`` is ``a (X | Y)``) and branches with equal rests merged (``a R |
    b R`` is ``(a | b) R``): the same language, exactly. At each node the tails that end
    there come first, then the branches, in the order the items first reach them."""
    edges: list[dict[Expr, int]] = [{}]
    tails: list[list[Expr]] = [[]]
    for units, tail in items:
        node = 0
        for unit in units:
            child = edges[node].get(unit)
            if child is None:
                child = edges[node][unit] = len(edges)
                edges.append({})
                tails.append([])
            node = child
        tails[node].append(tail)
    exprs: list[Expr] = [alt()] * len(edges)
    for node in range(len(edges) - 1, -1, -1):  # a child is numbered after its parent
        branches: dict[Expr, list[Expr]] = {}
        for unit, child in edges[node].items():
            branches.setdefault(exprs[child], []).append(unit)
        exprs[node] = alt(*tails[node], *(seq(alt(*units), rest) for rest, units in branches.items()))
    return exprs[0]
