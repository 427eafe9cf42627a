"""The leaf languages (strings, numbers) the walker takes from the primitives, with the
walker's policy applied: a constraint a primitive cannot express exactly is dropped (an
over-approximation, reported) or, in strict mode, refused.

The primitives themselves live in :mod:`gramc.schemas.strings`, :mod:`gramc.schemas.numbers`
and :mod:`gramc.schemas.formats`; this module only decides what to do when they raise
:class:`~gramc.schemas.approx.NotExpressible`.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from math import gcd
from typing import Callable

from gramc.compiler.ir import Expr
from gramc.errors import LimitExceededError, SchemaError
from gramc.limits import DEFAULT_LIMITS, Limits
from gramc.schemas.approx import InvalidKeyword, NotExpressible, TooLarge

Report = Callable[[str, str, str], None]  # (keyword, pointer, reason)


def exact_fraction(value: int | float | Decimal) -> Fraction:
    """The decimal a schema number spells (``0.1`` is one tenth)."""
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(value)


def lcm_of(values: list[int | float]) -> int | Decimal:
    """The least common multiple of positive decimals (an int when it is one)."""
    fracs = [exact_fraction(v) for v in values]
    num, den = fracs[0].numerator, fracs[0].denominator
    for f in fracs[1:]:
        num = num * f.numerator // gcd(num, f.numerator)
        den = gcd(den, f.denominator)
    if den == 1:
        return num
    with localcontext() as ctx:
        ctx.prec = 4000
        return Decimal(num) / Decimal(den)


def string_ir(min_length: int | None, max_length: int | None, pattern: str | None, fmt: str | None,
              where: dict[str, str], report: Report, strict: bool = False,
              warn: Callable[[str], None] | None = None, limits: Limits = DEFAULT_LIMITS) -> Expr:
    """The JSON string literals whose value satisfies the constraints.

    The primitive gets all of them at once; when it cannot combine them compactly, each
    constraint is built on its own and the languages are intersected exactly (as automata).
    A constraint that cannot be built exactly at all is reported and dropped. Formats gramc
    does not know are annotations (a warning through ``warn``, nothing enforced); formats it
    only over-approximates are reported, except in strict mode for ``time``/``date-time``,
    which then use the exact (large) leap-second automaton. ``limits`` bounds the pattern and
    the counted lengths (:class:`~gramc.errors.LimitExceededError`, never approximated)."""
    from gramc.schemas.strings import json_string_ir

    def at(key: str) -> str:
        return where.get(key, where.get("", "#"))

    if fmt is not None:
        fmt = _known_format(fmt, at("format"), warn)
    try:
        return json_string_ir(min_length, max_length, pattern, fmt, limits=limits)
    except InvalidKeyword as err:
        raise SchemaError(err.reason, at(err.keyword)) from None
    except NotExpressible:
        pass
    except LimitExceededError as err:
        length = err.where in ("minLength", "maxLength")
        place = f"{err.where} at {at(err.where)}" if length else f"{err.where} in the pattern at {at('pattern')}"
        raise LimitExceededError(err.limit, err.value, err.maximum, place, err.span) from None
    except ValueError as err:
        raise SchemaError(str(err), at("minLength")) from None
    built = []
    if pattern is not None:
        built.append(_pattern(pattern, at, report, limits))
    if fmt is not None:
        built.append(_format_lang(fmt, at("format"), report, strict))
    out = _intersect([x for x in built if x is not None], "format", at("format"), report)
    if min_length or max_length is not None:
        lengths = _lengths(min_length, max_length, at, report, limits)
        if lengths is not None:
            out = lengths if out is None else _intersect([out, lengths], "maxLength", at("maxLength"), report)
    return json_string_ir() if out is None else out


def _known_format(fmt: str, where: str, warn) -> str | None:
    from gramc.schemas.formats import format_spec

    if format_spec(fmt) is None:
        if warn is not None:
            warn(f"format {fmt!r} at {where} is unknown to gramc: it is an annotation, not enforced")
        return None
    return fmt


def _one(build: Callable[[], Expr], at, report: Report) -> Expr | None:
    try:
        return build()
    except NotExpressible as err:
        report(err.keyword, at(err.keyword.split("/")[0]), err.reason)
        return None


def _pattern(pattern: str, at, report: Report, limits: Limits) -> Expr | None:
    """The pattern's strings; where the exact automaton is too large, the smaller
    over-approximation of :func:`~gramc.schemas.strings.relaxed_pattern_ir` (reported), so
    the characters the pattern allows are still enforced."""
    from gramc.schemas.strings import json_string_ir, relaxed_pattern_ir

    try:
        return json_string_ir(pattern=pattern, limits=limits)
    except TooLarge as err:
        try:
            relaxed, counts = relaxed_pattern_ir(pattern, limits)
        except NotExpressible:
            report(err.keyword, at("pattern"), err.reason)
            return None
        report("pattern", at("pattern"), f"{err.reason}; enforced with the repetitions {', '.join(counts)}")
        return relaxed
    except NotExpressible as err:
        report(err.keyword, at(err.keyword.split("/")[0]), err.reason)
        return None


def _lengths(min_length: int | None, max_length: int | None, at, report: Report, limits: Limits) -> Expr | None:
    """The strings within both length limits; when one limit cannot be built (a
    ``maxLength`` above :data:`~gramc.schemas.strings.MAX_COUNTED_MAX_LENGTH`), it is
    reported and the other one is still enforced (a ``maxLength`` of 2**31 - 1 must not drop
    a ``minLength`` of 50)."""
    from gramc.schemas.strings import json_string_ir

    try:
        return json_string_ir(min_length, max_length, limits=limits)
    except NotExpressible as err:
        report(err.keyword, at(err.keyword.split("/")[0]), err.reason)
        if err.keyword == "maxLength" and min_length:
            return _one(lambda: json_string_ir(min_length, limits=limits), at, report)
        if err.keyword == "minLength" and max_length is not None:
            return _one(lambda: json_string_ir(max_length=max_length, limits=limits), at, report)
        return None


def _format_lang(fmt: str, where: str, report: Report, strict: bool) -> Expr | None:
    from gramc.schemas.strings import json_string_ir

    try:
        return json_string_ir(format=fmt)
    except NotExpressible as err:
        if strict and fmt in ("time", "date-time"):
            return json_string_ir(format=fmt, exact_leap_seconds=True)
        report("format", where, err.reason)
        return json_string_ir(format=fmt, allow_approximate_format=True)


def _intersect(langs: list[Expr], keyword: str, where: str, report: Report) -> Expr | None:
    """The intersection of the languages; when an automaton would be too large, the later
    language is dropped and ``keyword`` reported."""
    if not langs:
        return None
    out = langs[0]
    for other in langs[1:]:
        both = _intersection(out, other)
        if isinstance(both, str):
            report(keyword, where, f"the string constraints together need too large an automaton ({both})")
        else:
            out = both
    return out


@lru_cache(maxsize=32)
def _intersection(a: Expr, b: Expr) -> Expr | str:
    """``a`` and ``b`` intersected, or why not (the limit's message), memoised: a schema
    repeats its string leaves, and a word-count pattern with a maxLength of 300 takes
    seconds to intersect, or to fail."""
    from gramc.compiler.regular import intersection

    try:
        return intersection(a, b)
    except LimitExceededError as err:
        return str(err)


def number_ir(integer: bool, bounds: dict, multiple_of: int | float | Decimal | None,
              where: dict[str, str], report: Report, zero_fraction_integers: bool = True) -> Expr:
    """The JSON number (or integer) literals within ``bounds`` (``minimum``, ``maximum``,
    ``exclusive_minimum``, ``exclusive_maximum``) and ``multiple_of``; an integer written
    with a zero fraction (``1.0``) counts as one where ``zero_fraction_integers`` (draft 6
    on; drafts 3 and 4 say an integer has no fraction or exponent)."""
    from gramc.schemas import numbers

    fn = numbers.integer_ir if integer else numbers.number_ir
    args = dict(bounds, multiple_of=multiple_of)
    if integer and zero_fraction_integers:
        args["allow_zero_fraction"] = True
    keys = {"multipleOf": "multiple_of", "minimum": "minimum", "maximum": "maximum",
            "exclusiveMinimum": "exclusive_minimum", "exclusiveMaximum": "exclusive_maximum"}
    while True:
        try:
            return fn(**args)
        except NotExpressible as err:
            key = keys.get(err.keyword)
            report(err.keyword, where.get(err.keyword, where.get("", "#")), err.reason)
            if key is None or args.get(key) is None:
                raise SchemaError(f"{err.keyword}: {err.reason}", where.get("", "#")) from None
            args[key] = None
        except (ValueError, TypeError) as err:
            raise SchemaError(str(err), where.get("", "#")) from None
