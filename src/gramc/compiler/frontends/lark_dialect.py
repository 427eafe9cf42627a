r"""llguidance's Lark dialect: the extensions rewritten into text lark's own loader reads.

lark's grammar loader (which the Lark frontend uses for everything it can) does not know
llguidance's extensions, so :func:`prepare` rewrites them first and keeps what they mean in
side tables that the lowering (:mod:`gramc.compiler.frontends.lark`) consults:

- ``<|name|>`` and ``<[ids]>`` become declared placeholder rules (``tokens``);
- ``%json {schema}`` and ``%lark {grammar}`` become declared placeholder rules whose
  sub-grammar (``subgrammars``) is compiled by the JSON Schema frontend or by the Lark
  frontend itself, in its own namespace;
- ``%regex {...}`` becomes a *marker* string literal (``"\ue000k"``) that stands for the
  regular language it defines wherever a literal may appear, in rules and terminals;
- a terminal whose body uses ``&`` (intersection) or prefix ``~`` (complement) is parsed
  here: its operands become hidden helper terminals, the definition a marker whose value
  is an :class:`Op` tree over them;
- ``\\u{...}`` and ``\\x{...}`` in a regex literal become Python's ``\\U........``;
- ``x{m,n}``, ``x{n}``, ``x{m,}``, ``x{,n}`` become lark's ``x~m..n`` (:data:`UNBOUNDED`
  stands for a missing upper bound);
- ``name[attr, key=value]:`` loses its attribute list (``attributes``); ``stop=``/``suffix=``
  values become hidden helper terminals;
- ``%llguidance {options}`` is removed (``options``);
- a parametric rule's header ``name::_`` loses its ``::_`` (``parametric``), a reference
  ``name::expr`` and a condition ``%if cond`` become declared placeholder rules
  (``param_refs``, ``conds``; :mod:`gramc.compiler.frontends.lark_parametric`), which the
  lowering expands into one rule per parameter value.

Offsets move with these rewrites; :attr:`Dialect.original` maps an offset in the rewritten
text back to the user's text, so every error still points at what the user wrote.

>>> d = prepare('start: "a"{2,} b\nb[lazy]: /x+/', "<lark>")
>>> print(d.text.splitlines()[0]); print(d.attributes["b"].lazy)
start: "a"~2..1000000000000000000 b
True
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any

from gramc.compiler.frontends.lark_parametric import Cond, ParamExpr, parse_cond, parse_param_expr
from gramc.compiler.ir import Expr, Token, TokenName, alt, optional, seq, text
from gramc.errors import GrammarSyntaxError, LimitExceededError, Span, UnsupportedFeatureError

MAX_TOKEN_RANGE = 1 << 20  # ids in one <[lo-hi]> range
#: The upper bound written for ``x{m,}``: lark's ``~m..n`` needs one; the lowering reads it
#: as "unbounded" (no grammar can use it otherwise: it is far above any repetition limit).
UNBOUNDED = 10**18
MARK = "\ue000"  # private-use character that opens a marker literal's value

_SPECIAL = re.compile(r"<\|[^\n]*?\|>|<\[[^\]\n]*\]>")
_TOKEN_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?")
_DIRECTIVE = re.compile(r"%(json|regex|lark|llguidance)\s*(?=\{)")
_COUNT = re.compile(r"\{\s*(-?[0-9]*)\s*(?:(,)\s*(-?[0-9]*)\s*)?\}")
_RULE_HEAD = re.compile(r"(?m)^[ \t]*[?!]?([A-Za-z_][A-Za-z_0-9]*)(?:\.-?[0-9]+)?(?=\[)")
_PARAM_HEAD = re.compile(r"(?m)^[ \t]*[?!]?([a-z_]\w*)[ \t]*::[ \t]*_(?!\w)")
_PARAM_REF = re.compile(r"([A-Za-z_]\w*)[ \t]*::[ \t]*")
_IF = re.compile(r"%if\b")
_ALIAS_BEFORE = re.compile(r"->[ \t]*[a-z_]\w*[ \t]*$")
_TERM_HEAD = re.compile(r"(?m)^[ \t]*([A-Z_][A-Z_0-9]*)(?:\.-?[0-9]+)?[ \t]*:")
_KNOWN_ATTRIBUTES = ("lazy", "stop", "suffix", "capture", "stop_capture", "max_tokens",
                     "temperature")
#: %llguidance options: name -> (the values gramc honours, what they mean to gramc).
LLGUIDANCE_OPTIONS: dict[str, tuple[tuple[Any, ...], str]] = {
    "no_forcing": ((True, False), "tokenization of forced text only: no effect on the language"),
    "allow_invalid_utf8": ((False,), "true (invalid UTF-8 in the language) is not supported"),
    "skip_repetition": (("once", "repeat"), "'once': an %ignore pattern spans the whole gap"),
}


@dataclass
class Attributes:
    """A rule's llguidance attributes (``name[lazy, stop="x"]: ...``)."""

    span: Span
    lazy: bool = False
    stop: str | None = None  # helper terminal holding the stop / suffix language
    stop_is_empty: bool = False
    suffix: str | None = None
    capture: str | None = None  # the capture's name ("": the rule's name); None: no capture
    stop_capture: str | None = None
    unsupported: list[str] = field(default_factory=list)  # attributes gramc refuses


