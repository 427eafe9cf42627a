"""Exact digit-level IR for JSON Schema numeric leaves (``integer`` and ``number``).

Values are compared as exact decimals, the JSON Schema meaning. A bound or ``multipleOf`` given
as a Python ``float`` means the decimal its shortest ``repr`` spells (``0.1`` is one tenth, not
the binary double nearest to it), which is what the schema text said; ``int`` and
:class:`~decimal.Decimal` are taken as they are. On texts that ``json.dumps`` writes this agrees
with comparing ``json.loads`` results as Python floats.

The languages (see docs/json-schema-leaves.md):

- :func:`integer_ir`: plain JSON integer literals ``-?(0|[1-9][0-9]*)`` whose value satisfies
  the bounds and ``multipleOf``. ``-0`` is accepted where 0 is (it is valid JSON and its value
  is the integer 0). Integer-valued spellings with a fraction or an exponent (``1.0``, ``1e2``),
  which JSON Schema also counts as integers, are left out: an exact sublanguage, containing
  everything ``json.dumps`` writes for a Python ``int``. ``allow_zero_fraction=True`` adds the
  ``1.0`` / ``1.00`` spellings.
- :func:`number_ir` without any constraint: every JSON number. With bounds: every plain decimal
  (``-?int(.digits)?``) in range, and every *normalised* scientific form (one non-zero digit
  before the point: ``1e-05``, ``1.256e+20``, ``3E7``) in range, which is every spelling
  ``json.dumps`` gives a float. Other exponent spellings (``12e3``, ``0.5e1``, ``0e0``) are left
  out, because "value <= bound" over them is not a regular language. With ``multipleOf``:
  plain decimals only.

Anything that cannot be done exactly raises :class:`~gramc.schemas.approx.NotExpressible`.

>>> print(integer_ir(minimum=-5, maximum=120))
[0-9] | [1-9] [0-9] | "1" ("0" [0-9] | "1" [0-9] | "20") | "-" [0-5]
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

from gramc.compiler.ir import (
    EMPTY,
    NOTHING,
    Expr,
    Machine,
    Repeat,
    alt,
    byte_class,
    byte_range,
    literal,
    machine,
    optional,
    repeat,
    seq,
)
from gramc.compiler.regular import intersection_machine
from gramc.errors import LimitExceededError
from gramc.limits import DEFAULT_LIMITS
from gramc.schemas.approx import NotExpressible
from gramc.schemas.trie import byte_units, trie

Number = int | float | Decimal

#: Most digits of a bound (integer plus fraction digits, as written out in full).
MAX_BOUND_DIGITS = 1000
#: Largest expanded size (see :func:`expanded_size`) of a numeric leaf; bounds with hundreds
#: of significant digits can exceed it.
MAX_EXPANDED_SIZE = 30_000
#: Bounded ranges with fewer multiples than this are written out as a trie of literals.
MAX_ENUMERATED = 2000
#: Most states of the multipleOf automaton (residues x fraction positions).
MAX_MULTIPLE_STATES = 20_000
#: Most states of its product with the bounds' automaton, before minimisation.
MAX_MULTIPLE_PRODUCT = 200_000

DIGIT = byte_range(0x30, 0x39)
NONZERO = byte_range(0x31, 0x39)
ZERO = literal(b"0")
DOT = literal(b".")
MINUS = literal(b"-")
DIGITS_STAR = repeat(DIGIT, 0, None)
DIGITS_PLUS = repeat(DIGIT, 1, None)
ZEROS_STAR = repeat(ZERO, 0, None)
#: ``(\.0+)?``: the fractions whose value is zero.
ZERO_FRACTION = optional(seq(DOT, repeat(ZERO, 1, None)))

#: ``0|[1-9][0-9]*``: the integer part of a JSON number.
JSON_INT_PART = alt(ZERO, seq(NONZERO, DIGITS_STAR))
#: ``(\.[0-9]+)?``
FRACTION_OPT = optional(seq(DOT, DIGITS_PLUS))
#: ``([eE][+-]?[0-9]+)?``
EXPONENT_OPT = optional(seq(byte_class(b"eE"), optional(byte_class(b"+-")), DIGITS_PLUS))
#: Every JSON integer literal, ``-?(0|[1-9][0-9]*)``.
JSON_INTEGER = seq(optional(MINUS), JSON_INT_PART)
#: Every JSON number.
JSON_NUMBER = seq(optional(MINUS), JSON_INT_PART, FRACTION_OPT, EXPONENT_OPT)


# ---------------------------------------------------------------- public API


@lru_cache(maxsize=1024, typed=True)
def integer_ir(
    minimum: Number | None = None,
    maximum: Number | None = None,
    exclusive_minimum: Number | None = None,
    exclusive_maximum: Number | None = None,
    multiple_of: Number | None = None,
    *,
    allow_zero_fraction: bool = False,
) -> Expr:
    """The JSON integer literals whose value satisfies the given keywords.

    Bounds may be ints of any size, floats (``2.5`` as a minimum means ``>= 3``) or Decimals;
    the exclusive ones are the draft-06+ numeric spellings. ``multiple_of`` may be any positive
    number: an integer ``x`` is a multiple of ``p/q`` (lowest terms) exactly when ``p`` divides
    ``x``. The result is :data:`~gramc.compiler.ir.NOTHING` when no integer qualifies.

    Args:
        allow_zero_fraction: also accept ``12.0``, ``12.00`` ... (still exact).

    Raises:
        NotExpressible: a bound with too many digits, or a ``multipleOf`` whose automaton is
            beyond :data:`MAX_MULTIPLE_STATES` / :data:`MAX_MULTIPLE_PRODUCT`.
        ValueError: a bound that is NaN or infinite, or a ``multipleOf`` that is not positive.
    """
    lo, lo_incl, hi, hi_incl = _bounds(minimum, maximum, exclusive_minimum, exclusive_maximum)
    ilo = None if lo is None else (math.ceil(lo) if lo_incl else math.floor(lo) + 1)
    ihi = None if hi is None else (math.floor(hi) if hi_incl else math.ceil(hi) - 1)
    for value, keyword in ((ilo, "minimum"), (ihi, "maximum")):
        if value is not None:
            _check_digits(str(abs(value)), keyword)
    k = 1
    if multiple_of is not None:
        m = _to_fraction(multiple_of, "multipleOf")
        if m <= 0:
            raise ValueError(f"multipleOf must be positive, got {multiple_of!r}")
        k = m.numerator
    if k > 1 and ilo is not None and ihi is not None and ihi // k - -(-ilo // k) < MAX_ENUMERATED:
        first = -(-ilo // k) * k
        body = _capped(_texts([(str(v).encode(), EMPTY) for v in range(first, ihi + 1, k)]
                              + ([(b"-0", EMPTY)] if ilo <= 0 <= ihi else [])))
    else:
        pos, neg = _int_sign_parts(ilo, ihi)
        body = _capped(alt(pos, seq(MINUS, neg)))
        if k > 1:
            body = _multiples(body, k, 0)
    if allow_zero_fraction:
        body = seq(body, optional(seq(DOT, repeat(ZERO, 1, None))))
    return body


@lru_cache(maxsize=1024, typed=True)
def number_ir(
    minimum: Number | None = None,
    maximum: Number | None = None,
    exclusive_minimum: Number | None = None,
    exclusive_maximum: Number | None = None,
    multiple_of: Number | None = None,
) -> Expr:
    """The JSON number texts whose value satisfies the given keywords (see the module doc for
    which spellings are included when a constraint is given).

    ``multiple_of`` is exact for every positive decimal ``K * 10**-s``: a value is a multiple
    exactly when ``value * 10**s`` is an integer divisible by ``K``.

    Raises:
        NotExpressible: a bound with too many digits, or a ``multipleOf`` whose automaton is
            too large (see :data:`MAX_MULTIPLE_STATES`).
        ValueError: a NaN or infinite bound, or a ``multipleOf`` that is not positive.
    """
    lo, lo_incl, hi, hi_incl = _bounds(minimum, maximum, exclusive_minimum, exclusive_maximum)
    if lo is None and hi is None and multiple_of is None:
        return JSON_NUMBER
    pos_range, neg_range = _sign_ranges(lo, lo_incl, hi, hi_incl)
    pos = _magnitude(*pos_range) if pos_range else NOTHING
    neg = _magnitude(*neg_range) if neg_range else NOTHING
    if multiple_of is None:
        pos = alt(pos, _sci_magnitude(*pos_range) if pos_range else NOTHING)
        neg = alt(neg, _sci_magnitude(*neg_range) if neg_range else NOTHING)
    else:
        m = _to_fraction(multiple_of, "multipleOf")
        if m <= 0:
            raise ValueError(f"multipleOf must be positive, got {multiple_of!r}")
        few = _enumerate_multiples(m, lo, lo_incl, hi, hi_incl)
        if few is not None:
            return few
        return _multiples(_capped(alt(pos, seq(MINUS, neg))), *_decimal_scale(m))
    return _capped(alt(pos, seq(MINUS, neg)))


def value_spellings(value: Number) -> list[tuple[list[Expr], Expr]]:
    """The texts of ``number_ir(minimum=value, maximum=value)`` (the plain decimal spellings
    of one value and its normalised scientific ones), as :func:`~gramc.schemas.trie.trie`
    items: one unit per byte of a fixed text, then a tail of optional zeros (and the
    exponent). Written straight from the value's digits, in time linear in them, so a
    listed ``enum`` of many numbers costs no range comparisons.

    Raises:
        NotExpressible: as :func:`number_ir`, a value with too many digits.
    """
    x = _to_fraction(value, "const")
    a, frac = _split(abs(x), "const")
    if x == 0:
        return [(byte_units(b"0"), ZERO_FRACTION), (byte_units(b"-0"), ZERO_FRACTION)]
    sign = "-" if x < 0 else ""
    plain = f"{sign}{a}.{frac}" if frac else f"{sign}{a}"
    items = [(byte_units(plain.encode()), ZEROS_STAR if frac else ZERO_FRACTION)]
    if a:
        exponent, digits = len(str(a)) - 1, (str(a) + frac).rstrip("0")
    else:
        significant = frac.lstrip("0")
        exponent, digits = len(significant) - len(frac) - 1, significant
    mantissa = f"{sign}{digits[0]}.{digits[1:]}" if len(digits) > 1 else f"{sign}{digits}"
    tail = seq(ZEROS_STAR if len(digits) > 1 else ZERO_FRACTION, _exponent(exponent, exponent))
    items.append((byte_units(mantissa.encode()), tail))
    return items


def _capped(expr: Expr) -> Expr:
    size = expanded_size(expr)
    if size > MAX_EXPANDED_SIZE:
        raise NotExpressible(
            "minimum/maximum",
            f"bounds with this many digits need an automaton of {size} states "
            f"(limit {MAX_EXPANDED_SIZE})",
        )
    return expr


# ---------------------------------------------------------------- bounds


def _to_fraction(value: Number, keyword: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise TypeError(f"{keyword} must be a number, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{keyword} must be finite, got {value!r}")
        value = Decimal(repr(value))
    if not value.is_finite():
        raise ValueError(f"{keyword} must be finite, got {value!r}")
    _, digits, exp = value.as_tuple()
    if abs(int(exp)) > MAX_BOUND_DIGITS or len(digits) > MAX_BOUND_DIGITS:
        raise NotExpressible(keyword, f"the number {value} has too many digits (limit {MAX_BOUND_DIGITS})")
    return Fraction(value)


def _bounds(minimum, maximum, exclusive_minimum, exclusive_maximum):
    """The tightest lower and upper bound as (lo, lo_inclusive, hi, hi_inclusive)."""
    lo, lo_incl, hi, hi_incl = None, True, None, True
    for value, incl, keyword in ((minimum, True, "minimum"), (exclusive_minimum, False, "exclusiveMinimum")):
        if value is not None:
            f = _to_fraction(value, keyword)
            if lo is None or f > lo or (f == lo and not incl):
                lo, lo_incl = f, incl
    for value, incl, keyword in ((maximum, True, "maximum"), (exclusive_maximum, False, "exclusiveMaximum")):
        if value is not None:
            f = _to_fraction(value, keyword)
            if hi is None or f < hi or (f == hi and not incl):
                hi, hi_incl = f, incl
    return lo, lo_incl, hi, hi_incl


def _sign_ranges(lo, lo_incl, hi, hi_incl):
    """Magnitude ranges (L, L_incl, U, U_incl) for the texts without and with a '-' sign.

    None where the sign has no value in range. ``-0`` has the value 0.
    """
    pos = neg = None
    if hi is None or hi >= 0:
        L, Li = (lo, lo_incl) if lo is not None and lo >= 0 else (Fraction(0), True)
        pos = (L, Li, hi, hi_incl)
    if lo is None or lo <= 0:
        L, Li = (-hi, hi_incl) if hi is not None and hi <= 0 else (Fraction(0), True)
        neg = (L, Li, None if lo is None else -lo, lo_incl)
    return pos, neg


def _int_sign_parts(lo: int | None, hi: int | None) -> tuple[Expr, Expr]:
    """(texts without '-', magnitudes after '-') for integers in [lo, hi]."""
    pos = neg = NOTHING
    if hi is None or hi >= 0:
        pos = _int_range(max(lo, 0) if lo is not None else 0, hi)
    if lo is None or lo <= 0:
        neg = _int_range(-hi if hi is not None and hi < 0 else 0, None if lo is None else -lo)
    return pos, neg


def _check_digits(digits: str, keyword: str) -> None:
    if len(digits) > MAX_BOUND_DIGITS:
        raise NotExpressible(
            keyword, f"a bound with {len(digits)} digits is too large to lower digit by digit"
        )


def _split(x: Fraction, keyword: str = "minimum") -> tuple[int, str]:
    """A non-negative finite decimal as (integer part, fraction digits without trailing zeros)."""
    a = x.numerator // x.denominator
    r = x - a
    digits: list[str] = []
    while r:
        if len(digits) > MAX_BOUND_DIGITS:
            raise NotExpressible(keyword, f"the bound {x} has too many fraction digits")
        r *= 10
        d = r.numerator // r.denominator
        digits.append(str(d))
        r -= d
    s = "".join(digits)
    _check_digits(str(a) + s, keyword)
    return a, s


def _decimal_scale(m: Fraction) -> tuple[int, int]:
    """(K, s) with m == K / 10**s and s minimal."""
    s = 0
    while (m * 10**s).denominator != 1:
        s += 1
        if s > MAX_BOUND_DIGITS:
            raise NotExpressible("multipleOf", f"{m} is not a finite decimal")
    return int(m * 10**s), s


# ---------------------------------------------------------------- digit strings


def _d(lo: int, hi: int) -> Expr:
    """The digit class lo..hi (NOTHING when empty)."""
    return byte_range(0x30 + lo, 0x30 + hi) if 0 <= lo <= hi <= 9 else NOTHING


def _lit(s: str) -> Expr:
    return literal(s.encode("ascii"))


def _anyd(k: int) -> Expr:
    return repeat(DIGIT, k, k)


def _prefix_alts(c: str, alt_at, final: Expr) -> Expr:
    """The union of ``c[:j] . alt_at(j)`` for every j < len(c), and of ``c . final``.

    Written in chunks of :data:`_CHUNK` positions (a flat alternation inside a chunk, nested
    between chunks), so a bound of n digits costs O(n * _CHUNK) expanded IR and nests only
    n / _CHUNK deep.
    """
    e = final
    for start in range((len(c) - 1) // _CHUNK * _CHUNK, -1, -_CHUNK):
        end = min(start + _CHUNK, len(c))
        parts = [seq(_lit(c[start:j]), alt_at(j)) for j in range(start, end)]
        parts.append(seq(_lit(c[start:end]), e))
        e = alt(*parts)
    return e


_CHUNK = 16


def _lex_ge(s: str) -> Expr:
    """Digit strings of length len(s) that are >= s in lexicographic order."""
    core = s.rstrip("0")
    n = len(core)
    body = _prefix_alts(core, lambda j: seq(_d(int(core[j]) + 1, 9), _anyd(n - j - 1)), EMPTY)
    return seq(body, _anyd(len(s) - n))


def _lex_le(s: str) -> Expr:
    """Digit strings of length len(s) that are <= s in lexicographic order."""
    core = s.rstrip("9")
    n = len(core)
    body = _prefix_alts(core, lambda j: seq(_d(0, int(core[j]) - 1), _anyd(n - j - 1)), EMPTY)
    return seq(body, _anyd(len(s) - n))


def _lex_range(a: str, b: str) -> Expr:
    """Digit strings of length len(a) == len(b) between a and b (a <= b) lexicographically."""
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if i == len(a):
        return _lit(a)
    x, y = int(a[i]), int(b[i])
    rest = len(a) - i - 1
    return seq(
        _lit(a[:i]),
        alt(
            seq(_d(x, x), _lex_ge(a[i + 1 :])),
            seq(_d(x + 1, y - 1), _anyd(rest)),
            seq(_d(y, y), _lex_le(b[i + 1 :])),
        ),
    )


def _int_range(lo: int, hi: int | None) -> Expr:
    """Canonical non-negative integer texts (``0|[1-9][0-9]*``) with value in [lo, hi]."""
    if hi is not None and lo > hi:
        return NOTHING
    ls = str(lo)
    n = len(ls)
    if hi is None:
        return alt(_lex_range(ls, "9" * n), seq(NONZERO, repeat(DIGIT, n, None)))
    hs = str(hi)
    m = len(hs)
    if n == m:
        return _lex_range(ls, hs)
    parts = [_lex_range(ls, "9" * n)]
    if m - n >= 2:
        parts.append(seq(NONZERO, repeat(DIGIT, n, m - 2)))
    parts.append(_lex_range("1" + "0" * (m - 1), hs))
    return alt(*parts)


# ---------------------------------------------------------------- fraction digits
#
# A "fraction language" is a pair (empty_ok, nonempty): the digit strings w after the point
# (w == "" means no fraction part at all) whose value 0.w satisfies a condition.


def _frac_text(empty_ok: bool, nonempty: Expr) -> Expr:
    """The text after the integer part: nothing, or '.' and at least one digit."""
    return alt(EMPTY if empty_ok else NOTHING, seq(DOT, nonempty))


def _opt(empty_ok: bool, nonempty: Expr) -> Expr:
    return alt(EMPTY, nonempty) if empty_ok else nonempty


def _frac_ge(s: str, incl: bool) -> tuple[bool, Expr]:
    """0.w >= 0.s (or > when not incl); s has no trailing zeros."""
    final = DIGITS_STAR if incl else seq(ZEROS_STAR, NONZERO, DIGITS_STAR)
    if not s:
        return (True, DIGITS_PLUS) if incl else (False, final)
    return False, _prefix_alts(s, lambda j: seq(_d(int(s[j]) + 1, 9), DIGITS_STAR), final)


def _frac_le(s: str, incl: bool) -> tuple[bool, Expr]:
    """0.w <= 0.s (or < when not incl); s has no trailing zeros."""
    if not s:
        return (True, repeat(ZERO, 1, None)) if incl else (False, NOTHING)

    def alt_at(j: int) -> Expr:  # a smaller digit, or (j >= 1) the end: 0.s[:j] < 0.s
        return alt(seq(_d(0, int(s[j]) - 1), DIGITS_STAR), EMPTY if j else NOTHING)

    return True, _prefix_alts(s, alt_at, ZEROS_STAR if incl else NOTHING)


def _frac_range(b: str, f: str, lo_incl: bool, hi_incl: bool) -> tuple[bool, Expr]:
    """0.b <= 0.w <= 0.f (strictness per flag); b, f without trailing zeros, 0.b <= 0.f."""
    n = max(len(b), len(f))
    bp, fp = b.ljust(n, "0"), f.ljust(n, "0")
    if bp == fp:
        if not (lo_incl and hi_incl):
            return False, NOTHING
        return (True, repeat(ZERO, 1, None)) if not b else (False, seq(_lit(b), ZEROS_STAR))
    i = 0
    while bp[i] == fp[i]:
        i += 1
    prefix, x, y = bp[:i], int(bp[i]), int(fp[i])
    ge_empty, ge_ne = _frac_ge(bp[i + 1 :].rstrip("0"), lo_incl)
    le_empty, le_ne = _frac_le(fp[i + 1 :].rstrip("0"), hi_incl)
    nonempty = [
        seq(
            _lit(prefix),
            alt(
                seq(_d(x, x), _opt(ge_empty, ge_ne)),
                seq(_d(x + 1, y - 1), DIGITS_STAR),
                seq(_d(y, y), _opt(le_empty, le_ne)),
            ),
        )
    ]
    empty_ok = False
    if x == 0 and ge_empty:  # w a prefix of the bound followed by implicit zeros: value == 0.b
        core = prefix.rstrip("0")  # w = core 0{0..i-len(core)}
        if core:
            nonempty.append(seq(_lit(core), repeat(ZERO, 0, i - len(core))))
        else:
            empty_ok = True
            if i:
                nonempty.append(repeat(ZERO, 1, i))
    return empty_ok, alt(*nonempty)


# ---------------------------------------------------------------- magnitudes


def _magnitude(lo: Fraction, lo_incl: bool, hi: Fraction | None, hi_incl: bool) -> Expr:
    """Plain decimal texts ``(0|[1-9][0-9]*)(\\.[0-9]+)?`` with value in the range (lo >= 0)."""
    if hi is not None and (lo > hi or (lo == hi and not (lo_incl and hi_incl))):
        return NOTHING
    a, b = _split(lo, "minimum")
    if not b and lo_incl:  # x >= a with a an integer: the cheap form (no a + 1)
        if hi is None:
            return seq(_int_range(a, None), FRACTION_OPT)
        d, f = _split(hi, "maximum")
        if a < d:
            return alt(
                seq(_int_range(a, d - 1), FRACTION_OPT),
                seq(_lit(str(d)), _frac_text(*_frac_le(f, hi_incl))),
            )
    if hi is None:
        return alt(
            seq(_lit(str(a)), _frac_text(*_frac_ge(b, lo_incl))),
            seq(_int_range(a + 1, None), FRACTION_OPT),
        )
    d, f = _split(hi, "maximum")
    if a == d:
        return seq(_lit(str(a)), _frac_text(*_frac_range(b, f, lo_incl, hi_incl)))
    return alt(
        seq(_lit(str(a)), _frac_text(*_frac_ge(b, lo_incl))),
        seq(_int_range(a + 1, d - 1), FRACTION_OPT),
        seq(_lit(str(d)), _frac_text(*_frac_le(f, hi_incl))),
    )


def _normalise(x: Fraction) -> tuple[Fraction, int]:
    """x > 0 as (m, e) with x == m * 10**e and 1 <= m < 10."""
    e = len(str(x.numerator)) - len(str(x.denominator))
    m = x / Fraction(10) ** e
    while m >= 10:
        m, e = m / 10, e + 1
    while m < 1:
        m, e = m * 10, e - 1
    return m, e


_MANTISSA_ANY = seq(NONZERO, FRACTION_OPT)
_E = byte_class(b"eE")


def _exponent(lo: int | None, hi: int | None) -> Expr:
    """``[eE][+-]?[0-9]+`` with the exponent's value in [lo, hi] (None: unbounded)."""
    parts = []
    nn_lo = lo if lo is not None and lo > 0 else 0
    if hi is None or hi >= nn_lo:
        parts.append(seq(optional(literal(b"+")), ZEROS_STAR, _int_range(nn_lo, hi)))
    np_lo = -hi if hi is not None and hi < 0 else 0
    np_hi = None if lo is None else -lo
    if np_hi is None or np_hi >= np_lo:
        parts.append(seq(MINUS, ZEROS_STAR, _int_range(np_lo, np_hi)))
    return seq(_E, alt(*parts))


