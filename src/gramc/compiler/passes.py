"""Grammar passes: check references, drop what can never be used, inline what need not be a rule.

Each pass is ``run(grammar) -> grammar`` and returns a new grammar; :data:`PASSES` lists them
in order and :func:`optimize` runs them. Problems that still compile (unused or unproductive
rules) are reported with :class:`~gramc.errors.GramcWarning`; problems that cannot (an
undefined rule, an empty language) raise.
"""

from __future__ import annotations

import warnings
from typing import Callable, Mapping

from gramc.compiler.ir import (NOTHING, Alt, Bytes, Expr, Grammar, Ref, Repeat, Seq, Token, TokenName, alt,
                               postorder, repeat, seq, walk)
from gramc.errors import GramcError, GrammarSyntaxError, GramcWarning, VocabularyError


def rewrite(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """``e`` with every node for which ``fn`` returns an expression replaced by it (bottom-up
    rebuild through the smart constructors, so simplifications propagate). Runs on an explicit
    stack: inlining a chain of rules nests the IR as deep as the chain."""
    memo: dict[Expr, Expr] = {}
    # (node, False): first visit; (node, True): its children are rebuilt, rebuild it.
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            if isinstance(node, Seq):
                memo[node] = seq(*(memo[i] for i in node.items))
            elif isinstance(node, Alt):
                memo[node] = alt(*(memo[i] for i in node.items))
            else:
                memo[node] = repeat(memo[node.item], node.min, node.max)
            continue
        if node in memo:
            continue
        out = fn(node)
        if out is None and isinstance(node, (Seq, Alt, Repeat)):
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(node.children()) if c not in memo)
        else:
            memo[node] = node if out is None else out
    return memo[e]


def check_references(g: Grammar) -> Grammar:
    """Every referenced rule must be defined (frontends report positions; this is the net)."""
    for name, body in g.rules.items():
        for node in walk(body):
            if isinstance(node, Ref) and node.name not in g.rules:
                raise GrammarSyntaxError(f"rule {name!r} refers to undefined rule {node.name!r}")
    return g


def _productive(g: Grammar) -> set[str]:
    """The rules that can finish (a least fixpoint): a rule is re-checked only when a rule it
    refers to becomes productive, so a chain of rules costs linear time, not quadratic."""
    refs = {name: g.refs(name) for name in g.rules}
    users: dict[str, list[str]] = {}
    for name, used in refs.items():
        for ref in used:
            users.setdefault(ref, []).append(name)
    done: set[str] = set()
    todo = list(reversed(g.rules))
    while todo:
        name = todo.pop()
        if name not in done and _expr_productive(g.rules[name], done):
            done.add(name)
            todo.extend(u for u in users.get(name, ()) if u not in done)
    return done


def _expr_productive(e: Expr, rules: set[str]) -> bool:
    """Whether ``e`` can finish when the rules in ``rules`` can (bottom-up, no recursion)."""
    known: dict[Expr, bool] = {}
    for node in postorder(e):
        if isinstance(node, Ref):
            known[node] = node.name in rules
        elif isinstance(node, Seq):
            known[node] = all(known[i] for i in node.items)
        elif isinstance(node, Alt):
            known[node] = any(known[i] for i in node.items)
        elif isinstance(node, Repeat):
            known[node] = node.min == 0 or known[node.item]
        else:
            known[node] = node is not NOTHING
    return known[e]


def remove_unproductive(g: Grammar) -> Grammar:
    """Rules that can never finish are replaced by the empty language (with a warning).

    Raises GramcError when the start rule itself can never finish: the language is empty.
    """
    good = _productive(g)
    bad = [n for n in g.rules if n not in good]
    if not bad:
        return g
    if g.start not in good:
        raise GramcError(f"the grammar's language is empty: start rule {g.start!r} can never "
                         f"finish (unproductive rules: {', '.join(bad)})")
    warnings.warn(GramcWarning(f"rules that can never finish are ignored: {', '.join(bad)}"), stacklevel=2)
    kill = lambda e: NOTHING if isinstance(e, Ref) and e.name not in good else None  # noqa: E731
    return Grammar({n: rewrite(b, kill) for n, b in g.rules.items() if n in good}, g.start, g.lexemes)