@dataclass(frozen=True)
class Op:
    """A terminal expression with ``&`` / ``~``: ``kind`` is term (``args``: a helper
    terminal name), and, not, seq, alt or rep (``args``: operands, and for rep the bounds)."""

    kind: str
    args: tuple


@dataclass
class Sub:
    """An inline sub-grammar: ``kind`` ``json`` (``body``: the schema) or ``lark`` (the text)."""

    kind: str
    body: Any
    span: Span


@dataclass
class Dialect:
    """The rewritten text and what the rewrites stand for."""

    text: str
    source: str
    source_name: str
    edits: list[tuple[int, int]] = field(default_factory=list)  # (new offset, old offset)
    tokens: dict[str, Expr] = field(default_factory=dict)  # placeholder rule -> IR
    names: dict[str, str] = field(default_factory=dict)  # placeholder -> original text
    subgrammars: dict[str, Sub] = field(default_factory=dict)  # placeholder rule -> sub-grammar
    markers: dict[str, Any] = field(default_factory=dict)  # marker value -> IR or Op
    attributes: dict[str, Attributes] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    parametric: set[str] = field(default_factory=set)  # rules defined as name::_
    param_refs: dict[str, tuple[str, ParamExpr]] = field(default_factory=dict)  # placeholder
    conds: dict[str, Cond] = field(default_factory=dict)  # placeholder -> %if condition

    def placeholders(self) -> list[str]:
        """The declared placeholder rules: what lark must accept as defined elsewhere."""
        return [*self.tokens, *self.subgrammars, *self.param_refs, *self.conds]

    def original(self, offset: int) -> int:
        """The offset in the user's text of ``offset`` in :attr:`text`."""
        k = bisect.bisect_right(self.edits, (offset, 1 << 62)) - 1
        if k < 0:
            return min(offset, len(self.source))
        new, old = self.edits[k]
        return min(old + max(offset - new, 0), len(self.source))


# ---------------------------------------------------------------- the scan