def _mantissa(lo: Fraction, lo_incl: bool, hi: Fraction, hi_incl: bool) -> Expr:
    if lo < 1:
        lo, lo_incl = Fraction(1), True
    if hi >= 10:
        hi, hi_incl = Fraction(10), False
    return _magnitude(lo, lo_incl, hi, hi_incl)


def _sci_magnitude(lo: Fraction, lo_incl: bool, hi: Fraction | None, hi_incl: bool) -> Expr:
    """Normalised scientific texts ``[1-9](\\.[0-9]+)?[eE][+-]?[0-9]+`` with value in range."""
    if hi is not None and (hi <= 0 or lo > hi):
        return NOTHING
    ten = Fraction(10)
    if lo == 0:
        if hi is None:
            return seq(_MANTISSA_ANY, _exponent(None, None))
        u, eu = _normalise(hi)
        return alt(
            seq(_MANTISSA_ANY, _exponent(None, eu - 1)),
            seq(_mantissa(Fraction(1), True, u, hi_incl), _exponent(eu, eu)),
        )
    l, el = _normalise(lo)
    if hi is None:
        return alt(
            seq(_mantissa(l, lo_incl, ten, False), _exponent(el, el)),
            seq(_MANTISSA_ANY, _exponent(el + 1, None)),
        )
    u, eu = _normalise(hi)
    if el == eu:
        return seq(_mantissa(l, lo_incl, u, hi_incl), _exponent(el, el))
    return alt(
        seq(_mantissa(l, lo_incl, ten, False), _exponent(el, el)),
        seq(_MANTISSA_ANY, _exponent(el + 1, eu - 1)) if eu - el >= 2 else NOTHING,
        seq(_mantissa(Fraction(1), True, u, hi_incl), _exponent(eu, eu)),
    )