def remove_unreachable(g: Grammar) -> Grammar:
    """Rules the start rule never reaches are dropped (with a warning naming them)."""
    seen, todo = {g.start}, [g.start]
    while todo:
        for ref in g.refs(todo.pop()):
            if ref not in seen:
                seen.add(ref)
                todo.append(ref)
    unused = [n for n in g.rules if n not in seen]
    if unused:
        warnings.warn(GramcWarning(f"unused rules are ignored: {', '.join(unused)}"), stacklevel=2)
    return Grammar({n: b for n, b in g.rules.items() if n in seen}, g.start, g.lexemes)


def recursive_rules(g: Grammar) -> set[str]:
    """Rules that can reach themselves (members of a cycle of references): the rules of the
    strongly connected components with a cycle (Tarjan's algorithm on an explicit stack)."""
    graph = {n: sorted(g.refs(n) & g.rules.keys()) for n in g.rules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_path: list[str] = []
    on_path_set: set[str] = set()
    out: set[str] = set()
    for root in g.rules:
        if root in index:
            continue
        calls = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        on_path.append(root)
        on_path_set.add(root)
        while calls:
            name, pending = calls[-1]
            ref = next(pending, None)
            if ref is not None:
                if ref not in index:
                    index[ref] = low[ref] = len(index)
                    on_path.append(ref)
                    on_path_set.add(ref)
                    calls.append((ref, iter(graph[ref])))
                elif ref in on_path_set:
                    low[name] = min(low[name], index[ref])
                continue
            calls.pop()
            if calls:
                caller = calls[-1][0]
                low[caller] = min(low[caller], low[name])
            if low[name] == index[name]:
                component = []
                while True:
                    member = on_path.pop()
                    on_path_set.discard(member)
                    component.append(member)
                    if member == name:
                        break
                if len(component) > 1 or name in graph[name]:
                    out.update(component)
    return out


def inline_nonrecursive(g: Grammar) -> Grammar:
    """Inline every rule that is not recursive; the start rule and recursive rules stay.

    Fewer rules mean fewer rule boundaries, and rule boundaries are where token masks depend
    on the parse stack; the DFA of each remaining rule absorbs the inlined ones. Inlined rules
    are rewritten once each, callees first (their references form no cycle). A sequence that
    calls an inlined rule is kept as a :class:`_Splice` until something needs it as a node:
    in a chain of n rules each a letter and the next rule, building every rule's flattened
    sequence would cost n + (n-1) + ... items; the splices build only the kept rule's.
    """
    keep = recursive_rules(g) | {g.start}
    bodies: dict[str, Expr | _Splice] = {}
    for name in _inlined_callees_first(g, keep):
        bodies[name] = _inline(g.rules[name], bodies, keep)
    return Grammar({n: _node(_inline(b, bodies, keep)) for n, b in g.rules.items() if n in keep},
                   g.start, g.lexemes)


class _Splice:
    """A sequence of parts (nodes or splices) not yet flattened into one :class:`Seq`."""

    __slots__ = ("parts", "node")

    def __init__(self, parts: tuple):
        self.parts = parts
        self.node: Expr | None = None  # the flattened sequence, once asked for


def _node(x: Expr | _Splice) -> Expr:
    """``x`` as an IR node: a splice is flattened (once; iteratively) through :func:`seq`."""
    if isinstance(x, Expr):
        return x
    if x.node is None:
        leaves: list[Expr] = []
        stack: list[Expr | _Splice] = [x]
        while stack:
            part = stack.pop()
            if isinstance(part, _Splice) and part.node is None:
                stack.extend(reversed(part.parts))
            else:
                leaves.append(part if isinstance(part, Expr) else part.node)
        x.node = seq(*leaves)
    return x.node


def _inline(e: Expr, bodies: Mapping[str, Expr | _Splice], keep: set[str]) -> Expr | _Splice:
    """:func:`rewrite` of ``e`` with each reference to a rule outside ``keep`` replaced by its
    body in ``bodies``; sequences with such a reference in them stay splices."""
    out: dict[Expr, Expr | _Splice] = {}
    for node in postorder(e):
        if isinstance(node, Ref) and node.name not in keep:
            out[node] = bodies[node.name]
        elif isinstance(node, Seq):
            parts = tuple(out[i] for i in node.items)
            out[node] = _Splice(parts) if any(isinstance(p, _Splice) for p in parts) or \
                any(isinstance(i, Ref) and i.name not in keep for i in node.items) else seq(*parts)
        elif isinstance(node, Alt):
            out[node] = alt(*(_node(out[i]) for i in node.items))
        elif isinstance(node, Repeat):
            out[node] = repeat(_node(out[node.item]), node.min, node.max)
        else:
            out[node] = node
    return out[e]


def _inlined_callees_first(g: Grammar, keep: set[str]) -> list[str]:
    """The rules outside ``keep`` that the kept rules reach through rules outside ``keep``,
    each after every such rule it refers to (depth-first post-order on an explicit stack)."""
    order: list[str] = []
    seen: set[str] = set()
    for root in keep:
        stack = [(ref, False) for ref in sorted(g.refs(root) - keep)]
        while stack:
            name, callees_done = stack.pop()
            if callees_done:
                order.append(name)
            elif name not in seen:
                seen.add(name)
                stack.append((name, True))
                stack.extend((ref, False) for ref in sorted(g.refs(name) - keep) if ref not in seen)
    return order


def resolve_token_names(g: Grammar, special_names: Mapping[str, int] | None) -> Grammar:
    """Replace ``<name>`` special-token references by the vocabulary's token ids."""
    names = {n.name for body in g.rules.values() for n in walk(body) if isinstance(n, TokenName)}
    if not names:
        return g
    if special_names is None:
        raise GramcError(f"the grammar names special tokens ({', '.join(sorted(names))}): "
                         "compile it with a vocabulary to resolve them")
    missing = sorted(names - set(special_names))
    if missing:
        raise VocabularyError(f"the vocabulary has no special token named {', '.join(missing)}")
    swap = lambda e: Token(special_names[e.name]) if isinstance(e, TokenName) else None  # noqa: E731
    return Grammar({n: rewrite(b, swap) for n, b in g.rules.items()}, g.start, g.lexemes)


#: Sub-expressions reading at most this many bytes (a UTF-8 character, an escape) are never
#: outlined, nor are unbounded repetitions of them (a loop costs one copy): copying them is
#: cheap, and as rules they would put a call and a return on every character of a string.
SHORT_BYTES = 32
#: ... and whose IR, written out as a tree, has at most this many nodes (a short part can
#: still nest shared alternatives deeply enough to blow up when copied).
SHORT_SIZE = 1024
#: A counted repetition of a short part reading more than this many bytes in all (a JSON
#: string with ``maxLength`` 3 or more: a character reads up to 12 bytes) calls its item as a
#: rule. Inlined, every position copies the item's states (~20,000 for 1,024 characters), and
#: each position's mask is a walk of its own; called, the runtime prices the chain by count
#: (:mod:`gramc.runtime.pda_counted`), and compiles faster.
MAX_INLINE_REPEAT_BYTES = 24


def outline_shared(g: Grammar, min_size: int = 64, keep_short: bool = True) -> Grammar:
    """Turn large sub-expressions used more than once into rules of their own.

    The IR is hash-consed, so a sub-expression written twice (a list's element, a schema
    reached through several paths) is one shared node; inlined into an automaton it is copied
    at every use, and nesting multiplies the copies. As a rule it is built once and called.
    With ``keep_short``, short ones stay inline (see :data:`SHORT_BYTES`), except as the item
    of a long counted repetition (see :data:`MAX_INLINE_REPEAT_BYTES`), which calls it. The
    grammar's lexemes stay whole (a lexeme may become a rule as a whole): a word split into
    shared rules puts calls, and stack walks, in the middle of it, and copying a lexeme
    copies no sharing that nests. Rules are named ``_shared<k>`` in order of first use
    (deterministic).
    """
    uses: dict[Expr, int] = {}
    order: list[Expr] = []
    sizes: dict[Expr, int] = {}

    def count(e: Expr) -> int:
        for node in _postorder_unknown(e, sizes):
            sizes[node] = 1 + sum(sizes[c] for c in node.children())
        return sizes[e]

    lexemes = g.lexemes
    for body in g.rules.values():
        for node in walk(body, stop=lexemes):
            for child in node.children():
                if child not in uses:
                    order.append(child)
                uses[child] = uses.get(child, 0) + 1
    longest: dict[Expr, int | None] = {}
    short = lambda e: count(e) <= SHORT_SIZE and _longest(e, longest) is not None and \
        longest[e] <= SHORT_BYTES  # noqa: E731
    inline = lambda e: keep_short and (short(e) or isinstance(e, Repeat) and e.max is None  # noqa: E731
                                       and short(e.item))
    shared = [e for e in order if uses[e] > 1 and count(e) >= min_size and e.children() and not inline(e)]
    # Long counted repetitions of short parts call their item (see MAX_INLINE_REPEAT_BYTES).
    long_counted = lambda e: keep_short and isinstance(e, Repeat) and e.max is not None and \
        inline(e.item) and _longest(e, longest) is not None and \
        longest[e] > MAX_INLINE_REPEAT_BYTES  # noqa: E731
    called = dict.fromkeys(e.item for e in order if long_counted(e))  # inline elsewhere
    if not shared and not called:
        return g
    names = {e: f"_shared{k}" for k, e in enumerate([*shared, *called])}

    def swap(e: Expr) -> Expr | None:
        if e in names and e not in called:
            return Ref(names[e])
        if long_counted(e):
            return repeat(Ref(names[e.item]), e.min, e.max)
        return e if e in lexemes else None  # a lexeme stays whole

    rules = {n: rewrite(b, swap) for n, b in g.rules.items()}
    for e, name in names.items():
        rules[name] = e if e in lexemes else \
            rewrite(e, lambda x: None if x is e else swap(x)) if e in called else \
            repeat(Ref(names[e.item]), e.min, e.max) if long_counted(e) else \
            seq(*(rewrite(c, swap) for c in e.children())) if isinstance(e, Seq) else \
            alt(*(rewrite(c, swap) for c in e.children())) if isinstance(e, Alt) else \
            repeat(rewrite(e.item, swap), e.min, e.max)
    return Grammar(rules, g.start, g.lexemes)


def _longest(e: Expr, memo: dict) -> int | None:
    """The most bytes (or special tokens) ``e`` can read; None if unbounded or a rule call."""
    for node in _postorder_unknown(e, memo):
        if isinstance(node, (Bytes, Token, TokenName)):
            memo[node] = 1
        elif isinstance(node, Ref):
            memo[node] = None
        elif isinstance(node, Repeat):
            item = memo[node.item]
            memo[node] = None if item is None or (node.max is None and item) else item * (node.max or 0)
        else:
            parts = [memo[c] for c in node.children()]
            memo[node] = None if None in parts else (sum(parts) if isinstance(node, Seq) else max(parts, default=0))
    return memo[e]


def _postorder_unknown(e: Expr, known: Mapping[Expr, object]) -> list[Expr]:
    """The nodes of ``e`` not in ``known`` (nor only below nodes in it), each after its
    children: the order to fill a memo bottom-up without recursion."""
    out: list[Expr] = []
    seen: set[Expr] = set()
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, done = stack.pop()
        if done:
            out.append(node)
        elif node not in seen and node not in known:
            seen.add(node)
            stack.append((node, True))
            stack.extend((c, False) for c in node.children())
    return out


PASSES: tuple[Callable[[Grammar], Grammar], ...] = (
    check_references,
    remove_unproductive,
    remove_unreachable,
    inline_nonrecursive,
)


def optimize(g: Grammar, inline: bool = True) -> Grammar:
    """Run :data:`PASSES` in order (without the inlining pass when ``inline`` is False)."""
    for p in PASSES:
        if inline or p is not inline_nonrecursive:
            g = p(g)
    return g
