"""Lark ``/regex/flags`` literals: Python ``re`` syntax and semantics mapped onto gramc's regex
frontend.

Lark compiles terminals with Python's ``re`` on ``str``. gramc's regex frontend speaks the
ECMA-262 ("unicode") dialect, which agrees with Python on syntax almost everywhere but not on
every class, so each pattern is *translated* token by token before
:func:`~gramc.compiler.frontends.regex.parse_regex` sees it:

- ``.`` becomes ``[^\\n]`` (Python excludes only ``\\n``; ECMAScript also excludes ``\\r``,
  U+2028 and U+2029), or every code point under the ``s`` flag.
- ``\\d \\w \\s`` (and ``\\D \\W \\S``) become explicit code-point classes with Python's
  Unicode meaning (``str.isdecimal``, ``str.isalnum() or "_"``, ``str.isspace``), computed
  once with ``re`` itself; under an inline ``(?a)`` they are ASCII.
- a ``]`` first in a class is a literal, as in Python; ``\\N{NAME}`` is resolved by name.
- the ``x`` flag drops whitespace and ``#`` comments outside classes; ``m`` and ``u`` change
  nothing gramc can observe; ``i`` folds ASCII letters only (Python also folds non-ASCII
  letters: a documented difference); ``l`` (locale) is refused, as Python refuses it for
  ``str`` patterns.

:func:`split_regex` also exposes the top-level structure of a pattern (alternatives, atoms,
lookaround groups, lazy quantifiers), which the terminal lowering needs to honour
lookarounds and lazy quantifiers (see :mod:`gramc.compiler.frontends.lark_terminals`).

>>> translate_regex("a.b", frozenset())
'a[^\\\\n]b'
>>> translate_regex("[]x]+", frozenset("i"))
'(?i)[\\\\]x]+'
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import cache

from gramc.compiler.unicode import MAX_CODEPOINT, CodepointSet
from gramc.errors import GrammarSyntaxError, UnsupportedFeatureError

_ESCAPE = re.compile(
    r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|0[0-7]{0,2}|[1-9][0-9]*|.)",
    re.DOTALL,
)
_QUANT = re.compile(r"(?:[*+?]|\{(?:[0-9]+(?:,[0-9]*)?|,[0-9]*)\})([?+]?)")
_OPEN = re.compile(r"\((?:\?(?:P?<[^>=!]*>|[aiLmsux-]*[:)]|<?[=!]|P=[^)]*\)|#[^)]*\)|.))?")
_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_VERBOSE_SPACE = frozenset(" \t\n\r\f\v")
_LOOK_PREFIX = {
    "(?=": (True, False),
    "(?!": (True, True),
    "(?<=": (False, False),
    "(?<!": (False, True),
}


# ---------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Tok:
    """One lexical unit of a Python pattern: ``kind`` is class, esc, open, close, bar, quant,
    dot, anchor, char or skip (a comment, or whitespace under the x flag)."""

    kind: str
    text: str
    pos: int


def tokenize(src: str, verbose: bool) -> list[Tok]:
    """The tokens of ``src`` (Python ``re`` lexical rules)."""
    out: list[Tok] = []
    i = 0
    while i < len(src):
        tok = _next_token(src, i, verbose)
        if tok.kind != "skip":
            out.append(tok)
        i += len(tok.text)
    return out


def _next_token(src: str, i: int, verbose: bool) -> Tok:
    c = src[i]
    if verbose and (c in _VERBOSE_SPACE or c == "#"):
        end = src.find("\n", i) if c == "#" else i
        return Tok("skip", src[i : (len(src) if end < 0 else end + 1)], i)
    if c == "\\":
        m = _ESCAPE.match(src, i)
        return Tok("esc", m.group() if m else c, i)
    if c == "[":
        return Tok("class", src[i : _class_end(src, i)], i)
    if c == "(":
        m = _OPEN.match(src, i)
        assert m is not None  # every part of _OPEN after its "(" is optional
        text = m.group()
        return Tok("skip" if text.startswith("(?#") else "open", text, i)
    simple = {")": "close", "|": "bar", ".": "dot", "^": "anchor", "$": "anchor"}.get(c)
    if simple:
        return Tok(simple, c, i)
    m = _QUANT.match(src, i)
    return Tok("quant", m.group(), i) if m else Tok("char", c, i)


def _class_end(src: str, i: int) -> int:
    j = i + 1
    if src.startswith("^", j):
        j += 1
    if src.startswith("]", j):
        j += 1
    while j < len(src) and src[j] != "]":
        m = _ESCAPE.match(src, j) if src[j] == "\\" else None
        j += len(m.group()) if m else 1
    return min(j + 1, len(src))


# ---------------------------------------------------------------- Python classes


def _all_codepoints() -> str:
    return "".join(map(chr, range(MAX_CODEPOINT + 1)))


@cache
def python_class(letter: str, ascii_only: bool = False) -> CodepointSet:
    """The code points Python's ``\\d``, ``\\w`` or ``\\s`` matches in a ``str`` pattern."""
    flags = re.ASCII if ascii_only else 0
    found = re.finditer(rf"\{letter}+", _all_codepoints(), flags)
    return CodepointSet((m.start(), m.end() - 1) for m in found)