class _Rewriter:
    """Build the rewritten text piece by piece, recording where each piece came from."""

    def __init__(self, source: str, source_name: str):
        self.d = Dialect("", source, source_name)
        self.out: list[str] = []
        self.length = 0
        self.last = 0  # end of the last rewritten span in the source
        self.helpers: list[str] = []  # helper definitions appended after the text
        words = {w.lower() for w in re.findall(r"\w+", source)}
        self.stem = "zt"
        while any(w.startswith(self.stem) for w in words):
            self.stem += "x"
        self.count = 0

    def span(self, offset: int) -> Span:
        return Span.at(self.d.source, offset, self.d.source_name)

    def fresh(self, upper: bool = False) -> str:
        self.count += 1
        name = f"{self.stem}{self.count}"
        return name.upper() if upper else name

    def replace(self, a: int, b: int, new: str) -> None:
        """Replace source[a:b] (at or after the last replaced span) by ``new``."""
        self._emit(self.d.source[self.last : a], self.last)
        self._emit(new, a)
        self.last = b
        self.d.edits.append((self.length, b))

    def _emit(self, s: str, old: int) -> None:
        self.d.edits.append((self.length, old))
        self.out.append(s)
        self.length += len(s)

    def marker(self, value: Any) -> str:
        key = f"{MARK}{len(self.d.markers)}"
        self.d.markers[key] = value
        return json.dumps(key)

    def finish(self) -> Dialect:
        self._emit(self.d.source[self.last :], self.last)
        declared = self.d.placeholders()
        tail = "".join(f"\n{h}" for h in self.helpers)
        if declared:
            tail += "\n%declare " + " ".join(declared)
        self._emit(tail + "\n", len(self.d.source))
        self.d.text = "".join(self.out)
        return self.d


def prepare(source: str, source_name: str) -> Dialect:
    """Rewrite llguidance's extensions in ``source`` (see the module docstring)."""
    rw = _Rewriter(source, source_name)
    heads = {m.end(): m for m in _RULE_HEAD.finditer(source)}
    param_heads = {m.start(1): m for m in _PARAM_HEAD.finditer(source)}
    terms = {m.start(): m for m in _TERM_HEAD.finditer(source)}
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if i in terms and (end := _term_with_ops(rw, terms[i])) is not None:
            i = end
        elif c == '"' or (c == "/" and not source.startswith("//", i)):
            end = skip_quoted(source, i, c)
            if c == "/":
                _braced_escapes(rw, i, end)
            i = end
        elif c == "#" or c == "/":
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif c == "<" and (m := _SPECIAL.match(source, i)):
            name = rw.fresh()
            rw.d.tokens[name] = special_token(m.group(), rw.span(i))
            rw.d.names[name] = m.group()
            rw.replace(i, m.end(), name)
            i = m.end()
        elif c == "%" and (m := _DIRECTIVE.match(source, i)):
            i = _directive(rw, m)
        elif c == "%" and _IF.match(source, i):
            i = _condition(rw, i)
        elif i in param_heads:
            m = param_heads[i]
            rw.d.parametric.add(m.group(1))
            rw.replace(m.end(1), m.end(), "")
            i = m.end()
        elif (c.isalpha() or c == "_") and not (i and (source[i - 1].isalnum() or source[i - 1] == "_")) \
                and (m := _PARAM_REF.match(source, i)):
            i = _param_ref(rw, m)
        elif c == "{" and (m := _COUNT.match(source, i)) and m.group(1) + (m.group(3) or ""):
            rw.replace(i, m.end(), _count(m, rw.span(i)))
            i = m.end()
        elif c == "[" and i in heads:
            i = _attributes(rw, heads[i])
        else:
            i += 1
    return rw.finish()


def skip_quoted(text: str, i: int, quote: str) -> int:
    """The offset after the string or regex literal opened at ``i`` (and its flags)."""
    j = i + 1
    while j < len(text) and text[j] != quote and not (quote == '"' and text[j] == "\n"):
        j += 2 if text[j] == "\\" else 1
    j += 1
    while j < len(text) and text[j] in "imslux":
        j += 1
    return j


_BRACED = re.compile(r"\\[ux]\{([0-9A-Fa-f]{1,8})\}")


def _braced_escapes(rw: _Rewriter, start: int, end: int) -> None:
    """``\\u{1F600}`` / ``\\x{e9}`` in the regex literal at ``start:end`` (Rust regex syntax,
    which llguidance's and xgrammar's regexes use; an error in Python's ``re``) become
    Python's ``\\U0001F600`` (``\\.`` for ``\\u{2e}``: a literal character)."""
    source, j = rw.d.source, start + 1
    while j < min(end, len(source)):
        m = _BRACED.match(source, j) if source[j] == "\\" else None
        if m:
            cp = int(m.group(1), 16)
            if cp > 0x10FFFF:
                raise GrammarSyntaxError(f"escape {m.group()} is not a code point", rw.span(j))
            ch = chr(cp)
            # lark turns \U escapes into the character itself: an ASCII one is written so
            # that it stays literal in the regex
            new = (ch if ch.isalnum() else "\\" + ch) if cp < 0x80 and ch.isprintable() else f"\\U{cp:08X}"
            rw.replace(j, m.end(), new)
            j = m.end()
        else:
            j += 2 if source[j] == "\\" else 1


