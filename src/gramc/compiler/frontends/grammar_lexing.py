"""Character-level scanning shared by the hand-written grammar frontends (GBNF, EBNF).

A :class:`Scanner` walks a grammar text, knows the position of every character (so every
error carries a :class:`~gramc.errors.Span`), and decodes the pieces all those notations
share: string literals with an escape table, character classes over code points, counted
repetition bounds ``{m,n}``, and comments. Each notation then maps first characters to
token handlers (see :mod:`gramc.compiler.frontends.grammar_parsing`).

>>> sc = Scanner('"a\\\\x41" [a-c_] {2, 3}')
>>> print(string_literal(sc, GBNF_ESCAPES)); sc.skip_space(())
"aA"
>>> print(char_class(sc, GBNF_ESCAPES)[0]); sc.skip_space(())
[_a-c]
>>> repetition_bounds(sc)
(2, 3)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from gramc.compiler.ir import Expr, Token, TokenName, literal
from gramc.compiler.unicode import (
    ECMA_DIGIT,
    ECMA_SPACE,
    ECMA_WORD,
    MAX_CODEPOINT,
    SURROGATE_HI,
    SURROGATE_LO,
    CodepointSet,
)
from gramc.errors import GrammarSyntaxError, Span, UnsupportedFeatureError
from gramc.limits import DEFAULT_LIMITS, Limits

#: Escapes of llama.cpp's GBNF: letter -> code point; x/u/U take 2/4/8 hex digits.
GBNF_ESCAPES: dict[str, int] = {
    "t": 0x09, "r": 0x0D, "n": 0x0A, "\\": 0x5C, '"': 0x22, "[": 0x5B, "]": 0x5D,
}
#: XGrammar's escapes: C-style letters, quotes and (inside classes) regex punctuation.
XGRAMMAR_ESCAPES: dict[str, int] = {
    **GBNF_ESCAPES, "'": 0x27, "?": 0x3F, "a": 0x07, "b": 0x08, "f": 0x0C, "v": 0x0B,
    "0": 0x00, "e": 0x1B, **{c: ord(c) for c in "^$.*+(){}|/-"},
}
#: Class escapes standing for sets (XGrammar / ECMAScript meaning).
CLASS_SET_ESCAPES: dict[str, CodepointSet] = {
    "d": ECMA_DIGIT, "D": ECMA_DIGIT.complement(), "w": ECMA_WORD,
    "W": ECMA_WORD.complement(), "s": ECMA_SPACE, "S": ECMA_SPACE.complement(),
}
_HEX_WIDTH = {"x": 2, "u": 4, "U": 8}
_HEX_RE = re.compile(r"[0-9A-Fa-f]+")


class Tok(NamedTuple):
    """One token: ``kind`` (``"name"``, ``"atom"``, ``"("``...), its offset, and a value
    (the rule name, the atom's IR, the bounds ``(m, n)``...) whose type follows ``kind``."""

    kind: str
    offset: int
    value: Any = None


@dataclass(frozen=True)
class Comment:
    """A comment syntax: ``close=None`` runs to the end of the line."""

    open: str
    close: str | None = None
    nested: bool = False


class Scanner:
    """A position in a grammar text, with span-aware error constructors."""

    def __init__(self, text: str, source_name: str = "<grammar>", limits: Limits = DEFAULT_LIMITS):
        self.text = text
        self.pos = 0
        self.source_name = source_name
        self.limits = limits

    def span(self, offset: int) -> Span:
        return Span.at(self.text, offset, self.source_name)

    def error(self, reason: str, offset: int | None = None) -> GrammarSyntaxError:
        return GrammarSyntaxError(reason, self.span(self.pos if offset is None else offset))

    def unsupported(self, feature: str, offset: int, reason: str | None = None) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(feature, self.span(offset), reason)

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.text[i] if i < len(self.text) else ""

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def startswith(self, s: str) -> bool:
        return self.text.startswith(s, self.pos)

    def eat(self, s: str) -> bool:
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def match(self, pattern: re.Pattern) -> re.Match | None:
        """``pattern`` matched at the current position (nothing is consumed)."""
        return pattern.match(self.text, self.pos)

    def take(self, pattern: re.Pattern) -> str | None:
        """Consume and return what ``pattern`` matches here, or None."""
        m = pattern.match(self.text, self.pos)
        if m is None:
            return None
        self.pos = m.end()
        return m.group()

    def punct(self, kind: str, width: int = 1) -> Tok:
        """A token of ``width`` characters at the current position."""
        start = self.pos
        self.pos += width
        return Tok(kind, start)

    def skip_space(self, comments: tuple[Comment, ...]) -> None:
        """Skip whitespace and comments."""
        while self.pos < len(self.text):
            if self.text[self.pos].isspace():
                self.pos += 1
            elif not any(self._skip_comment(c) for c in comments):
                return

    def _skip_comment(self, c: Comment) -> bool:
        if not self.startswith(c.open):
            return False
        start = self.pos
        if c.close is None:
            end = self.text.find("\n", start)
            self.pos = len(self.text) if end < 0 else end
            return True
        depth, self.pos = 1, start + len(c.open)
        while depth:
            if self.at_end():
                raise self.error(f"unterminated comment (opened with {c.open!r})", start)
            if c.nested and self.eat(c.open):
                depth += 1
            elif self.eat(c.close):
                depth -= 1
            else:
                self.pos += 1
        return True


# ---------------------------------------------------------------- characters


def escape(sc: Scanner, table: dict[str, int]) -> int:
    """Decode the escape at ``sc.pos`` (on the backslash) to a code point."""
    start = sc.pos
    letter = sc.peek(1)
    if letter in _HEX_WIDTH:
        width = _HEX_WIDTH[letter]
        digits = sc.text[start + 2 : start + 2 + width]
        if len(digits) != width or not _HEX_RE.fullmatch(digits):
            raise sc.error(f"escape '\\{letter}' needs exactly {width} hex digits", start)
        sc.pos = start + 2 + width
        return check_codepoint(sc, int(digits, 16), start)
    if letter and letter in table:
        sc.pos = start + 2
        return table[letter]
    if not letter:
        shown = "'\\' at the end of the input"
    else:
        shown = f"'\\{letter}'" if letter.isprintable() and not letter.isspace() else f"'\\' + {letter!r}"
    raise sc.error(f"unknown escape {shown}", start)


def check_codepoint(sc: Scanner, cp: int, offset: int) -> int:
    """``cp`` if it is a valid code point, else a syntax error at ``offset``."""
    if cp > MAX_CODEPOINT:
        raise sc.error(f"code point U+{cp:X} is beyond U+10FFFF", offset)
    if SURROGATE_LO <= cp <= SURROGATE_HI:
        raise sc.error(f"surrogate U+{cp:04X} is not a character (it has no UTF-8 encoding)", offset)
    return cp


def encode_codepoints(sc: Scanner, cps: list[int], offset: int) -> Expr:
    """The IR of the UTF-8 encoding of ``cps`` (surrogates cannot be encoded)."""
    for cp in cps:
        if SURROGATE_LO <= cp <= SURROGATE_HI:
            raise sc.error(f"surrogate U+{cp:04X} has no UTF-8 encoding", offset)
    return literal("".join(map(chr, cps)).encode("utf-8"))


def hex_char_ref(sc: Scanner) -> int:
    """A W3C ``#xN`` character reference at ``sc.pos`` (on the ``#``)."""
    start = sc.pos
    sc.pos += 2
    digits = sc.take(_HEX_RE)
    if digits is None:
        raise sc.error("'#x' needs hex digits", start)
    return check_codepoint(sc, int(digits, 16), start)


def string_codepoints(sc: Scanner, escapes: dict[str, int] | None, *, multiline: bool = True) -> list[int]:
    """The code points of the quoted string at ``sc.pos`` (on the quote).

    ``escapes=None``: backslash is an ordinary character (W3C, ISO 14977).
    """
    start, quote = sc.pos, sc.peek()
    sc.pos += 1
    cps: list[int] = []
    while not sc.eat(quote):
        c = sc.peek()
        if not c or (c == "\n" and not multiline):
            raise sc.error("unterminated string literal", start)
        if c == "\\" and escapes is not None:
            cps.append(escape(sc, escapes))
        else:
            cps.append(ord(c))
            sc.pos += 1
    return cps


def string_literal(sc: Scanner, escapes: dict[str, int] | None, *, multiline: bool = True) -> Expr:
    """The quoted string at ``sc.pos`` (on the quote) as IR over its UTF-8 bytes."""
    start = sc.pos
    return encode_codepoints(sc, string_codepoints(sc, escapes, multiline=multiline), start)


def char_class(
    sc: Scanner, escapes: dict[str, int] | None, *, hex_refs: bool = False,
    set_escapes: dict[str, CodepointSet] | None = None,
) -> tuple[Expr, CodepointSet]:
    """A class ``[...]`` / ``[^...]`` at ``sc.pos`` (on the ``[``): its IR and code points.

    Ranges are over code points and a negated class is the complement over every code
    point, so the IR matches the UTF-8 encoding of exactly one member.
    """
    start = sc.pos
    sc.pos += 1
    negated = sc.eat("^")
    cps = CodepointSet()
    while not sc.eat("]"):
        if sc.at_end():
            raise sc.error("unterminated character class", start)
        cps = cps | _class_item(sc, escapes, hex_refs, set_escapes or {})
    if negated:
        cps = cps.complement()
    return cps.to_ir(), cps


def _class_item(sc: Scanner, escapes, hex_refs: bool, set_escapes) -> CodepointSet:
    item_start = sc.pos
    if sc.peek() == "\\" and sc.peek(1) in set_escapes:
        sc.pos += 2
        return set_escapes[sc.text[sc.pos - 1]]
    lo = _class_char(sc, escapes, hex_refs)
    if sc.peek() != "-" or sc.peek(1) in ("]", ""):
        return CodepointSet([(lo, lo)])
    sc.pos += 1
    if sc.peek() == "\\" and sc.peek(1) in set_escapes:
        raise sc.error("a class escape cannot end a range", sc.pos)
    hi = _class_char(sc, escapes, hex_refs)
    if hi < lo:
        raise sc.error(f"reversed range in character class (U+{lo:04X} > U+{hi:04X})", item_start)
    return CodepointSet([(lo, hi)])


def _class_char(sc: Scanner, escapes, hex_refs: bool) -> int:
    c = sc.peek()
    if c == "\\" and escapes is not None:
        return escape(sc, escapes)
    if hex_refs and sc.startswith("#x"):
        return hex_char_ref(sc)
    sc.pos += 1
    return ord(c)


# ---------------------------------------------------------------- numbers and bounds

_DIGITS = re.compile(r"[0-9]+")
_BLANKS = re.compile(r"[ \t\r\n]*")


def integer(sc: Scanner, limit: str = "max_repeat") -> int:
    """A decimal integer at ``sc.pos``, checked against the named limit."""
    start = sc.pos
    digits = sc.take(_DIGITS)
    if digits is None:
        raise sc.error("expected a number", start)
    value = int(digits) if len(digits) < 20 else 10**20
    sc.limits.check(limit, value, "counted repetition", sc.span(start))
    return value


def repetition_bounds(sc: Scanner) -> tuple[int, int | None]:
    """``{m}``, ``{m,}``, ``{m,n}`` or ``{,n}`` at ``sc.pos`` (on the brace); blanks allowed."""
    start = sc.pos
    sc.pos += 1
    sc.take(_BLANKS)
    lo = integer(sc) if sc.match(_DIGITS) else None
    sc.take(_BLANKS)
    if sc.eat("}"):
        if lo is None:
            raise sc.error("empty repetition bounds '{}'", start)
        return lo, lo
    if not sc.eat(","):
        raise sc.error("expected ',' or '}' in repetition bounds", sc.pos)
    sc.take(_BLANKS)
    hi = integer(sc) if sc.match(_DIGITS) else None
    sc.take(_BLANKS)
    if not sc.eat("}"):
        raise sc.error("expected '}' to close repetition bounds", sc.pos)
    if lo is None and hi is None:
        raise sc.error("repetition bounds '{,}' need a number", start)
    lo = lo or 0
    if hi is not None and hi < lo:
        raise sc.error(f"bad repetition bounds {{{lo},{hi}}}: the minimum exceeds the maximum", start)
    return lo, hi


# ---------------------------------------------------------------- special tokens (llama.cpp)

_TOKEN_ID = re.compile(r"<\[([0-9]+)\]>")
_MAX_TOKEN_ID = 2**31 - 1


def special_token(sc: Scanner) -> Tok:
    """``<[id]>`` (a :class:`Token`) or ``<name>`` at ``sc.pos``.

    ``<name>`` becomes ``TokenName("<name>")``: the special token's whole text, brackets
    included, which is how vocabularies name special tokens (``<|eot_id|>``).
    """
    start = sc.pos
    if sc.startswith("<["):
        m = sc.match(_TOKEN_ID)
        if m is None:
            raise sc.error("malformed token reference: expected '<[id]>' with a decimal id", start)
        token_id = int(m.group(1)) if len(m.group(1)) < 12 else _MAX_TOKEN_ID + 1
        if token_id > _MAX_TOKEN_ID:
            raise sc.error(f"token id {m.group(1)} is too large", start)
        sc.pos = m.end()
        return Tok("atom", start, Token(token_id))
    end = sc.text.find(">", start + 1)
    name = sc.text[start + 1 : end] if end > 0 else ""
    if end < 0 or "\n" in name:
        raise sc.error("unterminated token reference: expected '>'", start)
    if not name:
        raise sc.error("empty token reference '<>'", start)
    sc.pos = end + 1
    return Tok("atom", start, TokenName(sc.text[start : end + 1]))  # the token's full text


def negated_special_token(sc: Scanner) -> Tok:
    """``!<[id]>`` / ``!<name>``: llama.cpp's "any single token except", which gramc refuses."""
    start = sc.pos
    sc.pos += 1
    if sc.peek() != "<":
        raise sc.error("expected a token reference '<...>' after '!'", start)
    special_token(sc)
    ref = sc.text[start + 1 : sc.pos]
    raise sc.unsupported(
        "negated token reference", start,
        f"'!{ref}' (any single token except {ref}) is not supported: gramc grammars match bytes "
        "and named special tokens, and 'any other token' has no byte-level meaning before a "
        "vocabulary is bound; spell out the allowed text instead",
    )
