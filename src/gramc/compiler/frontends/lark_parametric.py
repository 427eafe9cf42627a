"""llguidance's parametric rules: the ``name::expr`` parameters and ``%if`` conditions.

A parametric rule ``perm::_ : ...`` takes one 64-bit parameter ``p``; a reference
``perm::set_bit(0)`` passes it a value computed from the referring rule's own parameter (or a
constant), and an alternative ending in ``%if cond`` exists only where ``cond(p)`` holds
(llguidance's docs/parametric.md). Such a grammar is context-free: one plain rule per
parameter value. The Lark frontend expands it that way, from the constant references, one
rule ``perm::0x5`` per reachable value (a bounded number of them), so the language is exact.

This module reads the two small expression languages and evaluates them:

>>> e, _ = parse_param_expr("set_bit(2) x", 0, "<t>")
>>> hex(e.eval(1)), e.uses_param
('0x5', True)
>>> c, _ = parse_cond("and(bit_clear(0), lt([1:3], 2))", 0, "<t>")
>>> c.eval(0b010), c.eval(0b101)
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from gramc.errors import GrammarSyntaxError, Span

_T = TypeVar("_T")
NUM_BITS = 64
MASK64 = (1 << NUM_BITS) - 1

_TOKEN = re.compile(r"[ \t]*(0[xX][0-9a-fA-F]+|[0-9]+|[A-Za-z_]\w*|[()\[\]:,])")


@dataclass(frozen=True)
class ParamExpr:
    """A parameter expression: ``const`` (``value``), ``self`` (``_``), ``or``/``and`` (with the
    mask ``value``), ``incr``/``decr`` (of the bit range ``bits``, saturating)."""

    kind: str
    value: int = 0
    bits: tuple[int, int] = (0, NUM_BITS)

    @property
    def uses_param(self) -> bool:
        return self.kind != "const"

    def eval(self, p: int) -> int:
        if self.kind == "const":
            return self.value
        if self.kind == "self":
            return p
        if self.kind == "or":
            return p | self.value
        if self.kind == "and":
            return p & self.value
        start, end = self.bits
        mask = _mask(start, end)
        if self.kind == "incr":
            return p if p & mask == mask else p + (1 << start)
        return p if p & mask == 0 else p - (1 << start)  # decr


@dataclass(frozen=True)
class Cond:
    """A condition: ``true``, a comparison ``eq ne lt le gt ge`` of the bit range ``bits``
    with ``value``, a set-bit count comparison ``count_eq`` ..., or ``and or not`` of ``args``."""

    op: str
    bits: tuple[int, int] = (0, NUM_BITS)
    value: int = 0
    args: tuple[Cond, ...] = ()

    @property
    def is_true(self) -> bool:
        return self.op == "true"

    def eval(self, p: int) -> bool:
        if self.op == "true":
            return True
        if self.op == "and":
            return self.args[0].eval(p) and self.args[1].eval(p)
        if self.op == "or":
            return self.args[0].eval(p) or self.args[1].eval(p)
        if self.op == "not":
            return not self.args[0].eval(p)
        start, end = self.bits
        field = (p & _mask(start, end)) >> start
        if self.op.startswith("count_"):
            field, op = bin(field).count("1"), self.op[6:]
        else:
            op = self.op
        return _COMPARE[op](field, self.value)


_COMPARE = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _mask(start: int, end: int) -> int:
    return ((1 << (end - start)) - 1) << start


class _Reader:
    """Tokens of one expression or condition, starting at ``i`` in ``text``."""

    def __init__(self, text: str, i: int, source_name: str):
        self.text, self.i, self.source_name = text, i, source_name

    def error(self, reason: str) -> GrammarSyntaxError:
        at = self.i + len(self.text[self.i:]) - len(self.text[self.i:].lstrip(" \t"))
        return GrammarSyntaxError(reason, Span.at(self.text, at, self.source_name))

    def peek(self) -> str:
        m = _TOKEN.match(self.text, self.i)
        return m.group(1) if m else ""

    def take(self, expected: str | None = None) -> str:
        m = _TOKEN.match(self.text, self.i)
        if not m or (expected is not None and m.group(1) != expected):
            got = repr(m.group(1)) if m else "end of line"
            raise self.error(f"expected {expected!r}, got {got}" if expected else f"unexpected {got}")
        self.i = m.end()
        return m.group(1)

    def number(self, limit: int | None = None) -> int:
        t = self.take()
        if not re.fullmatch(r"0[xX][0-9a-fA-F]+|[0-9]+", t):
            raise self.error(f"expected a number, got {t!r}")
        v = int(t, 0) if t[:2].lower() == "0x" else int(t)
        if v > (MASK64 if limit is None else limit):
            raise self.error(f"number {t} is too large; must be <= {MASK64 if limit is None else limit}")
        return v

    def bits(self) -> tuple[int, int]:
        """``_`` (all 64 bits) or ``[start:end]``, ``end > start``."""
        if self.peek() == "_":
            self.take()
            return 0, NUM_BITS
        if self.peek() != "[":
            raise self.error("expected '_' or '[start_bit:stop_bit]'")
        self.take("[")
        start = self.number(NUM_BITS - 1)
        self.take(":")
        end = self.number(NUM_BITS)
        self.take("]")
        if end <= start:
            raise self.error(f"end bit index {end} must be > start bit index {start}")
        return start, end

    def call(self, parse: Callable[[], _T]) -> _T:
        """``( parse() )``."""
        self.take("(")
        out = parse()
        self.take(")")
        return out


def parse_param_expr(text: str, i: int, source_name: str) -> tuple[ParamExpr, int]:
    """The parameter expression after ``name::`` at ``i``; returns it and the offset after it."""
    r = _Reader(text, i, source_name)
    t = r.peek()
    if re.fullmatch(r"0[xX][0-9a-fA-F]+|[0-9]+", t):
        return ParamExpr("const", r.number()), r.i
    r.take()
    if t == "_":
        return ParamExpr("self"), r.i
    if t in ("incr", "decr"):
        return ParamExpr(t, bits=r.call(r.bits)), r.i
    if t in ("bit_and", "bit_or"):
        return ParamExpr(t[4:], r.call(r.number)), r.i
    if t in ("set_bit", "clear_bit"):
        bit = 1 << r.call(lambda: r.number(NUM_BITS - 1))
        return (ParamExpr("or", bit) if t == "set_bit" else ParamExpr("and", MASK64 ^ bit)), r.i
    raise r.error(f"unexpected parameter expression {t!r}")


def parse_cond(text: str, i: int, source_name: str) -> tuple[Cond, int]:
    """The condition after ``%if`` at ``i``; returns it and the offset after it."""
    r = _Reader(text, i, source_name)
    return _cond(r), r.i


def _cond(r: _Reader) -> Cond:
    t = r.take()
    if t == "true":
        if r.peek() == "(":
            r.take("(")
            r.take(")")
        return Cond("true")
    if t in _COMPARE or (t.startswith("bit_count_") and t[10:] in _COMPARE):
        def compare() -> tuple[tuple[int, int], int]:
            bits = r.bits()
            r.take(",")
            return bits, r.number(None if t in _COMPARE else NUM_BITS - 1)
        bits, value = r.call(compare)
        return Cond(t if t in _COMPARE else "count_" + t[10:], bits, value)
    if t in ("and", "or"):
        def two() -> tuple[Cond, Cond]:
            a = _cond(r)
            r.take(",")
            return a, _cond(r)
        return Cond(t, args=r.call(two))
    if t == "not":
        return Cond("not", args=(r.call(lambda: _cond(r)),))
    if t in ("bit_clear", "bit_set"):
        k = r.call(lambda: r.number(NUM_BITS - 1))
        return Cond("eq", (k, k + 1), 0 if t == "bit_clear" else 1)
    if t in ("is_zeros", "is_ones"):
        start, end = r.call(r.bits)
        return Cond("eq", (start, end), 0 if t == "is_zeros" else (1 << (end - start)) - 1)
    raise r.error(f"unexpected condition {t!r}")
