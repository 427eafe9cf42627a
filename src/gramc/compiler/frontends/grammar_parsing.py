"""Tokens -> rules: the rule and expression parser shared by the GBNF and EBNF frontends.

Each notation is a :class:`Notation`: its defining symbol (``::=`` or ``=``), its comment
syntaxes, and a table from first characters to token handlers (built from the helpers of
:mod:`~gramc.compiler.frontends.grammar_lexing`). :func:`tokenize` turns the text into
:class:`~gramc.compiler.frontends.grammar_lexing.Tok` tokens and :class:`RuleParser` turns
the tokens into IR rules. The token kinds are::

    name define atom ( ) [ ] { } | , - * + ? bounds int end eof

A rule is ``name define body``; without terminators (GBNF, W3C) it runs until the next
``name define`` pair, so rules may span lines freely. Operators, tightest first: postfix
``* + ? {m,n}`` (and the ISO prefix ``n *``), then the exception ``A - B``, then
concatenation (juxtaposition, or ISO ``,``), then ``|``. Groups are kept on an explicit
stack, so nesting is bounded by ``max_nesting``, never by Python's recursion limit.
"""

from __future__ import annotations

import re

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gramc.compiler.frontends.grammar_lexing import Comment, Scanner, Tok
from gramc.compiler.ir import Expr, Ref, alt, optional, repeat, seq

#: A token handler: called with the scanner on the token's first character; returns the
#: token, or None when it skipped something that is not a token (an annotation).
Handler = Callable[[Scanner], "Tok | None"]
#: Builds the IR of ``lhs - rhs`` (the exception at ``offset``).
Difference = Callable[[Expr, Expr, int], Expr]


@dataclass(frozen=True)
class Notation:
    """How one notation is tokenised and parsed.

    Attributes:
        name: the notation's name, for messages.
        define: the defining symbol (``"::="`` or ``"="``).
        handlers: first character -> token handler.
        name_token: the handler tried when no entry of ``handlers`` applies (rule names);
            it returns None when the text there is not a name.
        comments: the comment syntaxes, skipped with whitespace.
        terminated: rules end with an ``end`` token (ISO 14977 ``;`` or ``.``).
        postfix: ``* + ? {m,n}`` follow an item (everything but ISO 14977).
    """

    name: str
    define: str
    handlers: Mapping[str, Handler]
    name_token: Handler
    comments: tuple[Comment, ...] = ()
    terminated: bool = False
    postfix: bool = True


def tokenize(sc: Scanner, notation: Notation) -> list[Tok]:
    """Every token of ``sc.text``, ending with an ``eof`` token."""
    toks: list[Tok] = []
    while True:
        sc.skip_space(notation.comments)
        if sc.at_end():
            toks.append(Tok("eof", sc.pos))
            return toks
        if sc.startswith(notation.define):
            toks.append(sc.punct("define", len(notation.define)))
            continue
        tok = _next_token(sc, notation)
        if tok is not None:
            toks.append(tok)


def _next_token(sc: Scanner, notation: Notation) -> Tok | None:
    start = sc.pos
    handler = notation.handlers.get(sc.peek())
    if handler is not None:
        tok = handler(sc)
        if sc.pos == start:  # a handler must consume something
            raise sc.error(f"unexpected character {sc.peek()!r}", start)
        return tok
    tok = notation.name_token(sc)
    if tok is None:
        raise sc.error(f"unexpected character {sc.peek()!r}", start)
    return tok


def punct(kind: str, width: int = 1) -> Handler:
    """A handler for a fixed punctuation token."""
    return lambda sc: sc.punct(kind, width)


# ---------------------------------------------------------------- rules


@dataclass
class ParsedRules:
    """The parser's output: rule bodies in definition order, where each rule name was
    defined, and every rule reference (name, offset) in text order."""

    rules: dict[str, Expr] = field(default_factory=dict)
    defined_at: dict[str, int] = field(default_factory=dict)
    refs: list[tuple[str, int]] = field(default_factory=list)


class _Frame:
    """A group being parsed: finished alternatives plus the sequence in progress."""

    __slots__ = ("alts", "comma", "count", "items", "minus", "offset", "opener")

    def __init__(self, opener: str, offset: int):
        self.opener = opener  # "rule", "(", "[" or "{"
        self.offset = offset
        self.alts: list[Expr] = []
        self.items: list[Expr] = []
        self.minus: list[tuple[int, int]] = []  # (index of the left operand, offset of '-')
        self.count: tuple[int, int] | None = None  # pending ISO "n *": (n, offset)
        self.comma: int | None = None  # offset of a ',' still waiting for its right item

    def rhs_pending(self) -> bool:
        return bool(self.minus) and self.minus[-1][0] == len(self.items) - 1