# ---------------------------------------------------------------- multipleOf


#: The bytes the residue automaton reads.
_MINUS_MASK, _DOT_MASK = 1 << 0x2D, 1 << 0x2E


@lru_cache(maxsize=64)
def residue_machine(k: int, s: int) -> Expr:
    """Texts ``-?[0-9]+(\\.[0-9]*)?`` whose value times ``10**s`` is an integer divisible by
    ``k``, as a :class:`~gramc.compiler.ir.Machine` of ``1 + k * (s + 2)`` states.

    States: the start (a sign may come), then ``(j, r)``: ``j == -1`` in the integer part,
    else ``j`` fraction digits read (at ``j == s`` only '0' may follow); ``r`` is the residue
    mod k of the digits read so far (integer digits, then the first s fraction digits). A
    state is final when ``r * 10**(s - j)`` (``s`` for the integer part) is divisible by k.
    No regular expression: for k coprime to 10 the smallest one is exponentially larger than
    these k states (state elimination gives millions of nodes for k = 7).
    """
    def at(j: int, r: int) -> int:
        return 1 + (j + 1) * k + r

    n = 1 + k * (s + 2)
    edges: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    accept = [False] * n
    for d in range(10):
        edges[0].append((1 << (0x30 + d), at(-1, d % k)))
    edges[0].append((_MINUS_MASK, at(-1, 0)))
    for j in range(-1, s + 1):
        for r in range(k):
            q = at(j, r)
            accept[q] = r * 10 ** (s - max(j, 0)) % k == 0
            if j < s:
                for d in range(10):
                    edges[q].append((1 << (0x30 + d), at(j + 1 if j >= 0 else -1, (10 * r + d) % k)))
            else:
                edges[q].append((1 << 0x30, q))
            if j == -1:
                edges[q].append((_DOT_MASK, at(0, r)))
    return machine(edges, accept)


