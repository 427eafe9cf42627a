"""JSON text in the IR: whitespace, separators, and the literal spellings of known values.

A known string (a ``const``, an ``enum`` member, a property name) is written the ways
encoders write it: printable ASCII characters raw, every other character raw or escaped
(``\\u`` hex digits in either case), so a constant matches what ``json.dumps`` writes with or
without ``ensure_ascii``. ``all_spellings=True`` gives every spelling JSON allows (``"\\u0061"``
for ``"a"`` too); the compiler subtracts that one wherever a name must be excluded, so that
no spelling of a declared name slips through as an "other" name. A known number is written in
every spelling the number primitives use for its value (``1``, ``1.0``, ``1e0``, ...; see
docs/json-schema.md, "Constants").

>>> ws = Whitespace("compact")
>>> print(value_ir({"a": [True, None]}, ws))
"{\\"a\\":[true,null]}"
>>> from gramc.compiler.regular import matches
>>> lit = string_literal_ir("é/")
>>> [matches(lit, t) for t in (b'"\\xc3\\xa9/"', b'"\\\\u00E9/"', b'"\\\\u00e9\\\\/"')]
[True, True, False]
>>> matches(string_literal_ir("/", all_spellings=True), b'"\\\\/"')
True
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from gramc.compiler import stackless
from gramc.compiler.ir import EMPTY, Expr, alt, byte_class, byte_range, literal, optional, repeat, seq, text
from gramc.compiler.stackless import Call
from gramc.errors import SchemaError
from gramc.schemas.approx import NotExpressible
from gramc.schemas.numbers import value_spellings
from gramc.schemas.trie import byte_units, trie

JSON_WS_BYTES = b" \t\n\r"
QUOTE = literal(b'"')
_SHORT_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}


class Whitespace:
    """The whitespace allowed between two JSON tokens, and the separators built from it."""

    def __init__(self, mode: str = "flexible", max_run: int | None = None):
        self.mode = mode
        self.gap: Expr = EMPTY if mode == "compact" else repeat(byte_class(JSON_WS_BYTES), 0, max_run)
        self.comma = seq(self.gap, literal(b","), self.gap)
        self.colon = seq(self.gap, literal(b":"), self.gap)

    def member(self, key: Expr, value: Expr) -> Expr:
        """``key : value`` with whitespace around the colon."""
        return seq(key, self.colon, value)

    def wrap(self, open_: bytes, close: bytes, nullable: bool, nonempty: Expr) -> Expr:
        """``open (close | body close)`` with one whitespace gap on each inner side, so a
        bounded gap is never doubled by an empty body."""
        closing = seq(self.gap, literal(close))
        return seq(literal(open_), alt(closing if nullable else alt(), seq(self.gap, nonempty, closing)))

    def separated(self, items: list[Expr]) -> Expr:
        """The items joined by commas (EMPTY for no items)."""
        out: list[Expr] = []
        for i, item in enumerate(items):
            out.append(item if i == 0 else seq(self.comma, item))
        return seq(*out)


def _hex4(code: int) -> Expr:
    parts = []
    for ch in f"{code:04x}":
        parts.append(byte_class(ch.encode() + ch.upper().encode()))
    return seq(literal(b"\\u"), *parts)


def char_ir(ch: str, all_spellings: bool = True) -> Expr:
    """The JSON spellings of one character inside a string literal (printable ASCII other
    than ``"`` and ``\\`` only raw, unless ``all_spellings``)."""
    code = ord(ch)
    if not all_spellings and 0x20 <= code < 0x7F and ch not in '"\\':
        return text(ch)
    options: list[Expr] = []
    if code >= 0x20 and ch not in '"\\':
        options.append(text(ch))
    if ch in _SHORT_ESCAPES:
        options.append(literal(b"\\" + _SHORT_ESCAPES[ch].encode()))
    if code < 0x10000:
        if not 0xD800 <= code <= 0xDFFF:
            options.append(_hex4(code))
    else:
        v = code - 0x10000
        options.append(seq(_hex4(0xD800 + (v >> 10)), _hex4(0xDC00 + (v & 0x3FF))))
    return alt(*options)


def char_spellings(ch: str) -> list[bytes]:
    """The byte strings :func:`char_ir` (``all_spellings``) matches for ``ch``, not a lone
    surrogate, with the hex digits of ``\\u`` escapes in lower case (either case is one)."""
    code = ord(ch)
    out = []
    if code >= 0x20 and ch not in '"\\':
        out.append(ch.encode("utf-8"))
    if ch in _SHORT_ESCAPES:
        out.append(b"\\" + _SHORT_ESCAPES[ch].encode())
    if code < 0x10000:
        out.append(b"\\u%04x" % code)
    else:
        v = code - 0x10000
        out.append(b"\\u%04x\\u%04x" % (0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)))
    return out


def string_literal_ir(value: str, all_spellings: bool = False) -> Expr:
    """The JSON string literals (quotes included) whose decoded value is ``value``: the
    encoder spellings, or with ``all_spellings`` every one."""
    return seq(*string_units(value, all_spellings), QUOTE)


def string_units(value: str, all_spellings: bool = False) -> list[Expr]:
    """:func:`string_literal_ir` but for its closing quote, as trie units: the opening quote,
    then the spellings of each character."""
    if not all_spellings and value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return [QUOTE, *byte_units(value.encode())]  # each character spelled raw only
    return [QUOTE, *(_char_unit(c, all_spellings) for c in value)]


@lru_cache(maxsize=4096)
def _char_unit(ch: str, all_spellings: bool) -> Expr:
    code = ord(ch)
    return _hex4(code) if 0xD800 <= code <= 0xDFFF else char_ir(ch, all_spellings)