_CLOSERS = {")": "(", "]": "[", "}": "{"}
_OPENERS = {v: k for k, v in _CLOSERS.items()}


class RuleParser:
    """Parses a token list into :class:`ParsedRules` (see the module docstring)."""

    def __init__(self, sc: Scanner, toks: list[Tok], notation: Notation,
                 difference: Difference | None = None):
        self.sc = sc
        self.toks = toks
        self.notation = notation
        self.difference = difference
        self.i = 0
        self.out = ParsedRules()

    def parse(self) -> ParsedRules:
        while self.toks[self.i].kind != "eof":
            self._rule()
        return self.out

    # ------------------------------------------------------------ rule level

    def _rule(self) -> None:
        tok = self.toks[self.i]
        if tok.kind != "name" or self.toks[self.i + 1].kind != "define":
            raise self._expected_rule(tok)
        name = str(tok.value)
        if name in self.out.defined_at:
            first = self.sc.span(self.out.defined_at[name])
            raise self.sc.error(
                f"rule {name!r} is defined twice (first at line {first.line}, column {first.col})",
                tok.offset)
        self.i += 2
        self.out.defined_at[name] = tok.offset
        self.out.rules[name] = self._body(name)

    def _expected_rule(self, tok: Tok) -> Exception:
        define = self.notation.define
        if tok.kind == "name":
            nxt = self.toks[self.i + 1]
            return self.sc.error(f"expected '{define}' after the rule name {tok.value!r}", nxt.offset)
        if tok.kind == "define":
            return self.sc.error(f"'{define}' must follow a rule name", tok.offset)
        if tok.kind == "end":
            return self.sc.error("a rule terminator without a rule", tok.offset)
        return self.sc.error(f"expected a rule 'name {define} ...', found {_describe(tok)}", tok.offset)

    def _body(self, name: str) -> Expr:
        stack = [_Frame("rule", self.toks[self.i - 1].offset)]
        while not self._at_rule_end(self.toks[self.i]):
            self._step(stack, self.toks[self.i])
        if len(stack) > 1:
            top = stack[-1]
            raise self.sc.error(f"unclosed {top.opener!r} in rule {name!r}", top.offset)
        if self.notation.terminated:
            self._terminator(name)
        return self._finish(stack[0])

    def _at_rule_end(self, tok: Tok) -> bool:
        if tok.kind in ("eof", "end"):
            return True
        return tok.kind == "name" and self.toks[self.i + 1].kind == "define"

    def _terminator(self, name: str) -> None:
        tok = self.toks[self.i]
        if tok.kind != "end":
            where = "the end of the input" if tok.kind == "eof" else "the next rule"
            raise self.sc.error(f"rule {name!r} needs a ';' (or '.') before {where}", tok.offset)
        self.i += 1

    # ------------------------------------------------------------ expressions

    def _step(self, stack: list[_Frame], tok: Tok) -> None:
        kind = tok.kind
        self.i += 1
        if kind == "atom":
            self._push(stack[-1], tok.value)
        elif kind == "name":
            self.out.refs.append((str(tok.value), tok.offset))
            self._push(stack[-1], Ref(str(tok.value)))
        elif kind in _OPENERS:
            stack.append(_Frame(kind, tok.offset))
            self.sc.limits.check("max_nesting", len(stack) - 1, "nested group", self.sc.span(tok.offset))
        elif kind in _CLOSERS:
            self._close(stack, tok)
        elif kind == "|":
            frame = stack[-1]
            frame.alts.append(self._end_sequence(frame))
        else:
            self._operator(stack[-1], tok)

    def _operator(self, frame: _Frame, tok: Tok) -> None:
        kind = tok.kind
        if kind == ",":
            self._comma(frame, tok)
        elif kind == "-":
            self._minus(frame, tok)
        elif kind == "int":
            self._count(frame, tok)
        elif kind in ("*", "+", "?", "bounds") and self.notation.postfix:
            self._postfix(frame, tok)
        elif kind == "*":
            raise self.sc.error("'*' must follow a repetition count (as in 3 * item)", tok.offset)
        elif kind == "define":
            raise self.sc.error(f"'{self.notation.define}' must follow a rule name", tok.offset)
        else:
            raise self.sc.error(f"unexpected {_describe(tok)}", tok.offset)

    def _push(self, frame: _Frame, expr: Expr) -> None:
        if frame.count is not None:
            expr = repeat(expr, frame.count[0], frame.count[0])
            frame.count = None
        frame.items.append(expr)
        frame.comma = None

    def _close(self, stack: list[_Frame], tok: Tok) -> None:
        top = stack[-1]
        if top.opener == "rule":
            raise self.sc.error(f"unbalanced {tok.kind!r}: no group is open", tok.offset)
        if _CLOSERS[tok.kind] != top.opener:
            at = self.sc.span(top.offset)
            raise self.sc.error(
                f"expected {_OPENERS[top.opener]!r} to close {top.opener!r} from line {at.line}, "
                f"column {at.col}, found {tok.kind!r}", tok.offset)
        stack.pop()
        body = self._finish(top)
        if top.opener == "[":
            body = optional(body)
        elif top.opener == "{":
            body = repeat(body, 0, None)
        self._push(stack[-1], body)

    def _postfix(self, frame: _Frame, tok: Tok) -> None:
        if not frame.items or frame.rhs_pending() or frame.count is not None or frame.comma is not None:
            raise self.sc.error(f"{_describe(tok)} has nothing to repeat", tok.offset)
        lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(tok.kind) or tok.value
        frame.items[-1] = repeat(frame.items[-1], lo, hi)

    def _comma(self, frame: _Frame, tok: Tok) -> None:
        if not frame.items or frame.comma is not None or frame.rhs_pending() or frame.count is not None:
            raise self.sc.error("',' needs an item on its left", tok.offset)
        frame.comma = tok.offset

    def _minus(self, frame: _Frame, tok: Tok) -> None:
        if not frame.items or frame.rhs_pending() or frame.count is not None or frame.comma is not None:
            raise self.sc.error("'-' needs an item on its left", tok.offset)
        frame.minus.append((len(frame.items) - 1, tok.offset))

    def _count(self, frame: _Frame, tok: Tok) -> None:
        if self.toks[self.i].kind != "*":
            raise self.sc.error("expected '*' after the repetition count", self.toks[self.i].offset)
        if frame.count is not None:
            raise self.sc.error("a repetition count must be followed by an item", tok.offset)
        self.i += 1
        frame.count = (int(tok.value), tok.offset)

    def _finish(self, frame: _Frame) -> Expr:
        return alt(*frame.alts, self._end_sequence(frame))

    def _end_sequence(self, frame: _Frame) -> Expr:
        if frame.comma is not None:
            raise self.sc.error("',' needs an item on its right", frame.comma)
        if frame.count is not None:
            raise self.sc.error("a repetition count must be followed by an item", frame.count[1])
        if frame.rhs_pending():
            raise self.sc.error("'-' needs an item on its right", frame.minus[-1][1])
        items = self._fold_differences(frame)
        frame.items, frame.minus = [], []
        return seq(*items)

    def _fold_differences(self, frame: _Frame) -> list[Expr]:
        if not frame.minus:
            return frame.items
        assert self.difference is not None, "a notation with '-' needs a difference builder"
        after = dict(frame.minus)  # index of a left operand -> offset of its '-'
        out: list[Expr] = []
        for k, item in enumerate(frame.items):
            if k - 1 in after:
                out[-1] = self.difference(out[-1], item, after[k - 1])
            else:
                out.append(item)
        return out


def _describe(tok: Tok) -> str:
    if tok.kind == "name":
        return f"name {tok.value!r}"
    if tok.kind in ("atom", "bounds", "int", "eof", "end"):
        return {"atom": "a terminal", "bounds": "repetition bounds", "int": "a number",
                "eof": "the end of the input", "end": "a rule terminator"}[tok.kind]
    return f"{tok.kind!r}"


def check_references(sc: Scanner, parsed: ParsedRules, known: frozenset[str] = frozenset()) -> None:
    """Raise a syntax error at the first reference to a rule that is not defined (saying so
    when a line starts with its name, as a definition whose defining symbol is missing
    would: the rule before it then runs on over that line)."""
    for name, offset in parsed.refs:
        if name not in parsed.rules and name not in known:
            starts = re.search(rf"^[ \t]*{re.escape(name)}(?![\w-])", sc.text, re.MULTILINE)
            hint = ""
            if starts is not None:
                line = sc.text.count("\n", 0, starts.start()) + 1
                hint = f" (line {line} starts with {name!r} but defines nothing: is its defining symbol missing?)"
            raise sc.error(f"undefined rule {name!r}{hint}", offset)

