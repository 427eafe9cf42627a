"""IR-level helpers for the grammar frontends: rewriting, nullability, left recursion, and
the language difference ``A - B`` of EBNF exceptions.

Exceptions are computed exactly, as languages: both operands must be regular (no recursion
through them). Each side is built into a minimal DFA (:func:`~gramc.compiler.dfa.build_dfa`),
the product automaton accepts what ``A`` accepts and ``B`` rejects, it is minimised, and
state elimination turns it back into an IR expression. Operands that are recursive are
refused with :class:`~gramc.errors.UnsupportedFeatureError` at the ``-``.

>>> from gramc.compiler.ir import literal, byte_range
>>> print(difference(repeat(byte_range(0x61, 0x62), 1, 2), literal(b"ab"), {}))
[ab] | "aa" | "b" [ab]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from gramc.automata.tables import DFATable
from gramc.compiler.dfa import build_dfa
from gramc.compiler.ir import (
    EMPTY,
    NOTHING,
    Alt,
    Bytes,
    Expr,
    Grammar,
    Machine,
    Ref,
    Repeat,
    Seq,
    Token,
    TokenName,
    alt,
    machine,
    postorder,
    repeat,
    seq,
)
from gramc.compiler import regular
from gramc.compiler.regular import combine
from gramc.errors import LimitExceededError, Span, UnsupportedFeatureError
from gramc.limits import DEFAULT_LIMITS, Limits

# ---------------------------------------------------------------- walking and rewriting



def rebuild(expr: Expr, leaf: Callable[[Expr], Expr]) -> Expr:
    """``expr`` with every leaf replaced by ``leaf(node)``, rebuilt with the smart constructors."""
    memo: dict[Expr, Expr] = {}
    for node in postorder(expr):
        if isinstance(node, Seq):
            memo[node] = seq(*(memo[c] for c in node.items))
        elif isinstance(node, Alt):
            memo[node] = alt(*(memo[c] for c in node.items))
        elif isinstance(node, Repeat):
            memo[node] = repeat(memo[node.item], node.min, node.max)
        else:
            memo[node] = leaf(node)
    return memo[expr]


def substitute(expr: Expr, mapping: Mapping[str, Expr]) -> Expr:
    """``expr`` with each ``Ref(name)`` for a name in ``mapping`` replaced by its value."""
    return rebuild(expr, lambda n: mapping.get(n.name, n) if isinstance(n, Ref) else n)


def restrict_bytes(expr: Expr, mask: int) -> Expr:
    """``expr`` with every byte class intersected with ``mask``.

    When ``mask`` only removes ASCII bytes from well-formed UTF-8 IR, this is exactly the
    language of ``expr`` without the strings containing those characters.
    """
    def leaf(n: Expr) -> Expr:
        if isinstance(n, Bytes):
            return Bytes(n.mask & mask) if n.mask & mask else NOTHING
        if isinstance(n, Machine):
            return machine([[(m & mask, t) for m, t in row] for row in n.edges], n.accept, n.start)
        return n
    return rebuild(expr, leaf)


def referenced(expr: Expr) -> set[str]:
    """The rule names ``expr`` refers to directly."""
    return {n.name for n in postorder(expr) if isinstance(n, Ref)}


# ---------------------------------------------------------------- nullability and left recursion


def nullable_rules(rules: Mapping[str, Expr]) -> set[str]:
    """The rules that derive the empty string (a least fixpoint)."""
    null: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            if name not in null and _nullable_nodes(body, null)[body]:
                null.add(name)
                changed = True
    return null


def _nullable_nodes(expr: Expr, null_rules: set[str]) -> dict[Expr, bool]:
    memo: dict[Expr, bool] = {}
    for n in postorder(expr):
        if isinstance(n, Seq):
            memo[n] = all(memo[c] for c in n.items)
        elif isinstance(n, Alt):
            memo[n] = any(memo[c] for c in n.items)
        elif isinstance(n, Repeat):
            memo[n] = n.min == 0 or memo[n.item]
        else:
            memo[n] = n is EMPTY or (isinstance(n, Ref) and n.name in null_rules) \
                or (isinstance(n, Machine) and n.accept[n.start])
    return memo


def left_refs(expr: Expr, null_rules: set[str]) -> set[str]:
    """The rules that can be called before ``expr`` has consumed anything."""
    null = _nullable_nodes(expr, null_rules)
    memo: dict[Expr, frozenset[str]] = {}
    for n in postorder(expr):
        if isinstance(n, Ref):
            memo[n] = frozenset((n.name,))
        elif isinstance(n, Seq):
            memo[n] = frozenset().union(*(memo[c] for c in _nullable_prefix(n.items, null)))
        elif isinstance(n, Alt):
            memo[n] = frozenset().union(*(memo[c] for c in n.items))
        elif isinstance(n, Repeat):
            memo[n] = memo[n.item]
        else:
            memo[n] = frozenset()
    return set(memo[expr])


def _nullable_prefix(items: Iterable[Expr], null: dict[Expr, bool]) -> list[Expr]:
    """The items up to and including the first one that is not nullable."""
    out = []
    for item in items:
        out.append(item)
        if not null[item]:
            break
    return out


def find_left_recursion(rules: Mapping[str, Expr]) -> list[str] | None:
    """A left-recursive cycle ``[r, ..., r]`` through the first such rule, or None."""
    null = nullable_rules(rules)
    graph = {name: left_refs(body, null) & rules.keys() for name, body in rules.items()}
    for name in rules:
        path = _path(graph, name)
        if path is not None:
            return path
    return None


def _path(graph: Mapping[str, set[str]], target: str) -> list[str] | None:
    """A shortest path target -> ... -> target in ``graph`` (breadth first), or None."""
    parent: dict[str, str] = {}
    frontier = [target]
    while frontier:
        nxt = []
        for node in frontier:
            for succ in sorted(graph[node]):
                if succ == target:
                    path = [node]
                    while path[-1] != target:
                        path.append(parent[path[-1]])
                    return [*reversed(path), target]
                if succ not in parent:
                    parent[succ] = node
                    nxt.append(succ)
        frontier = nxt
    return None


# ---------------------------------------------------------------- language difference


def difference(lhs: Expr, rhs: Expr, rules: Mapping[str, Expr], *,
               span: Span | None = None, limits: Limits = DEFAULT_LIMITS) -> Expr:
    """The IR of the strings of ``lhs`` that ``rhs`` does not match.

    Rule references in either side are resolved against ``rules``; both sides must be
    regular and free of special tokens, else :class:`UnsupportedFeatureError` (at ``span``).
    """
    a = _side_dfa(lhs, rules, "left", span, limits)
    b = _side_dfa(rhs, rules, "right", span, limits)
    return combine(a, b, False, limits)


def intersection(items: list[Expr], *, span: Span | None = None,
                 limits: Limits = DEFAULT_LIMITS) -> Expr:
    """The IR of the strings every one of ``items`` (regular, rule-free IR) matches."""
    for k, item in enumerate(items):
        _check_operand(Grammar.single(item, "\x00operand"), "right" if k else "left", span)
    out = items[0]
    with _depth_as_limit(items, limits):
        for item in items[1:]:
            out = regular.intersection(out, item, limits)
    return out


def complement(item: Expr, *, span: Span | None = None, limits: Limits = DEFAULT_LIMITS) -> Expr:
    """The IR of the byte strings ``item`` (regular, rule-free IR) does not match; like
    llguidance's ``~``, this includes byte strings that are not UTF-8."""
    _check_operand(Grammar.single(item, "\x00operand"), "right", span)
    with _depth_as_limit([item], limits):
        return regular.difference(repeat(Bytes((1 << 256) - 1), 0, None), item, limits)


