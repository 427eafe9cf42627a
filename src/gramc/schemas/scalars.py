"""Scalars: the strings, numbers, booleans and null a plain conjunction allows.

The keywords of every part are combined (the longest ``minLength``, the tightest bound, the
least common multiple of ``multipleOf``...) and handed to the leaf primitives through
:mod:`gramc.schemas.leaves`, which applies the walker's policy where they cannot be exact.
Several ``pattern``/``format`` keywords are intersected as languages. Object keys use the
same strings: :meth:`Scalars.pattern_lang` gives the names a ``patternProperties`` regex
matches.

The *universe* of a kind (:meth:`Scalars.universe`) is the set of spellings within which
every leaf language is complete, so that the walker can subtract a ``not`` exactly.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import TYPE_CHECKING, Union

from gramc.compiler.ir import NOTHING, Expr, alt, literal
from gramc.errors import SchemaError
from gramc.schemas import leaves
from gramc.schemas.atoms import Keywords, Node, Synth
from gramc.schemas.jsontext import PLAIN_NUMBER, canonical_string_universe
from gramc.compiler.regular import intersection, matches

if TYPE_CHECKING:
    from gramc.schemas.compiler import SchemaCompiler

__all__ = ["Scalars"]

#: A bound of a number: (value, exclusive, keyword, where).
Bound = tuple[Union[int, float], bool, str, str]


class Scalars:
    """Builds the scalar kinds for a :class:`~gramc.schemas.compiler.SchemaCompiler`."""

    def __init__(self, compiler: SchemaCompiler):
        self.compiler = compiler
        self._patterns: dict[str, Expr | None] = {}  # see pattern_lang
        self._string_universe: Expr | None = None

    def build(self, parts: list[Node | Synth], kind: str) -> Expr:
        """The instances of scalar ``kind`` that satisfy every (positive) part."""
        if kind == "null":
            return literal(b"null")
        if kind == "boolean":
            return alt(literal(b"true"), literal(b"false"))
        if kind == "string":
            return self.build_string(parts)
        return self.build_number(parts)

    # ------------------------------------------------------------ strings

    def build_string(self, parts: list[Node | Synth]) -> Expr:
        lo: int | None = None
        hi: int | None = None
        patterns: list[str] = []
        formats: list[str] = []
        where: dict[str, str] = {}
        for part in parts:
            kw = self.compiler.part(part)
            n = kw.count("minLength")
            if n is not None and (lo is None or n > lo):
                lo, where["minLength"] = n, kw.where("minLength")
            n = kw.count("maxLength")
            if n is not None and (hi is None or n < hi):
                hi, where["maxLength"] = n, kw.where("maxLength")
            for key, acc in (("pattern", patterns), ("format", formats)):
                s = kw.string(key)
                if s is not None and s not in acc:
                    acc.append(s)
                    where.setdefault(key, kw.where(key))
        if lo is not None and hi is not None and lo > hi:
            return NOTHING
        where[""] = where.get("pattern") or where.get("format") or (parts[0].where if parts else "#")
        expr = self.string_leaf(lo, hi, patterns[0] if patterns else None, formats[0] if formats else None, where)
        for extra in patterns[1:]:
            expr = intersection(expr, self.string_leaf(None, None, extra, None, where))
        for extra in formats[1:]:
            expr = intersection(expr, self.string_leaf(None, None, None, extra, where))
        return expr

    def string_leaf(self, lo: int | None, hi: int | None, pattern: str | None, fmt: str | None,
                    where: dict[str, str]) -> Expr:
        c = self.compiler
        return leaves.string_ir(lo, hi, pattern, fmt, where, c.approx, c.options.strict, c.note, c.limits)

    def any_string(self) -> Expr:
        """Every JSON string literal."""
        return self.string_leaf(None, None, None, None, {})

    def pattern_lang(self, regex: str, where: str = "#") -> Expr | None:
        """The JSON string literals whose value matches ``regex`` (None: not exactly);
        ``where`` locates it for the error if it is no regular expression."""
        if regex not in self._patterns:
            failures: list[tuple[str, str, str]] = []
            expr = leaves.string_ir(None, None, regex, None, {"": where},
                                    lambda *failure: failures.append(failure), limits=self.compiler.limits)
            self._patterns[regex] = None if failures else expr  # the caller reports a failure
        return self._patterns[regex]

    def pattern_matches(self, regex: str, name: str) -> bool | None:
        """Whether the name ``name`` matches ``regex`` (None: the pattern is not exact)."""
        lang = self.pattern_lang(regex)
        if lang is None:
            return None
        return matches(lang, json.dumps(name).encode())

    # ------------------------------------------------------------ numbers

    def build_number(self, parts: list[Node | Synth]) -> Expr:
        integer = "num" not in self.compiler.types(parts)
        lower: list[Bound] = []
        upper: list[Bound] = []
        multiples: list[int | float] = []
        where: dict[str, str] = {}
        for part in parts:
            kw = self.compiler.part(part)
            _bounds(kw, lower, upper)
            m = kw.number("multipleOf")
            if m is not None:
                if m <= 0:
                    raise SchemaError("multipleOf must be greater than 0", kw.where("multipleOf"))
                multiples.append(m)
                where.setdefault("multipleOf", kw.where("multipleOf"))
        bounds = {}
        if lower:  # the tightest lower bound (for equal values the exclusive one)
            value, exclusive, keyword, at = max(lower, key=lambda b: (_exact(b), b[1]))
            bounds["exclusive_minimum" if exclusive else "minimum"] = value
            where[keyword] = at
        if upper:
            value, exclusive, keyword, at = min(upper, key=lambda b: (_exact(b), not b[1]))
            bounds["exclusive_maximum" if exclusive else "maximum"] = value
            where[keyword] = at
        where[""] = next(iter(where.values()), parts[0].where if parts else "#")
        multiple = leaves.lcm_of(multiples) if multiples else None
        return leaves.number_ir(integer, bounds, multiple, where, self.compiler.approx,
                                zero_fraction_integers=self.compiler.doc.draft != 4)

    # ------------------------------------------------------------ not

    def universe(self, kind: str) -> Expr:
        """The spellings within which every leaf language of ``kind`` is complete (it holds all
        of them for each of its values), so that a difference taken inside is exact."""
        if kind == "number":
            return PLAIN_NUMBER
        if kind == "string":
            if self._string_universe is None:
                self._string_universe = canonical_string_universe(self.any_string())
            return self._string_universe
        return alt(literal(b"true"), literal(b"false"), literal(b"null"))


def _bounds(kw: Keywords, lower: list[Bound], upper: list[Bound]) -> None:
    """Add the bounds ``kw`` gives to ``lower`` and ``upper``."""
    for key, exkey, acc in (("minimum", "exclusiveMinimum", lower), ("maximum", "exclusiveMaximum", upper)):
        value = kw.number(key)
        ex = kw.get(exkey)
        if isinstance(ex, bool):  # draft-04: a flag on minimum / maximum
            if value is not None:
                acc.append((value, ex, exkey if ex else key, kw.where(exkey if ex else key)))
            continue
        if value is not None:
            acc.append((value, False, key, kw.where(key)))
        exclusive = kw.number(exkey)
        if exclusive is not None:
            acc.append((exclusive, True, exkey, kw.where(exkey)))


def _exact(bound: Bound) -> Fraction:
    return leaves.exact_fraction(bound[0])