# ---------------------------------------------------------------- special tokens


def special_token(raw: str, span: Span) -> Expr:
    """``<|name|>`` (the token with that text) or ``<[id, lo-hi, ...]>`` (token ids)."""
    if raw.startswith("<|"):
        return TokenName(raw)  # the token's full text, brackets included
    body = raw[2:-2]
    if body == "*" or body.startswith("^"):
        feature = "wildcard token <[*]>" if body == "*" else f"negated token set {raw}"
        raise UnsupportedFeatureError(
            feature, span, f"{feature} needs the vocabulary's size, which gramc's IR does not have")
    ids: list[int] = []
    for item in body.split(","):
        m = _TOKEN_ITEM.fullmatch(item)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise GrammarSyntaxError(f"invalid token range {raw}", span)
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi - lo >= MAX_TOKEN_RANGE:
            raise LimitExceededError("max_token_range", hi - lo + 1, MAX_TOKEN_RANGE, "token range", span)
        ids.extend(range(lo, hi + 1))
    return alt(*(Token(i) for i in ids))


# ---------------------------------------------------------------- {m,n}


def _count(m: re.Match, span: Span) -> str:
    lo_s, comma, hi_s = m.group(1), m.group(2), m.group(3) or ""
    lo = int(lo_s) if lo_s else 0
    hi = (int(hi_s) if hi_s else UNBOUNDED) if comma else lo
    if lo < 0 or hi < lo:
        raise GrammarSyntaxError(f"bad repetition range {m.group()}: range end must be >= start", span)
    return f"~{lo}" if not comma else f"~{lo}..{hi}"


# ---------------------------------------------------------------- %json %regex %lark %llguidance


def _directive(rw: _Rewriter, m: re.Match) -> int:
    kind, start, brace = m.group(1), m.start(), m.end()
    span = rw.span(start)
    end = _lark_block_end(rw.d.source, brace, span) if kind == "lark" else _json_end(rw.d.source, brace, span)
    body = rw.d.source[brace:end]
    if kind == "lark":
        name = rw.fresh()
        rw.d.subgrammars[name] = Sub("lark", body[1:-1], span)
        rw.d.names[name] = "%lark {...}"
        rw.replace(start, end, name)
        return end
    try:
        value = json.loads(body)
    except json.JSONDecodeError as e:
        raise GrammarSyntaxError(f"%{kind}: invalid JSON: {e.msg}", rw.span(brace + e.pos)) from None
    if kind == "json":
        name = rw.fresh()
        rw.d.subgrammars[name] = Sub("json", value, span)
        rw.d.names[name] = "%json {...}"
        rw.replace(start, end, name)
    elif kind == "regex":
        rw.replace(start, end, rw.marker(structured_regex(value, span)))
    else:
        _options(rw.d.options, value, span)
        rw.replace(start, end, "")
    return end


def _json_end(text: str, i: int, span: Span) -> int:
    depth, j = 0, i
    while j < len(text):
        c = text[j]
        if c == '"':
            j = skip_quoted(text, j, '"')
            continue
        depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(c, 0)
        j += 1
        if depth == 0:
            return j
    raise GrammarSyntaxError("unterminated JSON object after %json/%regex/%llguidance", span)


def _lark_block_end(text: str, i: int, span: Span) -> int:
    depth, j = 0, i
    while j < len(text):
        c = text[j]
        if c == '"' or (c == "/" and not text.startswith("//", j)):
            j = skip_quoted(text, j, c)
            continue
        if c == "#" or c == "/":
            nl = text.find("\n", j)
            j = len(text) if nl < 0 else nl
            continue
        depth += {"{": 1, "}": -1}.get(c, 0)
        j += 1
        if depth == 0:
            return j
    raise GrammarSyntaxError("unterminated %lark { ... } block", span)