def _multiples(texts: Expr, k: int, s: int) -> Expr:
    """The texts of ``texts`` (plain decimals, a sign allowed) whose value is a multiple of
    ``k / 10**s``: the product of their DFA with :func:`residue_machine`, minimised, kept as
    one Machine leaf."""
    if k * (s + 2) > MAX_MULTIPLE_STATES:
        raise NotExpressible(
            "multipleOf",
            f"the divisibility automaton needs {k * (s + 2)} states (limit {MAX_MULTIPLE_STATES})",
        )
    try:
        return intersection_machine(texts, residue_machine(k, s), _PRODUCT_LIMITS)
    except LimitExceededError:
        raise NotExpressible(
            "multipleOf",
            f"divisibility by {k} within these bounds needs more than {MAX_MULTIPLE_PRODUCT} states",
        ) from None


_PRODUCT_LIMITS = replace(DEFAULT_LIMITS, max_dfa_states=MAX_MULTIPLE_PRODUCT)


def _texts(items: list[tuple[bytes, Expr]]) -> Expr:
    """The alternation of ``text . tail`` for every item, as a :func:`~gramc.schemas.trie.trie`."""
    return trie((byte_units(text), tail) for text, tail in items)


def _enumerate_multiples(m: Fraction, lo, lo_incl, hi, hi_incl) -> Expr | None:
    """Plain decimal texts of the few multiples of m in a bounded range, or None (too many)."""
    if lo is None or hi is None:
        return None
    first = math.ceil(lo / m) if lo_incl else math.floor(lo / m) + 1
    last = math.floor(hi / m) if hi_incl else math.ceil(hi / m) - 1
    if last - first >= MAX_ENUMERATED:
        return None
    items: list[tuple[bytes, Expr]] = []
    for i in range(first, last + 1):
        v = i * m
        a, f = _split(abs(v), "multipleOf")
        sign = "-" if v < 0 else ""
        if f:
            items.append((f"{sign}{a}.{f}".encode(), ZEROS_STAR))
        else:
            items.append((f"{sign}{a}".encode(), ZERO_FRACTION))
            if v == 0:
                items.append((b"-0", ZERO_FRACTION))
    return _texts(items)


def expanded_size(expr: Expr) -> int:
    """The size of ``expr`` with shared sub-expressions counted at every use (what a Thompson
    NFA built from it costs), computed without expanding."""
    sizes: dict[Expr, int] = {}
    stack = [(expr, False)]
    while stack:
        node, ready = stack.pop()
        if node in sizes:
            continue
        kids = node.children()
        if not ready and kids:
            stack.append((node, True))
            stack.extend((c, False) for c in kids if c not in sizes)
            continue
        total = (node.weight() if isinstance(node, Machine) else 1) + sum(sizes[c] for c in kids)
        if isinstance(node, Repeat):
            total = 1 + sizes[node.item] * max(1, node.max if node.max is not None else node.min + 1)
        sizes[node] = total
    return sizes[expr]
