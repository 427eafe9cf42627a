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
from math import gcd
from typing import Callable

from gramc.compiler.ir import Expr
from gramc.errors import GrammarSyntaxError, SchemaError, UnsupportedFeatureError
from gramc.schemas.approx import NotExpressible

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
              where: dict[str, str], report: Report) -> Expr:
    """The JSON string literals whose value satisfies the constraints; each constraint the
    primitive cannot do exactly is reported and dropped, then the call is retried."""
    from gramc.schemas.strings import json_string_ir

    args = {"min_length": min_length, "max_length": max_length, "pattern": pattern, "format": fmt}
    names = {"minLength": "min_length", "maxLength": "max_length", "pattern": "pattern", "format": "format"}
    while True:
        try:
            return json_string_ir(**args)
        except NotExpressible as err:
            dropped = _drop(args, names, err.keyword)
            report(err.keyword, where.get(err.keyword, where.get("", "#")), err.reason)
            if not dropped:
                raise SchemaError(f"{err.keyword}: {err.reason}", where.get("", "#")) from None
        except UnsupportedFeatureError as err:
            if args["pattern"] is None:
                raise
            report("pattern", where.get("pattern", "#"), f"the pattern {args['pattern']!r} uses {err.reason}")
            args["pattern"] = None
        except GrammarSyntaxError as err:
            raise SchemaError(f"invalid pattern {args['pattern']!r}: {err.reason}",
                              where.get("pattern", "#")) from None


def _drop(args: dict, names: dict, keyword: str) -> bool:
    key = names.get(keyword)
    if key is None or args.get(key) is None:
        for key in ("format", "pattern"):  # an unnamed failure: drop the most exotic constraint
            if args[key] is not None:
                args[key] = None
                return True
        return False
    args[key] = None
    return True


def number_ir(integer: bool, bounds: dict, multiple_of: int | float | Decimal | None,
              where: dict[str, str], report: Report) -> Expr:
    """The JSON number (or integer) literals within ``bounds`` (``minimum``, ``maximum``,
    ``exclusive_minimum``, ``exclusive_maximum``) and ``multiple_of``."""
    from gramc.schemas import numbers

    fn = numbers.integer_ir if integer else numbers.number_ir
    args = dict(bounds, multiple_of=multiple_of)
    if integer:  # JSON Schema counts 1.0 as an integer
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