def structured_regex(value: Any, span: Span) -> Expr:
    """The language of ``%regex {"substring_chunks": [...]}`` (or ``substring_words`` /
    ``substring_chars``): every ``"".join(chunks[i:j])``, ``i <= j``."""
    if not isinstance(value, dict) or not value:
        raise GrammarSyntaxError("failed to parse %regex: no fields set on %regex", span)
    unknown = set(value) - {"substring_chunks", "substring_words", "substring_chars"}
    if unknown or len(value) != 1:
        what = f"unknown field {sorted(unknown)[0]!r}" if unknown else "more than one field"
        raise GrammarSyntaxError(f"failed to parse %regex: {what}", span)
    (key, arg), = value.items()
    if key == "substring_chunks":
        if not isinstance(arg, list) or not all(isinstance(s, str) for s in arg):
            raise GrammarSyntaxError("failed to parse %regex: substring_chunks is a list of strings", span)
        chunks = list(arg)
    elif not isinstance(arg, str):
        raise GrammarSyntaxError(f"failed to parse %regex: {key} is a string", span)
    elif key == "substring_words":
        chunks = re.findall(r"\w+|\s+|[^\w\s]+", arg)
    else:
        chunks = list(arg)
    # prefixes[i]: the concatenations of chunks[i:j] for j >= i (shared, so linear in size)
    prefixes: list[Expr] = []
    tail: Expr | None = None
    for chunk in reversed(chunks):
        tail = optional(seq(text(chunk), tail)) if tail is not None else optional(text(chunk))
        prefixes.append(tail)
    return alt(*prefixes) if prefixes else optional(text(""))


def _options(options: dict[str, Any], value: Any, span: Span) -> None:
    if not isinstance(value, dict):
        raise GrammarSyntaxError("failed to parse %llguidance declaration: not a JSON object", span)
    for key, v in value.items():
        if key not in LLGUIDANCE_OPTIONS:
            raise UnsupportedFeatureError(
                f"%llguidance option {key!r}", span,
                f"unknown %llguidance option {key!r} (gramc knows {', '.join(LLGUIDANCE_OPTIONS)})")
        allowed, meaning = LLGUIDANCE_OPTIONS[key]
        if not any(v == a and type(v) is type(a) for a in allowed):
            expected = type(allowed[0]).__name__
            if not isinstance(v, type(allowed[0])):
                raise GrammarSyntaxError(
                    f"failed to parse %llguidance declaration: {key} must be a {expected}", span)
            raise UnsupportedFeatureError(f"%llguidance option {key}={json.dumps(v)}", span, meaning)
        options[key] = v


# ---------------------------------------------------------------- parametric rules


def _condition(rw: _Rewriter, i: int) -> int:
    """``%if cond`` at ``i`` becomes a placeholder ending its alternative (before its
    ``-> alias``, where lark expects the alias)."""
    source = rw.d.source
    cond, end = parse_cond(source, i + 3, rw.d.source_name)
    name = rw.fresh()
    rw.d.conds[name] = cond
    rw.d.names[name] = source[i:end].strip()
    alias = _ALIAS_BEFORE.search(source, max(rw.last, source.rfind("\n", 0, i) + 1), i)
    if alias:
        rw.replace(alias.start(), end, f"{name} {alias.group()}")
    else:
        rw.replace(i, end, name)
    return end


def _param_ref(rw: _Rewriter, m: re.Match) -> int:
    """``name::expr`` becomes a placeholder for the instance of ``name`` it selects."""
    expr, end = parse_param_expr(rw.d.source, m.end(), rw.d.source_name)
    name = rw.fresh()
    rw.d.param_refs[name] = (m.group(1), expr)
    rw.d.names[name] = rw.d.source[m.start() : end]
    rw.replace(m.start(), end, name)
    return end


# ---------------------------------------------------------------- rule attributes


_ATTR_TOKEN = re.compile(r'\s*(?:([A-Za-z_]\w*)|(=)|(,)|(\])|("(?:\\.|[^"\\\n])*"i?)|'
                         r"(/(?:\\.|[^/\\\n])*/[imslux]*)|(-?[0-9.]+))")