def _ranges_text(cps: CodepointSet) -> str:
    return "".join(
        f"\\u{{{lo:X}}}" if lo == hi else f"\\u{{{lo:X}}}-\\u{{{hi:X}}}" for lo, hi in cps.ranges
    )


def _named_char(esc: str) -> str:
    try:
        return f"\\u{{{ord(unicodedata.lookup(esc[3:-1])):X}}}"
    except KeyError:
        raise GrammarSyntaxError(f"unknown character name {esc[3:-1]!r}") from None


# ---------------------------------------------------------------- translation


@dataclass(frozen=True)
class Flags:
    """The flags in force: lark's ``/.../flags`` plus a leading inline ``(?flags)``."""

    letters: frozenset[str]

    @property
    def icase(self) -> bool:
        return "i" in self.letters

    @property
    def dotall(self) -> bool:
        return "s" in self.letters

    @property
    def verbose(self) -> bool:
        return "x" in self.letters

    @property
    def ascii(self) -> bool:
        return "a" in self.letters


def take_flags(src: str, flags: frozenset[str]) -> tuple[str, Flags]:
    """Strip leading inline global flags ``(?ims)`` from ``src`` and merge them into ``flags``.

    Raises:
        UnsupportedFeatureError: the ``l`` (locale) or ``L`` flag.
    """
    letters = set(flags)
    while m := _GLOBAL_FLAGS.match(src):
        letters |= set(m.group(1))
        src = src[m.end() :]
    if letters & {"l", "L"}:
        raise UnsupportedFeatureError(
            "locale flag", reason="the l (locale) flag is not valid for str patterns"
        )
    return src, Flags(frozenset(letters))


_SCOPED_DOTALL = re.compile(r"\(\?(s?)(?:-(s?))?:")


def translate_tokens(toks: list[Tok], flags: Flags) -> str:
    """The gramc ("unicode" dialect) text of ``toks``; no flag prefix. A group with scoped
    ``s`` flags, ``(?s:...)`` / ``(?-s:...)`` (llguidance's Rust syntax writes them), becomes
    ``(?:...)`` whose dots follow the flag."""
    out: list[str] = []
    outer: list[Flags] = []
    for t in toks:
        if t.kind == "open" and (m := _SCOPED_DOTALL.fullmatch(t.text)) and (m.group(1) or m.group(2)):
            outer.append(flags)
            letters = flags.letters | {"s"} if m.group(1) else flags.letters - {"s"}
            flags = Flags(frozenset(letters))
            out.append("(?:")
            continue
        if t.kind == "open":
            outer.append(flags)
        elif t.kind == "close" and outer:
            flags = outer.pop()
        out.append(_translate_token(t, flags))
    return "".join(out)


def translate_regex(src: str, flags: frozenset[str]) -> str:
    """Translate a whole Python pattern; ``(?i)`` is prefixed under the ``i`` flag."""
    src, fl = take_flags(src, flags)
    return prefix(fl) + translate_tokens(tokenize(src, fl.verbose), fl)


def prefix(flags: Flags) -> str:
    """The inline-flag prefix gramc's parser understands (``(?i)`` or nothing)."""
    return "(?i)" if flags.icase else ""


def _translate_token(t: Tok, flags: Flags) -> str:
    if t.kind == "dot":
        return "[\\u{0}-\\u{10FFFF}]" if flags.dotall else "[^\\n]"
    if t.kind == "esc":
        return _translate_escape(t.text, flags, in_class=False)
    if t.kind == "class":
        return _translate_class(t.text, flags)
    return t.text


def _translate_escape(esc: str, flags: Flags, in_class: bool) -> str:
    letter = esc[1:2]
    if len(esc) == 2 and letter in "dwsDWS":
        cps = python_class(letter.lower(), flags.ascii)
        if letter.isupper():
            cps = cps.complement()
        return _ranges_text(cps) if in_class else f"[{_ranges_text(cps)}]"
    if esc.startswith("\\N{"):
        return _named_char(esc)
    return esc


