"""The EBNF frontend: three EBNF notations to IR (see docs/grammars/ebnf.md).

- ``"w3c"``: the notation of the W3C XML specification. ``symbol ::= expr``; ``"..."``
  and ``'...'`` strings (no escapes); ``#xN`` characters; classes ``[a-z]``,
  ``[#x20-#x7E]``, ``[^...]``; ``( )``, ``? * +``, ``A - B``; ``/* */`` comments. The
  XML spec's production numbers ``[12]`` and ``[ wfc: ... ]`` / ``[ vc: ... ]``
  annotations are skipped.
- ``"iso"``: ISO/IEC 14977. ``name = expr ;`` (or ``.``); ``,`` concatenation, ``|``,
  ``[ ]`` optional, ``{ }`` repetition, ``( )``, ``n * x``, ``A - B``; ``(* *)`` comments
  (nestable); ``'...'`` / ``"..."`` terminals. Multi-word names (``digit excluding zero``)
  are joined with ``_``. Special sequences ``? ... ?`` are refused.
- ``"gbnf-like"``: the notation of XGrammar (GBNF-like: ``root ::= "a" b``, classes with
  escapes, ``{m,n}`` with blanks, ``#`` comments). The XGrammar macros ``Regex("...")``
  (via the regex frontend), ``Substring(...)`` and ``Token(...)`` are supported;
  ``TagDispatch``, ``TokenTagDispatch``, ``ExcludeToken``, lookahead assertions ``(= ...)``
  and rule attributes ``name[...] ::=`` are refused with
  :class:`~gramc.errors.UnsupportedFeatureError` naming them.

``dialect="auto"`` reads the first rule's operator (``=`` means ISO) and otherwise weighs
the features that only one notation has (see :func:`detect_dialect`). The start rule is
``root`` when there is one, else the first rule. The exception ``A - B`` is computed as a
language difference, exactly, when both sides are regular; otherwise it is refused.

>>> print(parse_ebnf("Name ::= [a-z]+ - 'xml'", dialect="w3c"), end="")
Name ::= "x" "m"? | ([a-wyz] | "x" ([a-ln-z] | "m" ([a-km-z] | "l" [a-z]))) [a-z]*
>>> print(parse_ebnf("digit = '0' | nonzero ; nonzero = '1' | '2' ;"), end="")
digit ::= "0" | nonzero
nonzero ::= [12]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from gramc.compiler.frontends.grammar_lexing import (
    CLASS_SET_ESCAPES,
    XGRAMMAR_ESCAPES,
    Comment,
    Scanner,
    Tok,
    char_class,
    encode_codepoints,
    hex_char_ref,
    integer,
    negated_special_token,
    repetition_bounds,
    special_token,
    string_codepoints,
    string_literal,
)
from gramc.compiler.frontends.grammar_parsing import (
    Notation,
    RuleParser,
    check_references,
    punct,
    tokenize,
)
from gramc.compiler.frontends.language_ops import (
    difference,
    referenced,
    restrict_bytes,
    substitute,
)
from gramc.compiler.frontends.regex import parse_regex
from gramc.compiler.ir import (
    ALL_BYTES,
    EMPTY,
    Expr,
    Grammar,
    Ref,
    Token,
    alt,
    optional,
    seq,
)
from gramc.compiler.unicode import ALL_CODEPOINTS
from gramc.errors import GrammarSyntaxError, LimitExceededError, UnsupportedFeatureError
from gramc.limits import DEFAULT_LIMITS, Limits

EBNF_DIALECTS = ("w3c", "iso", "gbnf-like")
_TITLES = {"w3c": "W3C EBNF", "iso": "ISO 14977 EBNF", "gbnf-like": "GBNF-like (XGrammar) EBNF"}


def parse_ebnf(text: str, source_name: str = "<ebnf>", dialect: str = "auto", *,
               start: str | None = None, limits: Limits = DEFAULT_LIMITS) -> Grammar:
    """Parse EBNF text into an IR grammar.

    Args:
        text: the grammar source.
        source_name: the name error spans carry.
        dialect: ``"auto"`` or one of :data:`EBNF_DIALECTS`.
        start: the start rule; by default ``root`` when defined, else the first rule.
        limits: ``max_nesting`` bounds group nesting, ``max_repeat`` counted repetitions.

    Raises:
        GrammarSyntaxError: malformed text, an undefined or twice-defined rule.
        UnsupportedFeatureError: an XGrammar-only macro, an ISO special sequence, an
            exception ``A - B`` whose operands are not regular...
        LimitExceededError: a limit of ``limits`` was exceeded.
        ValueError: ``dialect`` is unknown.
    """
    if dialect != "auto" and dialect not in EBNF_DIALECTS:
        raise ValueError(f"unknown EBNF dialect {dialect!r} (expected 'auto' or one of {EBNF_DIALECTS})")
    chosen = detect_dialect(text) if dialect == "auto" else dialect
    try:
        return _parse(text, source_name, chosen, start, limits)
    except (GrammarSyntaxError, UnsupportedFeatureError) as e:
        if dialect != "auto":
            raise
        raise _noted(e, f" (read as {_TITLES[chosen]}; pass dialect= to choose another)") from None


def _parse(text: str, source_name: str, dialect: str, start: str | None, limits: Limits) -> Grammar:
    sc = Scanner(text, source_name, limits)
    notation = _NOTATIONS[dialect]
    exceptions = _Exceptions(sc)
    parsed = RuleParser(sc, tokenize(sc, notation), notation, exceptions.add).parse()
    check_references(sc, parsed)
    if not parsed.rules:
        raise sc.error("the grammar defines no rules", 0)
    start = start or ("root" if "root" in parsed.rules else next(iter(parsed.rules)))
    if start not in parsed.rules:
        raise sc.error(f"the grammar has no {start!r} rule to start from", 0)
    return Grammar(exceptions.resolve(parsed.rules), start)


def _noted(e: GrammarSyntaxError | UnsupportedFeatureError, note: str) -> Exception:
    if isinstance(e, UnsupportedFeatureError):
        return UnsupportedFeatureError(e.feature, e.span, e.reason + note)
    return type(e)(e.reason + note, e.span)


# ---------------------------------------------------------------- dialect detection

_FIRST_RULE = re.compile(
    r"^[ \t]*(?:\[\s*\d+[a-z]?\s*\][ \t]*)?[A-Za-z_][\w.\- \t]*?[ \t]*(::=|=)", re.MULTILINE)
_COMMENTS = re.compile(r"\(\*.*?\*\)|/\*.*?\*/|#(?!x[0-9A-Fa-f])[^\n]*", re.DOTALL)
_W3C_FEATURES = (r"#x[0-9A-Fa-f]", r"/\*", r"(?:^|[\s(|])'[^'\n]*'", r"\s-\s",
                 r"^\s*\[\s*\d+[a-z]?\s*\]")
_GBNF_FEATURES = (r"#(?!x[0-9A-Fa-f])", r"\{\s*\d*\s*,?\s*\d+\s*\}", r"\\",
                  r"\b(?:Regex|Substring|Token|TagDispatch|TokenTagDispatch|ExcludeToken)\s*\(", r"<\[")


def detect_dialect(text: str) -> str:
    """Which EBNF notation ``text`` is written in (one of :data:`EBNF_DIALECTS`).

    ``=`` as the first rule's operator means ISO 14977. Otherwise the notation with more of
    its own features wins (W3C: ``#xN``, ``/* */``, ``'...'``, ``A - B``, production
    numbers; GBNF-like: ``#`` comments, ``{m,n}``, backslash escapes, macros, ``<[id]>``);
    a tie goes to GBNF-like when a ``root`` rule exists, else to W3C.

    >>> detect_dialect("a = 'x' ;"), detect_dialect("a ::= #x41"), detect_dialect('root ::= "a"{2}')
    ('iso', 'w3c', 'gbnf-like')
    """
    m = _FIRST_RULE.search(_COMMENTS.sub(" ", text))
    if m is not None and m.group(1) == "=":
        return "iso"
    w3c = sum(bool(re.search(p, text, re.MULTILINE)) for p in _W3C_FEATURES)
    gbnf = sum(bool(re.search(p, text, re.MULTILINE)) for p in _GBNF_FEATURES)
    if w3c != gbnf:
        return "w3c" if w3c > gbnf else "gbnf-like"
    return "gbnf-like" if re.search(r"^\s*root\s*::=", text, re.MULTILINE) else "w3c"


# ---------------------------------------------------------------- exceptions (A - B)


class _Exceptions:
    """Collects ``A - B`` as placeholder references while parsing; resolves them after."""

    def __init__(self, sc: Scanner):
        self.sc = sc
        self.pending: dict[str, tuple[Expr, Expr, int]] = {}

    def add(self, lhs: Expr, rhs: Expr, offset: int) -> Expr:
        name = f"\x00exception{len(self.pending)}"
        self.pending[name] = (lhs, rhs, offset)
        return Ref(name)

    def resolve(self, rules: dict[str, Expr]) -> dict[str, Expr]:
        if not self.pending:
            return rules
        done: dict[str, Expr] = {}
        for name in self._order(rules):
            lhs, rhs, offset = self.pending[name]
            done[name] = difference(lhs, rhs, {**rules, **done}, span=self.sc.span(offset),
                                    limits=self.sc.limits)
        return {n: substitute(body, done) for n, body in rules.items()}

    def _order(self, rules: Mapping[str, Expr]) -> list[str]:
        """The placeholders, each after the placeholders its operands reach."""
        deps = {p: self._reach(lhs, rules) | self._reach(rhs, rules)
                for p, (lhs, rhs, _) in self.pending.items()}
        order: list[str] = []
        while deps:
            ready = [p for p, d in deps.items() if not d & deps.keys()]
            if not ready:
                offset = self.pending[next(iter(deps))][2]
                raise self.sc.unsupported(
                    "exception of a recursive rule", offset,
                    "the operands of this '-' depend on its own result (recursion); 'A - B' is "
                    "only supported when both sides are regular")
            order += ready
            for p in ready:
                del deps[p]
        return order

    def _reach(self, expr: Expr, rules: Mapping[str, Expr]) -> set[str]:
        found, seen, todo = set(), set(), list(referenced(expr))
        while todo:
            name = todo.pop()
            if name in self.pending:
                found.add(name)
            elif name in rules and name not in seen:
                seen.add(name)
                todo.extend(referenced(rules[name]))
        return found


# ---------------------------------------------------------------- W3C


def _atom(build: Callable[[Scanner], Expr]) -> Callable[[Scanner], Tok]:
    def handler(sc: Scanner) -> Tok:
        start = sc.pos
        return Tok("atom", start, build(sc))
    return handler


_W3C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[.-][A-Za-z0-9_]+)*")
_W3C_SKIP = re.compile(  # constraint notes, and production numbers before a rule name
    r"\[\s*(?:wfc|vc)\s*:[^\]]*\]|\[\s*[0-9]+[a-z]?\s*\](?=\s*[A-Za-z_][\w.-]*\s*::=)", re.IGNORECASE)


def _w3c_class(sc: Scanner) -> Tok | None:
    skip = sc.match(_W3C_SKIP)
    if skip is not None:  # an XML-spec production number or constraint note
        sc.pos = skip.end()
        return None
    return Tok("atom", sc.pos, char_class(sc, None, hex_refs=True)[0])


def _w3c_char(sc: Scanner) -> Expr:
    start = sc.pos
    if not sc.startswith("#x"):
        raise sc.error("expected a character reference '#xN'", start)
    return encode_codepoints(sc, [hex_char_ref(sc)], start)


def _plain_string(sc: Scanner) -> Expr:
    return string_literal(sc, None, multiline=False)


def _names(pattern: re.Pattern, join: bool = False) -> Callable[[Scanner], Tok | None]:
    def handler(sc: Scanner) -> Tok | None:
        start, text = sc.pos, sc.take(pattern)
        if text is None:
            return None
        return Tok("name", start, "_".join(text.split()) if join else text)
    return handler


_W3C = Notation(
    name="W3C EBNF",
    define="::=",
    handlers={'"': _atom(_plain_string), "'": _atom(_plain_string), "[": _w3c_class,
              "#": _atom(_w3c_char), **{c: punct(c) for c in "()|*+?-"}},
    name_token=_names(_W3C_NAME),
    comments=(Comment("/*", "*/"),),
)

# ---------------------------------------------------------------- ISO 14977

_ISO_WORD = r"[A-Za-z][A-Za-z0-9_]*"
_ISO_NAME = re.compile(rf"{_ISO_WORD}(?:[ \t\r\n]+{_ISO_WORD})*")


def _iso_special(sc: Scanner) -> Tok:
    raise sc.unsupported(
        "special sequence", sc.pos,
        "ISO 14977 special sequences '? ... ?' have no defined meaning; write the rule out")


_ISO = Notation(
    name="ISO 14977 EBNF",
    define="=",
    handlers={'"': _atom(_plain_string), "'": _atom(_plain_string), "?": _iso_special,
              ";": punct("end"), ".": punct("end"),
              **{d: (lambda sc: Tok("int", sc.pos, integer(sc))) for d in "0123456789"},
              **{c: punct(c) for c in "()[]{}|,-*"}},
    name_token=_names(_ISO_NAME, join=True),
    comments=(Comment("(*", "*)", nested=True),),
    terminated=True,
    postfix=False,
)

# ---------------------------------------------------------------- GBNF-like (XGrammar)

_XG_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
_RULE_ATTRIBUTE = re.compile(r"\[[^\]\n]*\][ \t]*::=")
_MACRO_OPEN = re.compile(r"[ \t]*\(")
_HASH = (Comment("#"),)


def _xg_name(sc: Scanner) -> Tok | None:
    start, name = sc.pos, sc.take(_XG_NAME)
    if name is None:
        return None
    opening = sc.match(_MACRO_OPEN) if name in _MACROS else None
    if opening is not None:
        sc.pos = opening.end() - 1
        return Tok("atom", start, _MACROS[name](sc, start))
    attribute = sc.match(_RULE_ATTRIBUTE) if sc.peek() == "[" else None
    if attribute is not None:
        raise sc.unsupported(
            "rule attribute", sc.pos,
            f"rule attributes like {name}{attribute.group().split(']')[0]}] are an XGrammar "
            "extension (lazy matching, token or character budgets) that gramc does not support")
    return Tok("name", start, name)


def _xg_paren(sc: Scanner) -> Tok:
    if sc.startswith("(="):
        raise sc.unsupported(
            "lookahead assertion", sc.pos,
            "XGrammar lookahead assertions '(= ...)' are not supported: they restrict what may "
            "follow a rule, which a context-free IR cannot express; remove it or fold it into the rule")
    return sc.punct("(")


_GBNF_LIKE = Notation(
    name="GBNF-like EBNF",
    define="::=",
    handlers={
        '"': _atom(lambda sc: string_literal(sc, XGRAMMAR_ESCAPES, multiline=False)),
        "[": _atom(lambda sc: char_class(sc, XGRAMMAR_ESCAPES, set_escapes=CLASS_SET_ESCAPES)[0]),
        "{": lambda sc: Tok("bounds", sc.pos, repetition_bounds(sc)),
        "(": _xg_paren, "<": special_token, "!": negated_special_token,
        ".": _atom(lambda sc: (sc.punct("."), ALL_CODEPOINTS.to_ir())[1]),
        **{c: punct(c) for c in ")|*+?"},
    },
    name_token=_xg_name,
    comments=_HASH,
)

_NOTATIONS = {"w3c": _W3C, "iso": _ISO, "gbnf-like": _GBNF_LIKE}

# ---------------------------------------------------------------- XGrammar macros

#: A macro argument: (kind, value, offset); kind is str | int | bool | ident | tuple, and the
#: value's type follows it (code points, int, bool, str, a list of arguments): checked by kind.
_Value = tuple[str, Any, int]
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)[ \t]*=(?!=)")
_INT = re.compile(r"-?[0-9]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_MAX_ARG_DEPTH = 16
_JSON_UNSAFE = (1 << 0x20) - 1 | 1 << 0x22 | 1 << 0x5C  # C0 controls, '"' and '\'


def _macro_args(sc: Scanner, name: str) -> tuple[list[_Value], dict[str, _Value]]:
    """The arguments of the macro call whose '(' is at ``sc.pos``."""
    sc.pos += 1
    positional: list[_Value] = []
    named: dict[str, _Value] = {}
    while True:
        sc.skip_space(_HASH)
        if sc.eat(")"):
            return positional, named
        key = sc.match(_KEY)
        if key is not None:
            sc.pos = key.end()
            sc.skip_space(_HASH)
        value = _macro_value(sc, 0)
        if key is not None:
            named[key.group(1)] = value
        else:
            positional.append(value)
        sc.skip_space(_HASH)
        if not sc.eat(",") and sc.peek() != ")":
            raise sc.error(f"expected ',' or ')' in the arguments of {name}()")


def _macro_value(sc: Scanner, depth: int) -> _Value:
    start, c = sc.pos, sc.peek()
    if c == '"':
        return ("str", string_codepoints(sc, XGRAMMAR_ESCAPES, multiline=False), start)
    if sc.match(_INT):
        return ("int", int(sc.take(_INT) or 0), start)
    if c == "(":
        if depth >= _MAX_ARG_DEPTH:
            raise sc.error("macro arguments are nested too deeply", start)
        return ("tuple", _macro_args(sc, "tuple")[0], start)
    ident = sc.take(_IDENT)
    if ident is None:
        raise sc.error("expected a string, number, boolean, name or tuple as macro argument", start)
    if ident in ("true", "false"):
        return ("bool", ident == "true", start)
    return ("ident", ident, start)


def _regex_macro(sc: Scanner, start: int) -> Expr:
    args, named = _macro_args(sc, "Regex")
    if len(args) != 1 or args[0][0] != "str":
        raise sc.error("Regex() takes exactly one string argument (the pattern)", start)
    for key in sorted(named.keys() - {"flags", "json_string"}):
        raise sc.error(f"Regex() has no argument {key!r}", named[key][2])
    flags = _named(sc, named, "flags", "str", "a string")
    json_string = _named(sc, named, "json_string", "bool", "a boolean")
    pattern = "".join(map(chr, args[0][1]))
    flag_text = None if flags is None else "".join(map(chr, flags))
    expr = _compile_regex(sc, pattern, flag_text, start)
    return restrict_bytes(expr, ALL_BYTES ^ _JSON_UNSAFE) if json_string else expr


def _named(sc: Scanner, named: dict[str, _Value], key: str, kind: str, what: str):
    if key not in named:
        return None
    if named[key][0] != kind:
        raise sc.error(f"the {key} argument must be {what}", named[key][2])
    return named[key][1]


def _compile_regex(sc: Scanner, pattern: str, flags: str | None, start: int) -> Expr:
    """XGrammar semantics: without ``flags``, ``.`` matches every character; with ``flags``,
    ``s`` makes it do so and ``i`` ignores ASCII case."""
    for flag in (flags or "").replace("i", "").replace("s", ""):
        raise sc.unsupported(f"Regex flag {flag!r}", start,
                             f"Regex() flag {flag!r} is not supported (only 'i' and 's')")
    if flags is None or "s" in flags:
        pattern = _dot_matches_all(pattern)
    if flags and "i" in flags and not pattern.startswith("(?i)"):
        pattern = "(?i)" + pattern
    try:
        return parse_regex(pattern, source_name="<Regex()>", limits=sc.limits)
    except LimitExceededError as e:
        raise LimitExceededError(e.limit, e.value, e.maximum, f"in Regex(): {e.where}", sc.span(start)) from None
    except UnsupportedFeatureError as e:
        raise UnsupportedFeatureError(e.feature, sc.span(start), f"in Regex(): {e.reason}") from None
    except GrammarSyntaxError as e:
        raise sc.error(f"in Regex(): {e.reason}", start) from None


def _dot_matches_all(pattern: str) -> str:
    """``pattern`` with every ``.`` outside a class replaced by ``[\\s\\S]``."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        step = 2 if c == "\\" else 1
        if c == "." and not in_class:
            out.append(r"[\s\S]")
        else:
            out.append(pattern[i : i + step])
            in_class = (in_class and c != "]") or (not in_class and c == "[")
        i += step
    return "".join(out)


def _substring_macro(sc: Scanner, start: int) -> Expr:
    """``Substring(c1, ..., cn)``: the concatenations of contiguous runs of the chunks."""
    args, named = _macro_args(sc, "Substring")
    if named or any(kind != "str" for kind, _, _ in args):
        raise sc.error("Substring() arguments must be strings", start)
    chunks = [encode_codepoints(sc, cps, at) for _, cps, at in args]
    chunks = [c for c in chunks if c is not EMPTY]
    sc.limits.check("max_nesting", 2 * len(chunks), "Substring() arguments", sc.span(start))
    tails: list[Expr] = []
    for chunk in reversed(chunks):
        tails.append(seq(chunk, optional(tails[-1])) if tails else chunk)
    return optional(alt(*reversed(tails)))


def _token_macro(sc: Scanner, start: int) -> Expr:
    args, named = _macro_args(sc, "Token")
    if named or not args or any(k != "int" or v < 0 for k, v, _ in args):
        raise sc.error("Token() takes one or more non-negative token ids", start)
    return alt(*(Token(v) for _, v, _ in args))


def _refused(name: str, reason: str) -> Callable[[Scanner, int], Expr]:
    def macro(sc: Scanner, start: int) -> Expr:
        raise sc.unsupported(f"XGrammar macro {name}", start, f"{name}(...) {reason}")
    return macro


_MACROS: dict[str, Callable[[Scanner, int], Expr]] = {
    "Regex": _regex_macro,
    "Substring": _substring_macro,
    "Token": _token_macro,
    "TagDispatch": _refused("TagDispatch", "is an XGrammar extension (free text that dispatches "
                            "to a rule after each tag, with stop strings) that gramc does not support"),
    "TokenTagDispatch": _refused("TokenTagDispatch", "is an XGrammar extension (dispatch on "
                                 "special tokens inside free text) that gramc does not support"),
    "ExcludeToken": _refused("ExcludeToken", "means 'any single token except these', which has no "
                             "byte-level meaning before a vocabulary is bound"),
}