def _attributes(rw: _Rewriter, head: re.Match) -> int:
    """Parse ``[a, b=v, ...]`` after a rule name; returns the offset after ``]``."""
    source, i = rw.d.source, head.end() + 1
    name = head.group(1)
    attrs = Attributes(rw.span(head.start(1)))
    items: list[tuple[str, str | None, int]] = []
    while True:
        m = _ATTR_TOKEN.match(source, i)
        if not m or not m.group(1):
            raise GrammarSyntaxError("expected an attribute name in [...]", rw.span(i))
        key, at, i = m.group(1), m.start(1), m.end()
        value = None
        m = _ATTR_TOKEN.match(source, i)
        if m and m.group(2):
            m = _ATTR_TOKEN.match(source, m.end())
            if not m or m.group(2) or m.group(3) or m.group(4):
                raise GrammarSyntaxError(f"expected a value after {key}=", rw.span(i))
            value, i = m.group(m.lastindex or 0), m.end()
            m = _ATTR_TOKEN.match(source, i)
        items.append((key, value, at))
        if not m or not (m.group(3) or m.group(4)):
            raise GrammarSyntaxError("expected ',' or ']' in the attribute list", rw.span(i))
        i = m.end()
        if m.group(4):
            break
    for key, value, at in items:
        _attribute(rw, attrs, key, value, rw.span(at))
    rw.d.attributes[name] = attrs
    rw.replace(head.end(), i, "")
    return i


def _attribute(rw: _Rewriter, attrs: Attributes, key: str, value: str | None, span: Span) -> None:
    if key not in _KNOWN_ATTRIBUTES:
        raise GrammarSyntaxError(f"Unknown attribute: {key}", span)
    if key == "lazy" and value is None:
        attrs.lazy = True
    elif key in ("capture", "stop_capture"):
        if value is not None and not value.startswith('"'):
            raise GrammarSyntaxError(f"{key}= takes a string", span)
        name = json.loads(value) if value else ""  # "": the rule's own name
        if key == "capture":
            attrs.capture = name
        else:
            attrs.stop_capture = name
    elif key in ("stop", "suffix"):
        if value is None or not (value[0] in '"/' or value[0].isupper()):
            raise GrammarSyntaxError(f"{key}= takes a string, a regex or a terminal name", span)
        if value in ('""', '""i'):
            if key == "suffix":
                return  # an empty suffix: the rule is not made lazy
            attrs.stop_is_empty = True
            return
        helper = rw.fresh(upper=True)
        rw.helpers.append(f"{helper}: {value}")
        setattr(attrs, key, helper)
    elif key in ("max_tokens", "temperature"):
        if value is None or not re.fullmatch(r"-?[0-9]+(\.[0-9]*)?", value) or (
                key == "max_tokens" and not value.isdigit()):
            raise GrammarSyntaxError(f"Expected token: {key}= takes a number", span)
        attrs.unsupported.append(key)
    else:
        raise GrammarSyntaxError(f"invalid attribute {key}{'=' + value if value else ''}", span)


# ---------------------------------------------------------------- & and ~ in terminals

_OP_TOKEN = re.compile(
    r'[ \t]*(?:("(?:\\.|[^"\\\n])*"i?(?:\s*\.\.\s*"(?:\\.|[^"\\\n])*")?)|(/(?!/)(?:\\.|[^/\\\n])*/[imslux]*)'
    r"|([A-Za-z_]\w*)|(~\s*[0-9]+(?:\s*\.\.\s*[0-9]+)?)|([()\[\]|&~*+?])|(\{[^}\n]*\}))")
_LINE_END = re.compile(r"[ \t]*(?:(?://|#)[^\n]*)?(?:\n|$)")
_CONTINUED = re.compile(r"\s*\|")