@contextmanager
def _depth_as_limit(items: list[Expr], limits: Limits) -> Iterator[None]:
    """A RecursionError of an operand's automaton as the nesting limit it is."""
    try:
        yield
    except RecursionError:
        depth = max(expr_depth(i) for i in items)
        raise LimitExceededError("max_nesting", depth, limits.max_nesting,
                                 "an operand is nested too deeply for its automaton") from None


def _side_dfa(expr: Expr, rules: Mapping[str, Expr], side: str, span: Span | None,
              limits: Limits) -> DFATable:
    name = "\x00exception-operand"
    g = Grammar({**rules, name: expr}, name)
    try:
        _check_operand(g, side, span)
        return build_dfa(g, limits)
    except RecursionError:
        hint = f"the {side} operand of '-' is nested too deeply for its automaton"
        raise LimitExceededError("max_nesting", expr_depth(expr), limits.max_nesting, hint) from None


def _check_operand(g: Grammar, side: str, span: Span | None) -> None:
    if g.is_recursive():
        raise UnsupportedFeatureError(
            "exception of a recursive rule", span,
            f"the {side} operand of '-' is recursive; 'A - B' is only supported when both sides "
            "are regular (no recursion through them)")
    if any(isinstance(n, (Token, TokenName)) for r in _reachable(g) for n in postorder(g.rules[r])):
        raise UnsupportedFeatureError(
            "special token in an exception", span,
            f"the {side} operand of '-' contains a special token; exceptions are over bytes only")


def expr_depth(expr: Expr) -> int:
    """The height of the expression tree (rule references count as leaves)."""
    depth: dict[Expr, int] = {}
    for n in postorder(expr):
        depth[n] = 1 + max((depth[c] for c in n.children()), default=0)
    return depth[expr]


def _reachable(g: Grammar) -> set[str]:
    seen, todo = set(), [g.start]
    while todo:
        name = todo.pop()
        if name not in seen and name in g.rules:
            seen.add(name)
            todo.extend(referenced(g.rules[name]))
    return seen
