r"""Lark terminal definitions to IR.

A terminal is lowered to the set of strings it matches *as a whole* (its "fullmatch"
language), with two refinements that make lark's usual idioms mean what they mean in Lark:

Lookarounds. A lookaround whose body is one ASCII character or class, at the top level of a
regex literal (possibly inside unquantified groups), is honoured exactly, also across the
literal's edges: the ``(?<!\\)`` that starts ``/(?<!\\)(\\\\)*?/`` looks back into the literal
before it, as it does in lark's joined terminal regex. Where a lookaround looks past the whole
terminal, a negative one holds (the token ends there) and a positive one is refused; where it
looks out of a quantified group, a negative one is dropped (a superset) and a positive one is
refused. Other lookarounds are refused.

Lazy quantifiers. Python stops ``X*?`` (and ``+? ?? {m,n}?``) at the first point where the
rest of the pattern matches, so lark's lexer never produces ``"a"b"`` from ``/".*?"/``. gramc
reproduces this when ``X`` is a prefix code (``.``, ``[^"]``, ``(\\\\)``: the loop's steps
cannot overlap) and the pieces after the lazy atom, in the same terminal, have a fixed length
in characters or may be empty: the span from the lazy atom through the last such
non-optional piece (through the first run of fixed-length pieces when only optional pieces
follow) is replaced by its shortest matches, the strings of which no proper prefix matches.
A lazy atom that ends its terminal matches as little as it can (``/a+?/`` is ``a``). In other
cases the quantifier is treated as greedy, a superset of what lark's lexer produces. So
``"\"" /.*?/ /(?<!\\)(\\\\)*?/ "\""`` (lark's ESCAPED_STRING) is exactly the C-style string
that ends at the first unescaped quote.

>>> from lark import Token
>>> print(string_literal(Token("STRING", '"Ab-1"i')))
[Aa] [Bb] "-1"
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from lark import Token as LarkToken
from lark import Tree
from lark.exceptions import GrammarError
from lark.lexer import PatternStr

from gramc.compiler.frontends import lark_regex as rx
from gramc.compiler.frontends.lark_dialect import UNBOUNDED
from gramc.compiler.frontends.regex import parse_regex
from gramc.compiler.ir import (
    ALL_BYTES,
    EMPTY,
    NOTHING,
    Alt,
    Bytes,
    Expr,
    Grammar,
    Repeat,
    Seq,
    alt,
    byte_class,
    optional,
    repeat,
    seq,
    text,
)
from gramc.compiler.unicode import CodepointSet
from gramc.errors import (
    GramcWarning,
    GrammarSyntaxError,
    LimitExceededError,
    Span,
    UnsupportedFeatureError,
)
from gramc.limits import Limits

MAX_SHORTEST_STATES = 512  # DFA size above which a lazy quantifier is left greedy
_SourceError = GrammarSyntaxError | UnsupportedFeatureError
_SOURCE_ERRORS = (GrammarSyntaxError, UnsupportedFeatureError)
SpanOf = Callable[[Any], "Span | None"]
_T = TypeVar("_T")


# ---------------------------------------------------------------- IR helpers


def nullable(e: Expr) -> bool:
    """True when ``e`` matches the empty string (terminal IR: no rule references)."""
    if e is EMPTY:
        return True
    if isinstance(e, Seq):
        return all(nullable(i) for i in e.items)
    if isinstance(e, Alt):
        return any(nullable(i) for i in e.items)
    if isinstance(e, Repeat):
        return e.min == 0 or nullable(e.item)
    return False


def restrict_edge(e: Expr, allowed: int, first: bool) -> Expr:
    """The non-empty strings of ``e`` whose first (``first``) or last byte is in ``allowed``.

    >>> print(restrict_edge(seq(optional(text("a")), text("b")), 1 << ord("b"), first=True))
    "b"
    """
    if isinstance(e, Bytes):
        return Bytes(e.mask & allowed) if e.mask & allowed else NOTHING
    if isinstance(e, Alt):
        return alt(*(restrict_edge(i, allowed, first) for i in e.items))
    if isinstance(e, Seq):
        return _restrict_seq(list(e.items), allowed, first)
    if isinstance(e, Repeat):
        lo = 0 if nullable(e.item) else max(e.min - 1, 0)
        rest = repeat(e.item, lo, None if e.max is None else e.max - 1)
        head = restrict_edge(e.item, allowed, first)
        return seq(head, rest) if first else seq(rest, head)
    return NOTHING  # EMPTY, NOTHING


def _restrict_seq(items: list[Expr], allowed: int, first: bool) -> Expr:
    order = range(len(items)) if first else range(len(items) - 1, -1, -1)
    out: list[Expr] = []
    for k in order:
        head = restrict_edge(items[k], allowed, first)
        out.append(seq(head, *items[k + 1 :]) if first else seq(*items[:k], head))
        if not nullable(items[k]):
            break
    return alt(*out)


def _dfa(e: Expr):
    from gramc.compiler.dfa import build_dfa  # the automata stack, only when needed

    return build_dfa(Grammar.single(e))


def is_prefix_free(e: Expr) -> bool:
    """True when no string of ``e`` is a proper prefix of another (a prefix code)."""
    d = _dfa(e)
    return not d.delta[d.accept].any()


def shortest_matches(e: Expr, max_states: int = MAX_SHORTEST_STATES) -> Expr | None:
    """The strings of ``e`` none of whose proper prefixes is in ``e`` (None: its DFA has
    more than ``max_states`` states).

    >>> print(shortest_matches(seq(text("/"), repeat(byte_class(b"ab/"), 0, None), text("/"))))
    "/" [ab]* "/"
    """
    d = _dfa(e)
    if d.start == 0 or d.n_states > max_states:
        return NOTHING if d.start == 0 else None
    masks = [0] * d.n_byte_classes
    for b in range(256):
        masks[int(d.byte_class[b])] |= 1 << b
    out: dict[int, dict[int, int]] = defaultdict(dict)
    for p in range(1, d.n_states):
        if not d.accept[p]:  # leaving an accepting state would extend a match
            for c, q in enumerate(d.delta[p, : d.n_byte_classes].tolist()):
                if q:
                    out[p][q] = out[p].get(q, 0) | masks[c]
    finals = [s for s in range(d.n_states) if d.accept[s]]
    edges: dict[int, dict[int, Expr]] = {p: {q: Bytes(m) for q, m in qs.items()} for p, qs in out.items()}
    return _eliminate(edges, d.start, finals)


def _eliminate(out: dict[int, dict[int, Expr]], start: int, finals: list[int]) -> Expr:
    """State elimination: the expression of the paths from ``start`` to any final state."""
    src, dst = -1, -2
    out = defaultdict(dict, {p: dict(qs) for p, qs in out.items()})
    out[src][start] = EMPTY
    for f in finals:
        out[f][dst] = EMPTY
    inn: dict[int, dict[int, Expr]] = defaultdict(dict)
    for p, qs in list(out.items()):
        for q, e in qs.items():
            inn[q][p] = e
    nodes = set(out) | set(inn)
    nodes -= {src, dst}
    while nodes:
        r = min(nodes, key=lambda n: (len(inn[n]) * len(out[n]), n))
        nodes.remove(r)
        _bypass(out, inn, r)
    return out[src].get(dst, NOTHING)


def _bypass(out: dict, inn: dict, r: int) -> None:
    loop = out[r].pop(r, None)
    inn[r].pop(r, None)
    star = EMPTY if loop is None else repeat(loop, 0, None)
    preds, succs = inn.pop(r), out.pop(r)
    for q in succs:
        inn[q].pop(r, None)
    for p, e_in in preds.items():
        out[p].pop(r, None)
        for q, e_out in succs.items():
            new = alt(out[p].get(q, NOTHING), seq(e_in, star, e_out))
            out[p][q] = inn[q][p] = new


# ---------------------------------------------------------------- literals


def string_literal(token: LarkToken) -> Expr:
    """A ``"..."`` or ``"..."i`` literal (lark's escapes; ``""`` is the empty string)."""
    raw = str(token)
    if raw in ('""', '""i'):
        return EMPTY
    pattern = _lark_pattern(token)
    return _cased(pattern.value) if "i" in pattern.flags else text(pattern.value)


def _cased(s: str) -> Expr:
    parts = []
    for ch in s:
        if ch.isascii() and ch.isalpha():
            parts.append(byte_class(ch.upper().encode() + ch.lower().encode()))
        else:
            parts.append(text(ch))
    return seq(*parts)


def _lark_reason(e: GrammarError, token: LarkToken) -> str:
    if len(e.args) == 2 and isinstance(e.args[1], SyntaxError):
        return f"invalid escape in {token}"  # lark's literal_eval of the escapes failed
    return str(e).splitlines()[0]


def _lark_pattern(token: LarkToken):
    from lark.load_grammar import _literal_to_pattern

    return _literal_to_pattern(token)


def char_range(lo_tok: LarkToken, hi_tok: LarkToken) -> Expr:
    """A ``"a".."z"`` range of code points."""
    from lark.load_grammar import eval_escaping

    ends = []
    for tok in (lo_tok, hi_tok):
        raw = str(tok)
        value = eval_escaping(raw[1:-1]) if raw.endswith('"') else ""
        if len(value) != 1:
            raise GrammarSyntaxError(f"range ends must be single characters, not {raw}")
        ends.append(ord(value))
    if ends[0] > ends[1]:
        raise GrammarSyntaxError(f"bad range {lo_tok}..{hi_tok}: start after end")
    return CodepointSet([(ends[0], ends[1])]).to_ir()


# ---------------------------------------------------------------- items


@dataclass(frozen=True)
class Piece:
    """A piece of a terminal; ``lazy``: it ends with a lazy quantifier not yet closed."""

    expr: Expr
    lazy: bool = False


@dataclass(frozen=True)
class Look:
    """A lookaround between pieces: the next (``ahead``) or previous byte must (not) be in
    ``mask``."""

    ahead: bool
    negative: bool
    mask: int
    span: Span | None


@dataclass(frozen=True)
class Choice:
    """Alternatives that hold lookarounds: kept apart until the lookarounds can see the
    pieces around the choice (the enclosing sequence is then split per alternative)."""

    alts: tuple[tuple[Item, ...], ...]


Item = Piece | Look | Choice
MAX_CHOICE_SPLIT = 64  # sequences a choice with lookarounds may be split into


def repeat_bounds(args: list, span_of: SpanOf, max_repeat: int) -> tuple[int, int | None]:
    """The bounds of an ``expr`` node's operator: ``? * +`` or ``~ n`` / ``~ n..m``."""
    op = str(args[0])
    if op in ("?", "*", "+"):
        return {"?": (0, 1), "*": (0, None), "+": (1, None)}[op]
    lo = int(args[1])
    hi = int(args[2]) if len(args) > 2 else lo
    if lo < 0 or hi < lo:
        raise GrammarSyntaxError(f"bad repetition range ~{lo}..{hi}", span_of(args[1]))
    if hi == UNBOUNDED:  # llguidance's x{m,}, written ~m..UNBOUNDED for lark's loader
        if lo > max_repeat:
            raise LimitExceededError("max_repeat", lo, max_repeat, "repetition", span_of(args[1]))
        return lo, None
    if hi > max_repeat:
        raise LimitExceededError("max_repeat", hi, max_repeat, "repetition", span_of(args[1]))
    return lo, hi


_OPEN, _GREEDY = object(), object()


def _region_end(items: list, i: int, top: bool) -> Any:
    """Where the shortest-match span of the lazy piece ``items[i]`` ends (an index), or
    _OPEN (the enclosing sequence decides) or _GREEDY (treat the quantifier as greedy).

    Python stops a lazy loop at the first point where the rest of the pattern matches. When
    only optional pieces follow the closing run of fixed-length pieces, that is where the
    closing run first matches; when more fixed-length pieces follow, the span runs to the
    last of them; a variable-length piece that cannot be empty makes the stopping point
    depend on backtracking, and the quantifier is then treated as greedy (a superset)."""
    must = [j for j in range(i + 1, len(items)) if not nullable(items[j].expr)]
    if not must:
        return len(items) - 1 if top else _OPEN
    if any(char_length(items[j].expr) is None for j in must):
        return _GREEDY
    end = must[0]
    while end + 1 < len(items) and not nullable(items[end + 1].expr):
        end += 1
    return max(end, must[-1])


_CONTINUATION = ((1 << 0xC0) - 1) ^ ((1 << 0x80) - 1)


def char_length(e: Expr) -> int | None:
    """The number of characters of every string of ``e`` (UTF-8), or None if it varies."""
    if isinstance(e, Bytes):
        if not e.mask & ~_CONTINUATION:
            return 0
        return 1 if not e.mask & _CONTINUATION else None
    if e is EMPTY:
        return 0
    if isinstance(e, Seq):
        lengths = [char_length(i) for i in e.items]
        known = [n for n in lengths if n is not None]
        return sum(known) if len(known) == len(lengths) else None
    if isinstance(e, Alt):
        distinct = {char_length(i) for i in e.items}
        return distinct.pop() if len(distinct) == 1 else None
    if isinstance(e, Repeat) and e.min == e.max:
        inner = char_length(e.item)
        return None if inner is None else inner * e.min
    return None


def _count_paths(items: tuple | list) -> int:
    n = 1
    for x in items:
        if isinstance(x, Choice):
            n *= sum(_count_paths(a) for a in x.alts)
    return n


def _has_lazy(items: tuple | list) -> bool:
    return any(
        (isinstance(x, Piece) and x.lazy) or (isinstance(x, Choice) and any(map(_has_lazy, x.alts)))
        for x in items
    )


class TerminalLowerer:
    """Lower lark terminal trees (after lark inlined the terminals they reference).

    ``span_of(token)`` gives the span of a lark token in the grammar text (or the best
    stand-in); ``name`` is the terminal being lowered, for messages.
    """

    def __init__(self, span_of: SpanOf, limits: Limits, marker: Callable[[str], Expr | None]):
        self.span_of = span_of
        self.limits = limits
        self.marker = marker  # a marker literal's IR, None for other literals (lark_dialect)
        self.name = ""
        self._memo: dict[int, list[Item]] = {}

    def lower(self, name: str, tree: Tree) -> Expr:
        """The IR of terminal ``name`` defined by ``tree``."""
        self.name = name
        return self._checked_empty(self._resolve(self._items(tree), top=True).expr)

    def lower_literal(self, token: LarkToken) -> Expr:
        """An anonymous terminal: a string or regex literal written in a rule."""
        self.name = str(token)
        return self._checked_empty(self._resolve(self._literal(token), top=True).expr)

    def _checked_empty(self, expr: Expr) -> Expr:
        if expr is NOTHING:
            warnings.warn(f"terminal {self.name} matches nothing", GramcWarning, stacklevel=5)
        return expr

    # ------------------------------------------------------------ tree walk

    def _items(self, node: Any) -> list[Item]:
        key = id(node)
        if key not in self._memo:
            self._memo[key] = self._items_uncached(node)
        return self._memo[key]

    def _items_uncached(self, node: Any) -> list[Item]:
        if not isinstance(node, Tree):
            where = f" ({node})" if hasattr(node, "name") else ""
            raise GrammarSyntaxError(
                f"rules are not allowed inside terminals{where}", self.span_of(None)
            )
        handler = getattr(self, f"_node_{node.data}", None)
        if handler is None:
            feature = "aliases (->)" if node.data == "alias" else f"{node.data}"
            raise GrammarSyntaxError(f"{feature} not allowed in terminals", self.span_of(None))
        return handler(node)

    def _node_expansions(self, node: Tree) -> list[Item]:
        return self._choice([self._items(c) for c in node.children])

    def _choice(self, alts: list[list[Item]]) -> list[Item]:
        if len(alts) == 1:
            return alts[0]
        if any(not isinstance(x, Piece) for a in alts for x in a):
            return [Choice(tuple(tuple(a) for a in alts))]
        pieces = [self._resolve(a, top=False) for a in alts]
        return [Piece(alt(*(p.expr for p in pieces)), any(p.lazy for p in pieces))]

    def _node_expansion(self, node: Tree) -> list[Item]:
        return [item for c in node.children for item in self._items(c)]

    def _node_value(self, node: Tree) -> list[Item]:
        child = node.children[0]
        if isinstance(child, Tree) and child.data == "literal":
            return self._literal(cast(LarkToken, child.children[0]))  # lark's loader: its token
        if isinstance(child, Tree) and child.data == "range":
            return [Piece(self._checked(char_range, *cast("list[LarkToken]", child.children)))]
        return self._items(child)

    def _node_expr(self, node: Tree) -> list[Item]:
        inner = self._resolve(self._items(node.children[0]), top=False)
        lo, hi = repeat_bounds(node.children[1:], self.span_of, self.limits.max_repeat)
        return [Piece(repeat(inner.expr, lo, hi), inner.lazy)]

    def _node_maybe(self, node: Tree) -> list[Item]:
        inner = self._resolve(self._items(node.children[0]), top=False)
        return [Piece(optional(inner.expr), inner.lazy)]

    def _checked(self, fn: Callable[..., _T], *tokens: LarkToken) -> _T:
        try:
            return fn(*tokens)
        except GrammarError as e:
            raise GrammarSyntaxError(_lark_reason(e, tokens[0]), self.span_of(tokens[0])) from None
        except GrammarSyntaxError as e:
            raise GrammarSyntaxError(e.reason, e.span or self.span_of(tokens[0])) from None

    # ------------------------------------------------------------ literals

    def _literal(self, token: LarkToken) -> list[Item]:
        if token.type == "STRING" and str(token).startswith('"\\ue000'):
            expr = self.marker(_lark_pattern(token).value)
            if expr is not None:
                return [Piece(expr)]
        if token.type == "STRING":
            return [Piece(self._checked(string_literal, token))]
        pattern = self._checked(_lark_pattern, token)
        if isinstance(pattern, PatternStr):
            return [Piece(text(pattern.value))]
        try:
            return self._regex(pattern.value, pattern.flags, token)
        except _SOURCE_ERRORS as e:
            raise self._regex_error(e, token) from None
        except LimitExceededError as e:
            where = f"in regex {token}: {e.where}"
            raise LimitExceededError(e.limit, e.value, e.maximum, where, self.span_of(token)) from None

    def _regex_error(self, e: _SourceError, token: LarkToken) -> _SourceError:
        reason = f"in regex {token}: {e.reason}"
        if isinstance(e, UnsupportedFeatureError):
            return UnsupportedFeatureError(e.feature, self.span_of(token), reason)
        return GrammarSyntaxError(reason, self.span_of(token))

    def _regex(self, value: str, flags: frozenset[str], token: LarkToken) -> list[Item]:
        src, fl = rx.take_flags(value, flags)
        toks = rx.tokenize(src, fl.verbose)
        if not rx.is_special(toks):
            return [Piece(self._parse(rx.translate_tokens(toks, fl), fl))]
        alts = rx.split_regex(toks)
        return self._choice([self._atom_items(a, fl, token, edges=True) for a in alts])

    def _parse(self, translated: str, fl: rx.Flags) -> Expr:
        return parse_regex(rx.prefix(fl) + translated, limits=self.limits, word_chars=rx.python_class("w", fl.ascii))

    def _atom_items(self, atoms: list, fl: rx.Flags, token: LarkToken, edges: bool) -> list[Item]:
        items: list[Item] = []
        for k, a in enumerate(atoms):
            if a.kind == "anchor":
                self._check_anchor(a, edges and k == 0, edges and k == len(atoms) - 1)
            elif a.kind == "look":
                items.append(Look(a.ahead, a.negative, self._look_mask(a, fl), self.span_of(token)))
            elif a.kind == "alt":
                items += self._choice([self._atom_items(x, fl, token, False) for x in a.alts])
            else:
                items.append(self._plain_atom(a, fl))
        return items

    def _plain_atom(self, a: Any, fl: rx.Flags) -> Piece:
        expr = self._parse(rx.translate_tokens(a.toks, fl), fl)
        if not a.lazy:
            return Piece(expr)
        operand = self._parse(rx.translate_tokens(a.operand, fl), fl)
        return Piece(expr, lazy=operand is not NOTHING and is_prefix_free(operand))

    def _check_anchor(self, a: Any, at_start: bool, at_end: bool) -> None:
        t = a.toks[0].text
        if (t in ("^", "\\A") and at_start) or (t in ("$", "\\Z") and at_end):
            return
        raise UnsupportedFeatureError(f"anchor {t} that is not at the edge of the pattern")

    def _look_mask(self, a: Any, fl: rx.Flags) -> int:
        body = self._parse(rx.translate_tokens(a.toks, fl), fl)
        if not isinstance(body, Bytes):
            raise UnsupportedFeatureError(
                "lookaround",
                reason="only lookarounds over one ASCII character or class are supported",
            )
        return body.mask

    # ------------------------------------------------------------ lookarounds and laziness

    def _resolve(self, items: list[Item], top: bool) -> Piece:
        """Apply the lookarounds of ``items``, close lazy pieces, and join them."""
        if any(isinstance(x, Choice) for x in items):
            split = self._split_choices(items)
            if split is not None:
                pieces = [self._resolve(s, top) for s in split]
                return Piece(alt(*(p.expr for p in pieces)), any(p.lazy for p in pieces))
        flat: list[Piece | Look] = [self._local(x) if isinstance(x, Choice) else x for x in items]
        while (
            k := next((i for i, x in enumerate(flat) if isinstance(x, Look)), None)
        ) is not None:
            flat = self._apply_look(flat, k, top)
        return self._close(flat, top)

    def _split_choices(self, items: list[Item]) -> list[list[Item]] | None:
        """The sequences ``items`` stands for, one per alternative of its first choice
        (None: too many, or lazy pieces whose shortest matches must not be split)."""
        k = next(i for i, x in enumerate(items) if isinstance(x, Choice))
        if _count_paths(items) > MAX_CHOICE_SPLIT or _has_lazy(items):
            return None
        choice = items[k]
        assert isinstance(choice, Choice)
        return [items[:k] + list(a) + items[k + 1 :] for a in choice.alts]

    def _local(self, choice: Choice) -> Piece:
        pieces = [self._resolve(list(a), top=False) for a in choice.alts]
        return Piece(alt(*(p.expr for p in pieces)), any(p.lazy for p in pieces))

    def _apply_look(self, items: list[Piece | Look], k: int, top: bool) -> list[Piece | Look]:
        look = items[k]
        assert isinstance(look, Look)
        if look.ahead:
            rest = items[k + 1 :]
            end = self._closing_index(rest, look)
            span, edge = rest[: end + 1] if end is not None else rest, end is None
            after = rest[end + 1 :] if end is not None else []
            return items[:k] + [self._constrain(span, look, top, edge)] + after
        before = cast("list[Piece]", items[:k])  # items[k] is the first lookaround
        start = next((i for i in range(k - 1, -1, -1) if not nullable(before[i].expr)), None)
        span = items[start or 0 : k]
        piece = self._constrain(span, look, top, edge=start is None)
        return items[: start or 0] + [piece] + items[k + 1 :]

    def _closing_index(self, rest: list[Piece | Look], look: Look) -> int | None:
        for i, item in enumerate(rest):
            if isinstance(item, Look):
                raise UnsupportedFeatureError("consecutive lookarounds", look.span)
            if not nullable(item.expr):
                return i
        return None

    def _constrain(self, span: list[Piece | Look], look: Look, top: bool, edge: bool) -> Piece:
        joined = self._close(span)
        allowed = ALL_BYTES ^ look.mask if look.negative else look.mask
        expr = restrict_edge(joined.expr, allowed, first=look.ahead)
        if edge and nullable(joined.expr):
            if not look.negative:
                where = "the terminal" if top else "its group"
                kind = "lookahead" if look.ahead else "lookbehind"
                raise UnsupportedFeatureError(
                    f"positive {kind} that looks outside {where}", look.span
                )
            expr = alt(expr, EMPTY)
        return Piece(expr, joined.lazy)

    def _close(self, items: list, top: bool = False) -> Piece:
        """Join pieces; a lazy piece through its closing pieces becomes the shortest matches
        of that span (see the module docstring)."""
        out: list[Piece] = []
        i = 0
        while i < len(items):
            end = _region_end(items, i, top) if items[i].lazy else _OPEN
            if end is _GREEDY:
                out.append(Piece(items[i].expr))
            elif isinstance(end, int):  # an index: neither _GREEDY nor _OPEN
                out.append(Piece(self._shortest(seq(*(p.expr for p in items[i : end + 1])))))
                i = end
            else:
                out.append(items[i])
            i += 1
        return Piece(seq(*(p.expr for p in out)), any(p.lazy for p in out))

    def _shortest(self, e: Expr) -> Expr:
        result = shortest_matches(e)
        if result is None:
            warnings.warn(
                f"terminal {self.name}: a lazy quantifier is treated as greedy (its "
                f"shortest-match automaton exceeds {MAX_SHORTEST_STATES} states)",
                GramcWarning,
                stacklevel=6,
            )
            return e
        return result
