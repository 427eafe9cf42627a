"""The regex frontend: regex text to the IR of a whole-string match.

Two dialects (see docs/regex.md for the full comparison):

- ``"unicode"`` (the default): ECMA-262 semantics, as JSON Schema ``pattern`` needs. Classes
  and ``.`` range over code points and are lowered to UTF-8 byte sequences; ``.`` is any code
  point except the line terminators; ``\\d``/``\\w`` are ASCII and ``\\s`` is ECMAScript
  whitespace.
- ``"bytes"``: Python ``re``-on-bytes semantics. ``.`` and negated classes range over bytes
  (``.`` excludes ``\\n``), ``\\xHH`` is one raw byte, ``\\d \\w \\s`` are ASCII. Non-ASCII
  characters written in the pattern still stand for their UTF-8 bytes.

The output is matched as a whole, so a leading ``^`` and a trailing ``$`` (on each top-level
alternative) are no-ops. Word boundaries ``\\b`` / ``\\B`` are compiled exactly
(:mod:`gramc.compiler.frontends.word_boundary`); where the pattern is part of a larger text
(``whole_text=False``) one that looks past the pattern's edge is refused. Other anchors,
lookaround and backreferences are refused with
:class:`~gramc.errors.UnsupportedFeatureError`. Malformed patterns raise
:class:`~gramc.errors.GrammarSyntaxError`, both with the offending position.

The parser is hand-written. Groups are kept on an explicit stack rather than the Python call
stack, so nesting depth is bounded by the ``max_nesting`` limit, never by the recursion limit.

>>> print(parse_regex("^(?:ab|c)+[0-9]{2,3}$"))
("ab" | "c")+ [0-9]{2,3}
>>> print(parse_regex("é|[^\\\\x00-\\\\x7f]", dialect="bytes"))
"\\xc3\\xa9" | [\\x80-\\xff]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from gramc.compiler.ir import (
    ALL_BYTES,
    EMPTY,
    NOTHING,
    Alt,
    Bytes,
    Expr,
    Repeat,
    Seq,
    Token,
    alt,
    postorder,
    repeat,
    seq,
)
from gramc.compiler.unicode import (
    ALL_CODEPOINTS,
    ECMA_DIGIT,
    ECMA_LINE_TERMINATORS,
    ECMA_SPACE,
    ECMA_WORD,
    SURROGATE_HI,
    SURROGATE_LO,
    CodepointSet,
    ascii_case_closure,
)
from gramc.compiler.frontends import word_boundary
from gramc.compiler.frontends.word_boundary import Marker
from gramc.compiler.passes import rewrite
from gramc.compiler.unicode_properties import PropertyNameError, PropertyUnavailableError, property_set
from gramc.errors import (
    GrammarSyntaxError,
    LimitExceededError,
    Span,
    UnsupportedFeatureError,
)
from gramc.limits import DEFAULT_LIMITS, Limits

REGEX_DIALECTS = ("unicode", "bytes")


def parse_regex(
    pattern: str,
    *,
    dialect: str = "unicode",
    source_name: str = "<regex>",
    limits: Limits = DEFAULT_LIMITS,
    charset_to_ir: Callable[[CodepointSet], Expr] | None = None,
    whole_text: bool = False,
    word_chars: CodepointSet | None = None,
) -> Expr:
    """Parse ``pattern`` into the IR of the strings it matches as a whole.

    Args:
        pattern: the regex text.
        dialect: ``"unicode"`` (ECMA-262, the default) or ``"bytes"`` (Python ``re`` on bytes).
        source_name: the name error spans carry.
        limits: ``max_nesting`` bounds group nesting, ``max_repeat`` the ``m``/``n`` of ``{m,n}``.
        charset_to_ir: (unicode dialect only) how one code point of a set is lowered; the
            default is its UTF-8 encoding (:meth:`CodepointSet.to_ir`). JSON Schema passes a
            function giving every JSON string encoding of the code point instead.
        whole_text: the pattern matches the whole text, so ``\\b`` and ``\\B`` see the
            text's start and end as non-word characters. Otherwise (a regex inside a larger
            grammar) a boundary that depends on a character outside the pattern is refused.
        word_chars: (unicode dialect) the word characters of ``\\b``; default ECMA-262's
            ``[A-Za-z0-9_]`` (the bytes dialect always uses those).

    Raises:
        GrammarSyntaxError: the pattern is malformed.
        UnsupportedFeatureError: the pattern uses lookaround, backreferences, inner anchors,
            a word boundary that cannot be decided...
        LimitExceededError: ``max_nesting`` or ``max_repeat`` was exceeded (the error's
            ``span`` is the group or repetition).
        ValueError: ``dialect`` is not one of :data:`REGEX_DIALECTS`, or ``charset_to_ir`` is
            given with the bytes dialect.
    """
    parser = _parser(pattern, dialect, source_name, limits, charset_to_ir, word_chars)
    return parser.resolved(parser.parse(), whole_text)


def group_marks(src: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """Position and character of each ``(``, ``)`` and ``|`` of ECMA-262 pattern ``src`` from
    ``start`` on, skipping escapes and character classes (the structure a scan of groups and
    alternatives needs without parsing)."""
    i, in_class = start, False
    while i < len(src):
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c in "()|":
            yield i, c
        i += 1


def parse_regex_search(
    pattern: str,
    *,
    source_name: str = "<regex>",
    limits: Limits = DEFAULT_LIMITS,
    charset_to_ir: Callable[[CodepointSet], Expr] | None = None,
) -> Expr:
    """The IR of the strings in which ECMA-262 ``pattern`` finds a match (``RegExp.test``):
    JSON Schema ``pattern`` semantics.

    The pattern is unanchored: each top-level alternative may be preceded by any string
    unless it starts with ``^`` and followed by any string unless it ends with ``$`` (``^a|b``
    is ``a.*`` or ``.*b.*``, where ``.*`` here is any code point, line terminators included).
    Arguments as for :func:`parse_regex` (the dialect is always ``"unicode"``).

    >>> from gramc.compiler.ir import literal
    >>> lower = lambda cps: literal(b"?") if len(cps) > 1 else literal(chr(cps.ranges[0][0]).encode())
    >>> print(parse_regex_search("^ab|c$", charset_to_ir=lower))
    "ab" "?"* | "?"* "c"
    """
    parser = _parser(pattern, "unicode", source_name, limits, charset_to_ir)
    parser.search = True
    expr = parser.parse()
    anything = repeat(parser.lower(_Set(ALL_CODEPOINTS)), 0, None)
    out = []
    for start_part, at_start in zip(_split_anchor(expr, _START, True), (True, False)):
        for part, at_end in zip(_split_anchor(start_part, _END, False), (True, False)):
            out.append(seq(EMPTY if at_start else anything, part, EMPTY if at_end else anything))
    return parser.resolved(alt(*out), whole_text=True)


# Anchor markers of the search mode: ^ and $ inside groups become these leaves, which
# _split_anchor then lifts out (the parser only lets ^ stand where nothing can precede it
# and $ where nothing can follow it).
_START = Token(-(2**62))
_END = Token(-(2**62) - 1)


def _split_anchor(expr: Expr, marker: Token, leading: bool) -> tuple[Expr, Expr]:
    """(the strings of paths through ``marker``, the strings of the other paths), the marker
    removed; the marker can only be the first (``leading``) or last leaf of a path."""
    memo: dict[Expr, tuple[Expr, Expr]] = {}
    for node in postorder(expr):
        if node is marker:
            memo[node] = (EMPTY, NOTHING)
        elif isinstance(node, Seq):
            items = node.items
            end = items[0] if leading else items[-1]
            rest = seq(*items[1:]) if leading else seq(*items[:-1])
            a, f = memo[end]
            memo[node] = (seq(a, rest), seq(f, rest)) if leading else (seq(rest, a), seq(rest, f))
        elif isinstance(node, Alt):
            memo[node] = (alt(*(memo[i][0] for i in node.items)), alt(*(memo[i][1] for i in node.items)))
        elif isinstance(node, Repeat):
            if memo[node.item][0] is not NOTHING:
                raise UnsupportedFeatureError(f"anchor {'^' if leading else '$'} inside a repetition")
            memo[node] = (NOTHING, node)
        else:
            memo[node] = (NOTHING, node)
    return memo[expr]




def _parser(pattern, dialect, source_name, limits, charset_to_ir, word_chars=None) -> _Parser:
    if dialect not in _DIALECTS:
        raise ValueError(f"unknown regex dialect {dialect!r} (expected one of {REGEX_DIALECTS})")
    chosen = _DIALECTS[dialect]
    if charset_to_ir is not None:
        if dialect != "unicode":
            raise ValueError("charset_to_ir applies to the unicode dialect only")
        chosen = _UnicodeDialect(charset_to_ir)
    parser = _Parser(pattern, chosen, source_name, limits.max_nesting, limits.max_repeat)
    if _MAY_HAVE_BOUNDARY.search(pattern):
        word = _Set(mask=_mask_of(ECMA_WORD)) if dialect == "bytes" else _Set(word_chars or ECMA_WORD)
        parser.symbols = _Symbols(chosen, word)
    return parser


#: A pattern without this text has no word boundary and is lowered directly.
_MAY_HAVE_BOUNDARY = re.compile(r"\\[bB]")


class _Symbols:
    """The symbolic lowering of a pattern with word boundaries (see
    :mod:`gramc.compiler.frontends.word_boundary`): one byte per distinct word or non-word
    part of a set, and one per boundary."""

    def __init__(self, dialect: _Dialect, word: _Set):
        self.dialect, self.word = dialect, word
        self.byte_of: dict[_Set, int] = {}
        self.lowered: dict[int, Expr] = {}
        self.markers: dict[int, Marker] = {}
        self.word_mask = self.other_mask = 0

    def _byte(self) -> int:
        byte = len(self.lowered) + len(self.markers)
        if byte > 255:
            raise UnsupportedFeatureError(
                "word boundary in a pattern with more than 256 distinct character sets and boundaries")
        return byte

    def lower(self, s: _Set) -> Expr:
        w = _Set(s.cps & self.word.cps, s.mask & self.word.mask)
        n = _Set(s.cps & self.word.cps.complement(), s.mask & ~self.word.mask & ALL_BYTES)
        out = []
        for part, is_word in ((w, True), (n, False)):
            if not (part.cps or part.mask):
                continue
            byte = self.byte_of.get(part)
            if byte is None:
                byte = self.byte_of[part] = self._byte()
                self.lowered[byte] = self.dialect.lower(part)
                if is_word:
                    self.word_mask |= 1 << byte
                else:
                    self.other_mask |= 1 << byte
            out.append(Bytes(1 << byte))
        return alt(*out)

    def marker(self, offset: int, negated: bool) -> Expr:
        byte = self._byte()
        self.markers[byte] = Marker(offset, negated)
        return Bytes(1 << byte)


# ---------------------------------------------------------------- characters and sets


@dataclass(frozen=True)
class _Char:
    """One pattern character: a code point, or (``\\xHH`` in the bytes dialect) a raw byte."""

    value: int
    is_byte: bool = False


@dataclass(frozen=True)
class _Set:
    """A set of one-character alternatives: code points, plus raw bytes in the bytes dialect."""

    cps: CodepointSet = field(default_factory=CodepointSet)
    mask: int = 0

    def __or__(self, other: _Set) -> _Set:
        return _Set(self.cps | other.cps, self.mask | other.mask)


_ASCII = CodepointSet([(0, 0x7F)])
_NON_ASCII = _ASCII.complement()
_UPPER_MASK = ((1 << 26) - 1) << 0x41
_LOWER_MASK = _UPPER_MASK << 0x20


def _mask_of(cps: CodepointSet) -> int:
    mask = 0
    for lo, hi in cps.ranges:
        mask |= ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
    return mask


class _UnicodeDialect:
    """ECMA-262 with the ``u`` flag: every set is a set of code points."""

    name = "unicode"
    _ESCAPES: ClassVar[dict[str, CodepointSet]] = {"d": ECMA_DIGIT, "w": ECMA_WORD, "s": ECMA_SPACE}

    def __init__(self, charset_to_ir: Callable[[CodepointSet], Expr] | None = None):
        self._to_ir = charset_to_ir

    def char_set(self, c: _Char) -> _Set:
        return _Set(CodepointSet.of(c.value))

    def range_set(self, lo: _Char, hi: _Char) -> _Set | None:
        return _Set(CodepointSet([(lo.value, hi.value)]))

    def escape_set(self, letter: str) -> _Set:
        cps = self._ESCAPES[letter.lower()]
        return _Set(cps.complement() if letter.isupper() else cps)

    def hex_char(self, value: int) -> _Char:
        return _Char(value)

    def dot(self) -> _Set:
        return _Set(ECMA_LINE_TERMINATORS.complement())

    def negate(self, s: _Set) -> _Set | None:
        return _Set(s.cps.complement())

    def fold(self, s: _Set) -> _Set:
        return _Set(ascii_case_closure(s.cps))

    def lower(self, s: _Set) -> Expr:
        if self._to_ir is not None:
            return self._to_ir(s.cps) if s.cps else NOTHING
        return s.cps.to_ir()


class _BytesDialect:
    """Python ``re`` on bytes: ASCII and raw bytes live in ``mask``, the rest is UTF-8."""

    name = "bytes"
    _ESCAPES: ClassVar[dict[str, int]] = {
        "d": _mask_of(ECMA_DIGIT),
        "w": _mask_of(ECMA_WORD),
        "s": _mask_of(ECMA_SPACE & _ASCII),
    }

    def _split(self, cps: CodepointSet, mask: int = 0) -> _Set:
        return _Set(cps & _NON_ASCII, mask | _mask_of(cps & _ASCII))

    def char_set(self, c: _Char) -> _Set:
        return _Set(mask=1 << c.value) if c.is_byte else self._split(CodepointSet.of(c.value))

    def range_set(self, lo: _Char, hi: _Char) -> _Set | None:
        if (lo.is_byte or lo.value < 0x80) and (hi.is_byte or hi.value < 0x80):
            return _Set(mask=((1 << (hi.value + 1)) - 1) ^ ((1 << lo.value) - 1))
        if lo.is_byte or hi.is_byte:
            return None  # a raw byte above 0x7F and a non-ASCII character
        return self._split(CodepointSet([(lo.value, hi.value)]))

    def escape_set(self, letter: str) -> _Set:
        mask = self._ESCAPES[letter.lower()]
        return _Set(mask=ALL_BYTES ^ mask if letter.isupper() else mask)

    def hex_char(self, value: int) -> _Char:
        return _Char(value, is_byte=True)

    def dot(self) -> _Set:
        return _Set(mask=ALL_BYTES ^ (1 << 0x0A))

    def negate(self, s: _Set) -> _Set | None:
        return None if s.cps else _Set(mask=ALL_BYTES ^ s.mask)

    def fold(self, s: _Set) -> _Set:
        m = s.mask
        return _Set(s.cps, m | (m & _UPPER_MASK) << 0x20 | (m & _LOWER_MASK) >> 0x20)

    def lower(self, s: _Set) -> Expr:
        return alt(Bytes(s.mask) if s.mask else NOTHING, s.cps.to_ir())


_Dialect = _UnicodeDialect | _BytesDialect
_DIALECTS: dict[str, _Dialect] = {"unicode": _UnicodeDialect(), "bytes": _BytesDialect()}


# ---------------------------------------------------------------- the parser

_CONTROL_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "a": 0x07}
_CLASS_ESCAPES = frozenset("dDwWsS")
_HEX = frozenset("0123456789abcdefABCDEF")
_LOOKAROUND = {
    "?=": "lookahead (?=...)",
    "?!": "negative lookahead (?!...)",
    "?<=": "lookbehind (?<=...)",
    "?<!": "negative lookbehind (?<!...)",
    "?>": "atomic group (?>...)",
    "?(": "conditional group (?(...)...)",
    "?P=": "backreference (?P=name)",
    "?P>": "recursive group (?P>name)",
}
_ASSERTION_ESCAPES = {
    "k": "named backreference \\k<name>",
}
_UNSUPPORTED_ESCAPES = {
    "p": "Unicode property escape \\p{...} in the bytes dialect (Python re has none)",
    "P": "Unicode property escape \\P{...} in the bytes dialect (Python re has none)",
    "N": "named character escape \\N{...}",
}
_FLAG_LETTERS = frozenset("aiLmsux-")
_SourceError = GrammarSyntaxError | UnsupportedFeatureError


@dataclass
class _Frame:
    """An open group: the finished alternatives and the items of the current one."""

    start: int
    alts: list[Expr] = field(default_factory=list)
    items: list[Expr] = field(default_factory=list)

    def next_alternative(self) -> None:
        self.alts.append(seq(*self.items))
        self.items = []

    def finish(self) -> Expr:
        return alt(*self.alts, seq(*self.items))


class _Parser:
    def __init__(
        self, src: str, dialect: _Dialect, source_name: str, max_nesting: int, max_repeat: int
    ):
        self.src = src
        self.dialect = dialect
        self.source_name = source_name
        self.max_nesting = max_nesting
        self.max_repeat = max_repeat
        self.pos = 0
        self.icase = False
        self.names: set[str] = set()
        self.stack: list[_Frame] = [_Frame(0)]
        self.search = False  # search mode: ^ and $ become _START / _END markers
        self.symbols: _Symbols | None = None  # set when the pattern may have word boundaries
        self._char_exprs: dict[str, Expr] = {}  # a literal character's IR, lowered once per character

    # ------------------------------------------------------------ helpers

    def _span(self, offset: int) -> Span:
        return Span.at(self.src, offset, self.source_name)

    def _syntax(self, reason: str, offset: int) -> GrammarSyntaxError:
        return GrammarSyntaxError(reason, self._span(offset))

    def _unsupported(self, feature: str, offset: int) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(feature, self._span(offset))

    def lower(self, s: _Set) -> Expr:
        """The IR of one character of ``s`` (its symbols while word boundaries are pending)."""
        return self.symbols.lower(s) if self.symbols is not None else self.dialect.lower(s)

    def resolved(self, expr: Expr, whole_text: bool) -> Expr:
        """``expr`` with its word boundaries enforced and real characters in place of the
        symbols (``expr`` itself when the pattern has none)."""
        sym = self.symbols
        if sym is None:
            return expr
        if not sym.markers:
            return rewrite(expr, lambda e: alt(*(sym.lowered[b] for b in e.byte_values()))
                           if isinstance(e, Bytes) else None)

        def refuse(marker: Marker) -> UnsupportedFeatureError:
            name = "\\B" if marker.negated else "\\b"
            return UnsupportedFeatureError(
                f"word boundary {name}", self._span(marker.offset),
                f"word boundary {name} at offset {marker.offset} depends on a character outside the "
                "pattern (the text around it is not known here)")

        return word_boundary.resolve(expr, sym.word_mask, sym.other_mask, sym.markers, sym.lowered,
                                     whole_text, refuse)

    def _peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.src[i] if i < len(self.src) else ""

    def _eat(self, text: str) -> bool:
        if self.src.startswith(text, self.pos):
            self.pos += len(text)
            return True
        return False

    # ------------------------------------------------------------ structure

    def parse(self) -> Expr:
        if self.src.startswith("(?i)"):
            self.icase, self.pos = True, 4
        while self.pos < len(self.src):
            self._step()
        if len(self.stack) > 1:
            raise self._syntax("missing ), unterminated group", self.stack[-1].start)
        return self.stack[0].finish()

    def _step(self) -> None:
        c = self.src[self.pos]
        handler = _HANDLERS.get(c)
        if handler is not None:
            handler(self)
        else:
            self._char_atom(self.pos)

    def _push(self, expr: Expr) -> None:
        self.stack[-1].items.append(self._quantified(expr))

    def _open_group(self) -> None:
        start = self.pos
        self.pos += 1
        if self._peek() == "?" and not self._group_extension(start):
            return
        if len(self.stack) > self.max_nesting:
            raise LimitExceededError("max_nesting", len(self.stack), self.max_nesting, "group", self._span(start))
        self.stack.append(_Frame(start))

    def _close_group(self) -> None:
        if len(self.stack) == 1:
            raise self._syntax("unbalanced parenthesis", self.pos)
        frame = self.stack.pop()
        self.pos += 1
        self._push(frame.finish())

    def _bar(self) -> None:
        self.pos += 1
        self.stack[-1].next_alternative()

    def _anchor_start(self, width: int, name: str) -> None:
        if self.search and not any(f.items for f in self.stack):
            self.pos += width
            self.stack[-1].items.append(_START)
            return
        if len(self.stack) > 1 or self.stack[-1].items:
            raise self._unsupported(
                f"anchor {name} that is not at the start of the pattern", self.pos
            )
        self.pos += width

    def _anchor_end(self, width: int, name: str) -> None:
        after = self.pos + width
        if self.search and self._nothing_follows(after):
            self.pos = after
            self.stack[-1].items.append(_END)
            return
        if len(self.stack) > 1 or self.src[after : after + 1] not in ("", "|"):
            raise self._unsupported(
                f"anchor {name} that is not at the end of the pattern", self.pos
            )
        self.pos = after

    def _nothing_follows(self, i: int) -> bool:
        """Can no character follow position ``i`` on any path (only group ends, and
        alternatives of enclosing groups, up to the end of the pattern)?"""
        depth = len(self.stack)
        while i < len(self.src):
            c = self.src[i]
            if c == ")" and depth > 1:
                depth -= 1
                i += 1
                if self._quantifier_at(i):
                    return False
            elif c == "|" and depth == 1:
                return True
            elif c == "|":
                i = self._group_end(i)
                if i < 0:
                    return False
            else:
                return False
        return True

    def _group_end(self, i: int) -> int:
        """The position of the ')' closing the group that is open at ``i``, or -1."""
        depth = 0
        for j, c in group_marks(self.src, i):
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    return j
                depth -= 1
        return -1

    # ------------------------------------------------------------ group extensions

    def _group_extension(self, start: int) -> bool:
        """Parse what follows ``(?``; True when a group frame is to be opened."""
        for prefix, feature in _LOOKAROUND.items():
            if self.src.startswith(prefix, self.pos):
                raise self._unsupported(feature, start)
        if self._eat("?:"):
            return True
        if self._eat("?P<") or self._eat("?<"):
            self._group_name(start)
            return True
        if self._eat("?#"):
            self._skip_comment(start)
            return False
        raise self._flags_error(start)

    def _group_name(self, start: int) -> None:
        end = self.src.find(">", self.pos)
        if end < 0:
            raise self._syntax("missing >, unterminated group name", start)
        name = self.src[self.pos : end]
        if not name.isidentifier():
            raise self._syntax(f"bad group name {name!r}", self.pos)
        if name in self.names:
            raise self._syntax(f"redefinition of group name {name!r}", self.pos)
        self.names.add(name)
        self.pos = end + 1

    def _skip_comment(self, start: int) -> None:
        end = self.src.find(")", self.pos)
        if end < 0:
            raise self._syntax("missing ), unterminated comment", start)
        self.pos = end + 1

    def _flags_error(self, start: int) -> _SourceError:
        j = self.pos + 1
        while j < len(self.src) and self.src[j] in _FLAG_LETTERS:
            j += 1
        if j > self.pos + 1 and self.src[j : j + 1] in (")", ":"):
            flags = self.src[start : j + 1]
            if flags == "(?i)":
                return self._unsupported("inline flags (?i) that are not at the start", start)
            return self._unsupported(f"inline flags {flags}", start)
        return self._syntax(f"unknown group extension {self.src[start : self.pos + 2]!r}", start)

    # ------------------------------------------------------------ quantifiers

    def _quantified(self, expr: Expr) -> Expr:
        bounds = self._quantifier()
        if bounds is None:
            return expr
        if not self._eat("?") and self._peek() == "+":
            raise self._unsupported("possessive quantifier", self.pos)
        if self._quantifier_at(self.pos):
            raise self._syntax("multiple repeat", self.pos)
        return repeat(expr, *bounds)

    def _quantifier(self) -> tuple[int, int | None] | None:
        c = self._peek()
        simple = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(c)
        if simple is not None:
            self.pos += 1
            return simple
        return self._counted() if c == "{" else None

    def _quantifier_at(self, i: int) -> bool:
        c = self.src[i : i + 1]
        return c in ("*", "+", "?") or (c == "{" and self._scan_counted(i) is not None)

    def _scan_counted(self, i: int) -> tuple[str, str, int] | None:
        """``{m}``, ``{m,}``, ``{m,n}`` or ``{,n}`` at ``i`` as (m, n, end); None: not one."""
        lo, j = self._digits(i + 1)
        hi, comma = lo, self.src.startswith(",", j)
        if comma:
            hi, j = self._digits(j + 1)
        if not self.src.startswith("}", j) or (lo == "" and not comma):
            return None
        return lo, hi, j + 1

    def _digits(self, i: int) -> tuple[str, int]:
        j = i
        while j < len(self.src) and self.src[j] in "0123456789":
            j += 1
        return self.src[i:j], j

    def _counted(self) -> tuple[int, int | None] | None:
        scanned = self._scan_counted(self.pos)
        if scanned is None:
            return None
        start = self.pos
        lo_text, hi_text, self.pos = scanned
        lo = self._bound(lo_text or "0", start)
        hi = None if hi_text == "" else self._bound(hi_text, start)
        if hi is not None and hi < lo:
            raise self._syntax("min repeat greater than max repeat", start)
        return lo, hi

    def _bound(self, digits: str, start: int) -> int:
        digits = digits.lstrip("0") or "0"
        value = int(digits) if len(digits) <= 18 else 10**18
        if value > self.max_repeat:
            raise LimitExceededError("max_repeat", value, self.max_repeat, "counted repetition", self._span(start))
        return value

    def _nothing_to_repeat(self) -> None:
        raise self._syntax("nothing to repeat", self.pos)

    def _brace(self) -> None:
        if self._scan_counted(self.pos) is not None:
            self._nothing_to_repeat()
        self._char_atom(self.pos)

    # ------------------------------------------------------------ atoms

    def _char_atom(self, start: int) -> None:
        self.pos += 1
        c = self.src[start]
        expr = self._char_exprs.get(c)
        if expr is None:
            expr = self._char_exprs[c] = self._set_expr(self._single(_Char(ord(c)), start))
        self._push(expr)

    def _dot(self) -> None:
        self.pos += 1
        self._push(self.lower(self.dialect.dot()))

    def _class_atom(self) -> None:
        self._push(self.lower(self._class()))

    def _escape_atom(self) -> None:
        start = self.pos
        c = self._peek(1)
        if c in "bB" and self.symbols is not None:
            self.pos += 2
            self.stack[-1].items.append(self.symbols.marker(start, c == "B"))
            return
        if c in _ASSERTION_ESCAPES:
            raise self._unsupported(_ASSERTION_ESCAPES[c], start)
        if c in ("A", "Z", "z"):
            anchor = self._anchor_start if c == "A" else self._anchor_end
            return anchor(2, f"\\{c}")
        if c != "" and c in "123456789":
            raise self._unsupported(f"backreference \\{c}", start)
        unit = self._escape(in_class=False)
        self._push(self._set_expr(self._single(unit, start)))

    def _set_expr(self, s: _Set) -> Expr:
        return self.lower(self.dialect.fold(s) if self.icase else s)

    def _single(self, unit: _Char | _Set, start: int) -> _Set:
        if isinstance(unit, _Set):
            return unit
        if not unit.is_byte and SURROGATE_LO <= unit.value <= SURROGATE_HI:
            raise self._unsupported(
                f"lone surrogate U+{unit.value:04X} (not encodable in UTF-8)", start
            )
        return self.dialect.char_set(unit)

    # ------------------------------------------------------------ classes

    def _class(self) -> _Set:
        start = self.pos
        self.pos += 1
        negate = self._eat("^")
        acc = _Set()
        while not self._eat("]"):
            if self.pos >= len(self.src):
                raise self._syntax("unterminated character class", start)
            acc = acc | self._class_item()
        if self.icase:
            acc = self.dialect.fold(acc)
        return self._negated(acc, start) if negate else acc

    def _negated(self, acc: _Set, start: int) -> _Set:
        negated = self.dialect.negate(acc)
        if negated is None:
            feature = "negated class with non-ASCII characters in the bytes dialect"
            raise self._unsupported(feature, start)
        return negated

    def _class_item(self) -> _Set:
        start = self.pos
        lo = self._class_unit()
        if self._peek() != "-" or self._peek(1) in ("]", ""):
            return self._single(lo, start)
        self.pos += 1
        hi = self._class_unit()
        text = self.src[start : self.pos]
        if isinstance(lo, _Set) or isinstance(hi, _Set) or lo.value > hi.value:
            raise self._syntax(f"bad character range {text}", start)
        result = self.dialect.range_set(lo, hi)
        if result is None:
            raise self._syntax(
                f"bad character range {text}: mixes a raw byte and a character", start
            )
        return result

    def _class_unit(self) -> _Char | _Set:
        if self._peek() == "\\":
            return self._escape(in_class=True)
        self.pos += 1
        return _Char(ord(self.src[self.pos - 1]))

    # ------------------------------------------------------------ escapes

    def _escape(self, in_class: bool) -> _Char | _Set:
        start = self.pos
        c = self._peek(1)
        if c == "":
            raise self._syntax("trailing backslash", start)
        self.pos += 2
        if c in _CLASS_ESCAPES:
            return self.dialect.escape_set(c)
        if c in _CONTROL_ESCAPES or (in_class and c == "b"):
            return _Char(_CONTROL_ESCAPES.get(c, 0x08))
        if c in _ESCAPE_HANDLERS:
            return _ESCAPE_HANDLERS[c](self, start)
        if c in "pP" and self.dialect.name == "unicode":
            return self._property(c == "P", start)
        if c in _UNSUPPORTED_ESCAPES:
            raise self._unsupported(_UNSUPPORTED_ESCAPES[c], start)
        if c.isascii() and c.isalnum():
            raise self._syntax(f"bad escape \\{c}", start)
        return _Char(ord(c))

    def _property(self, negated: bool, start: int) -> _Set:
        """``\\p{...}`` / ``\\P{...}`` (ECMA-262 names: :mod:`gramc.compiler.unicode_properties`)."""
        end = self.src.find("}", self.pos)
        if not self._eat("{") or end < 0:
            raise self._syntax("bad escape \\p: expected \\p{Name} or \\p{Name=Value}", start)
        text, self.pos = self.src[self.pos : end], end + 1
        try:
            cps = property_set(text)
        except PropertyUnavailableError as err:
            raise self._unsupported(str(err), start) from None
        except PropertyNameError as err:
            raise self._syntax(str(err), start) from None
        return _Set(cps.complement() if negated else cps)

    def _zero(self, start: int) -> _Char:
        if self._peek() != "" and self._peek() in "0123456789":
            raise self._unsupported("octal escape", start)
        return _Char(0)

    def _hex_escape(self, start: int) -> _Char:
        return self.dialect.hex_char(self._hex(2, start))

    def _hex(self, n: int, start: int) -> int:
        digits = self.src[self.pos : self.pos + n]
        if len(digits) < n or not set(digits) <= _HEX:
            raise self._syntax(f"incomplete escape {self.src[start : self.pos + n]}", start)
        self.pos += n
        return int(digits, 16)

    def _u_escape(self, start: int) -> _Char:
        if self._eat("{"):
            return _Char(self._braced_hex(start))
        value = self._hex(4, start)
        if 0xD800 <= value <= 0xDBFF and self._low_surrogate_ahead():
            low = int(self.src[self.pos + 2 : self.pos + 6], 16)
            self.pos += 6
            value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
        return _Char(value)

    def _low_surrogate_ahead(self) -> bool:
        text = self.src[self.pos : self.pos + 6]
        if len(text) < 6 or text[:2] != "\\u" or not set(text[2:]) <= _HEX:
            return False
        return 0xDC00 <= int(text[2:], 16) <= 0xDFFF

    def _braced_hex(self, start: int) -> int:
        end = self.src.find("}", self.pos)
        digits = self.src[self.pos : end] if end >= 0 else ""
        if not digits or not set(digits) <= _HEX or int(digits, 16) > 0x10FFFF:
            raise self._syntax(
                "bad escape \\u{...}: expected 1 to 6 hex digits up to 10FFFF", start
            )
        self.pos = end + 1
        return int(digits, 16)

    def _big_u_escape(self, start: int) -> _Char:
        value = self._hex(8, start)
        if value > 0x10FFFF:
            raise self._syntax(f"bad escape {self.src[start : self.pos]}: above U+10FFFF", start)
        return _Char(value)

    def _control_escape(self, start: int) -> _Char:
        c = self._peek()
        if not (c.isascii() and c.isalpha()):
            raise self._syntax("bad escape \\c: expected a letter", start)
        self.pos += 1
        return _Char(ord(c) % 32)


_HANDLERS = {
    "(": _Parser._open_group,
    ")": _Parser._close_group,
    "|": _Parser._bar,
    "^": lambda p: p._anchor_start(1, "^"),
    "$": lambda p: p._anchor_end(1, "$"),
    "*": _Parser._nothing_to_repeat,
    "+": _Parser._nothing_to_repeat,
    "?": _Parser._nothing_to_repeat,
    "{": _Parser._brace,
    "[": _Parser._class_atom,
    ".": _Parser._dot,
    "\\": _Parser._escape_atom,
}

_ESCAPE_HANDLERS = {
    "0": _Parser._zero,
    "x": _Parser._hex_escape,
    "u": _Parser._u_escape,
    "U": _Parser._big_u_escape,
    "c": _Parser._control_escape,
}