def number_literal_ir(value: int | float) -> Expr:
    """The ``json.dumps`` spelling of a number, and for an integral value both ``1`` and ``1.0``."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SchemaError(f"{value!r} is not a JSON number")
        spellings = {json.dumps(value)}
        if value.is_integer():
            spellings.add(str(int(value)))
    else:
        spellings = {str(value), f"{value}.0"}
    if any(s in ("0", "-0", "0.0", "-0.0") for s in spellings):
        spellings |= {"0", "-0", "0.0", "-0.0"}
    return alt(*(text(s) for s in sorted(spellings, key=lambda s: (len(s), s))))


def number_value_ir(value: int | float) -> Expr:
    """Every spelling of a number that :func:`gramc.schemas.numbers.number_ir` writes for a
    value equal to it (``1``, ``1.0``, ``1e0``, ...), else its ``json.dumps`` spellings."""
    spelled = _number_items(value)
    return number_literal_ir(value) if spelled is None else trie(spelled)


def _number_items(value: int | float) -> list[tuple[list[Expr], Expr]] | None:
    """:func:`number_value_ir` as trie items (None: too many digits for them)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(f"{value!r} is not a JSON number")
    try:
        return value_spellings(value)
    except NotExpressible:
        return None


#: Plain JSON numbers (no exponent): every number has such a spelling, and every number
#: language the primitives build contains all of the plain spellings of its values.
PLAIN_NUMBER = seq(optional(literal(b"-")), alt(literal(b"0"), seq(byte_range(0x31, 0x39),
                   repeat(byte_range(0x30, 0x39), 0, None))),
                   optional(seq(literal(b"."), repeat(byte_range(0x30, 0x39), 1, None))))


def canonical_string_universe(any_string: Expr) -> Expr:
    """The string literals in which no printable ASCII character (other than ``"`` and
    ``\\``) is escaped and ``/`` is not written ``\\/``. Every string has such a spelling,
    and the known-string spellings (:func:`string_literal_ir`) include all of them, so
    differences taken inside this universe are exact."""
    from gramc.compiler.regular import intersection

    hexd = byte_class(b"0123456789abcdefABCDEF")
    nonzero = byte_class(b"123456789abcdefABCDEF")
    allowed_hex = alt(seq(nonzero, hexd, hexd, hexd), seq(literal(b"0"), nonzero, hexd, hexd),
                      seq(literal(b"00"), byte_class(b"01"), hexd), seq(literal(b"007"), byte_class(b"fF")),
                      literal(b"0022"), seq(literal(b"005"), byte_class(b"cC")))
    raw = alt(byte_range(0x20, 0x21), byte_range(0x23, 0x5B), byte_range(0x5D, 0xFF))
    char = alt(raw, seq(literal(b"\\"), byte_class(b'"\\bfnrt')), seq(literal(b"\\u"), allowed_hex))
    return intersection(any_string, seq(literal(b'"'), repeat(char, 0, None), literal(b'"')))


def value_ir(value: Any, ws: Whitespace, members: Callable[[list[Expr]], Expr] | None = None) -> Expr:
    """The JSON text of a known value: its ``json.dumps`` form (object members in their
    given order) with ``ws`` between tokens, strings in every spelling. ``members`` (given
    the member expressions of a non-empty object, nested ones too) builds an object's body
    in another way than in the given order (``property_order="any"``). Listed values nest
    as deep as the schema text does: the walk is a :mod:`stackless` one."""
    return stackless.run(_value_ir(value, ws, members))


def listed_ir(values: list, ws: Whitespace, members: Callable[[list[Expr]], Expr] | None = None) -> Expr:
    """The alternation of :func:`value_ir` over ``values`` (an ``enum``), its strings and
    numbers as one :func:`~gramc.schemas.trie.trie`: shared prefixes are written once, so
    the expression grows with the listed text, not with how many values share a prefix."""
    items: list[tuple[list[Expr], Expr]] = []
    others: list[Expr] = []
    for value in values:
        spelled = None
        if isinstance(value, str):
            spelled = [(string_units(value), QUOTE)]
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            spelled = _number_items(value)
        if spelled is None:
            others.append(value_ir(value, ws, members))
        else:
            items.extend(spelled)
    return alt(trie(items), *others)


def _value_ir(value: Any, ws: Whitespace, members: Callable[[list[Expr]], Expr] | None) -> Call[Expr]:
    if value is None:
        return literal(b"null")
    if value is True:
        return literal(b"true")
    if value is False:
        return literal(b"false")
    if isinstance(value, (int, float)):
        return number_value_ir(value)
    if isinstance(value, str):
        return string_literal_ir(value)
    if isinstance(value, list):
        items = []
        for v in value:
            items.append((yield _value_ir(v, ws, members)))
        return ws.wrap(b"[", b"]", not items, ws.separated(items))
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            items.append(ws.member(string_literal_ir(k), (yield _value_ir(v, ws, members))))
        body = members(items) if members is not None and items else ws.separated(items)
        return ws.wrap(b"{", b"}", not items, body)
    raise SchemaError(f"{value!r} is not a JSON value")


def kind_of(value: Any) -> str:
    """The JSON kind of a value: null, boolean, number, string, array or object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def canonical_text(value: Any) -> str:
    """A text that is equal for values JSON Schema calls equal (``1`` and ``1.0``)."""
    def norm(v: Any) -> Call[Any]:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            items = []
            for x in v:
                items.append((yield norm(x)))
            return items
        if isinstance(v, dict):
            members = {}
            for k, x in v.items():
                members[k] = yield norm(x)
            return members
        return v

    if not isinstance(value, (list, dict)):  # a scalar (most of a long enum): no walk
        return json.dumps(int(value) if isinstance(value, float) and value.is_integer() else value)
    return json.dumps(stackless.run(norm(value)), sort_keys=True)