def _translate_class(text: str, flags: Flags) -> str:
    j = 1 + text.startswith("[^")
    head, body = text[:j], text[j:]
    if body.startswith("]"):
        head, body = head + "\\]", body[1:]
    out, i = [head], 0
    while i < len(body):
        m = _ESCAPE.match(body, i) if body[i] == "\\" else None
        piece = m.group() if m else body[i]
        out.append(_translate_escape(piece, flags, in_class=True) if m else piece)
        i += len(piece)
    return "".join(out)


# ---------------------------------------------------------------- top-level structure


@dataclass
class Atom:
    """A top-level atom of a pattern.

    ``kind``: ``plain`` (``toks`` is the atom with its quantifiers, ``operand`` the atom
    alone, ``lazy`` whether its last quantifier is lazy), ``look`` (a lookaround:
    ``ahead``/``negative`` and the body in ``toks``), ``anchor`` (``^ $ \\A \\Z``) or ``alt``
    (an unquantified group with several alternatives, in ``alts``).
    """

    kind: str
    toks: list[Tok] = field(default_factory=list)
    lazy: bool = False
    ahead: bool = False
    negative: bool = False
    alts: list[list[Atom]] = field(default_factory=list)
    operand: list[Tok] = field(default_factory=list)


def is_special(toks: list[Tok]) -> bool:
    """True when the pattern has a lookaround or a lazy quantifier (anywhere)."""
    return any(
        (t.kind == "open" and t.text in _LOOK_PREFIX) or (t.kind == "quant" and _is_lazy(t))
        for t in toks
    )


def split_regex(toks: list[Tok]) -> list[list[Atom]]:
    """The top-level alternatives of a pattern, each a list of atoms.

    Unquantified plain groups are opened up (their atoms join the enclosing sequence, or
    they become one ``alt`` atom when they hold several alternatives), so that a lookaround
    or a lazy quantifier inside ``(...)`` is still seen at the level of the terminal.
    """
    alts, i = _split_alts(toks, 0)
    if i < len(toks):
        raise GrammarSyntaxError("unbalanced parenthesis")
    return alts


def _split_alts(toks: list[Tok], i: int) -> tuple[list[list[Atom]], int]:
    alts: list[list[Atom]] = [[]]
    while i < len(toks) and toks[i].kind != "close":
        if toks[i].kind == "bar":
            alts.append([])
            i += 1
            continue
        i = _split_atom(toks, i, alts[-1])
    return alts, i


def _split_atom(toks: list[Tok], i: int, out: list[Atom]) -> int:
    t = toks[i]
    if t.kind == "anchor" or (t.kind == "esc" and t.text in ("\\A", "\\Z")):
        out.append(Atom("anchor", [t]))
        return i + 1
    if t.kind != "open" or t.text.endswith(")"):
        return _plain(toks, i, i + 1, out)
    close = _matching_close(toks, i)
    end = _quant_end(toks, close + 1)
    if t.text in _LOOK_PREFIX:
        if end != close + 1:
            raise UnsupportedFeatureError("quantified lookaround")
        ahead, negative = _LOOK_PREFIX[t.text]
        out.append(Atom("look", toks[i + 1 : close], ahead=ahead, negative=negative))
    elif end == close + 1 and _is_plain_group(t.text):
        inner, _ = _split_alts(toks, i + 1)
        out.extend(inner[0]) if len(inner) == 1 else out.append(Atom("alt", alts=inner))
    else:
        return _plain(toks, i, close + 1, out)
    return end


def _plain(toks: list[Tok], i: int, operand_end: int, out: list[Atom]) -> int:
    """An atom ``toks[i:operand_end]`` and its quantifiers; lazy when the last one is."""
    end = _quant_end(toks, operand_end)
    lazy = end > operand_end and _is_lazy(toks[end - 1])
    out.append(Atom("plain", toks[i:end], lazy=lazy, operand=toks[i:operand_end]))
    return end


def _is_plain_group(opener: str) -> bool:
    return opener in ("(", "(?:") or opener.startswith(("(?P<", "(?<"))


def _matching_close(toks: list[Tok], i: int) -> int:
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].kind == "open" and not toks[j].text.endswith(")"):
            depth += 1
        elif toks[j].kind == "close":
            depth -= 1
            if depth == 0:
                return j
    raise GrammarSyntaxError("missing ), unterminated group")


def _quant_end(toks: list[Tok], i: int) -> int:
    while i < len(toks) and toks[i].kind == "quant":
        i += 1
    return i


def _is_lazy(t: Tok) -> bool:
    return len(t.text) > 1 and t.text.endswith("?")