def _term_with_ops(rw: _Rewriter, head: re.Match) -> int | None:
    """When the terminal defined at ``head`` uses ``&`` or prefix ``~``: rewrite it (its
    operands become helper terminals, its body a marker) and return the offset after it."""
    source, i = rw.d.source, head.end()
    toks: list[tuple[str, int, int]] = []  # (text, start, end)
    while True:
        m = _OP_TOKEN.match(source, i)
        if m:
            toks.append((m.group().strip(), m.start(m.lastindex or 0), m.end()))
            i = m.end()
            continue
        nl = _LINE_END.match(source, i)
        if nl and nl.end() > i and _CONTINUED.match(source, nl.end()):
            i = nl.end()
            continue
        break
    if not any(t[0] == "&" or (t[0] == "~") for t in toks):
        return None
    parser = _OpParser(rw, toks)
    op = parser.parse()
    rw.replace(head.end(), toks[-1][2], " " + rw.marker(op))
    return toks[-1][2]


class _OpParser:
    """``alt := conj ('|' conj)*``, ``conj := seq ('&' seq)*``, ``seq := item+``,
    ``item := unary postfix*``, ``unary := '~' unary | atom``: operands without ``&``/``~`` become helpers."""

    def __init__(self, rw: _Rewriter, toks: list[tuple[str, int, int]]):
        self.rw, self.toks, self.k = rw, toks, 0

    def peek(self) -> str:
        return self.toks[self.k][0] if self.k < len(self.toks) else ""

    def error(self, reason: str) -> GrammarSyntaxError:
        at = self.toks[min(self.k, len(self.toks) - 1)][1]
        return GrammarSyntaxError(reason, self.rw.span(at))

    def parse(self) -> Op:
        op = self.alt()
        if self.k < len(self.toks):
            raise self.error(f"unexpected {self.peek()!r} in a terminal with & or ~")
        return op

    def alt(self) -> Op:
        items = [self.conj()]
        while self.peek() == "|":
            self.k += 1
            items.append(self.conj())
        return items[0] if len(items) == 1 else Op("alt", tuple(items))

    def conj(self) -> Op:
        items = [self.seq()]
        while self.peek() == "&":
            self.k += 1
            items.append(self.seq())
        return items[0] if len(items) == 1 else Op("and", tuple(items))

    def seq(self) -> Op:
        items = []
        while self.peek() not in ("", "|", "&", ")", "]"):
            items.append(self.item())
        if not items:
            raise self.error("empty operand in a terminal with & or ~")
        return items[0] if len(items) == 1 else Op("seq", tuple(items))

    def item(self) -> Op:
        op = self.unary()
        while self.peek() in ("*", "+", "?") or re.match(r"~\s*[0-9]|\{", self.peek()):
            lo, hi = self.bounds(self.peek())
            self.k += 1
            op = Op("rep", (op, lo, hi))
        return op

    def unary(self) -> Op:
        if self.peek() == "~":  # binds tighter than a postfix operator: ~A+ is (~A)+
            self.k += 1
            return Op("not", (self.unary(),))
        return self.atom()

    def bounds(self, t: str) -> tuple[int, int | None]:
        if t in ("*", "+", "?"):
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[t]
        if t.startswith("{"):
            m = _COUNT.fullmatch(t)
            if not m:
                raise self.error(f"bad repetition {t}")
            t = _count(m, self.rw.span(self.toks[self.k][1]))
        nums = [int(x) for x in re.findall(r"[0-9]+", t)]
        hi = nums[-1]
        if hi < nums[0]:
            raise self.error(f"bad repetition range {t}: range end must be >= start")
        return nums[0], None if hi == UNBOUNDED else hi

    def atom(self) -> Op:
        t = self.peek()
        if t in ("(", "["):
            self.k += 1
            inner = self.alt()
            close = ")" if t == "(" else "]"
            if self.peek() != close:
                raise self.error(f"missing {close}")
            self.k += 1
            return inner if t == "(" else Op("rep", (inner, 0, 1))
        if not t or t in ("|", "&", ")", "]", "*", "+", "?"):
            raise self.error(f"unexpected {t or 'end of definition'!r}")
        self.k += 1
        helper = self.rw.fresh(upper=True)
        self.rw.helpers.append(f"{helper}: {t}")
        return Op("term", (helper,))
