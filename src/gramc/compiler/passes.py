"""Grammar passes: check references, drop what can never be used, inline what need not be a rule.

Each pass is ``run(grammar) -> grammar`` and returns a new grammar; :data:`PASSES` lists them
in order and :func:`optimize` runs them. Problems that still compile (unused or unproductive
rules) are reported with :class:`~gramc.errors.GramcWarning`; problems that cannot (an
undefined rule, an empty language) raise.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable, Mapping

from gramc.compiler.ir import (NOTHING, Alt, Bytes, Expr, Grammar, Machine, Ref, Repeat, Seq, Token, TokenName, alt,
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
            elif isinstance(node, Repeat):
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
        if g.refs(name) <= g.rules.keys():
            continue
        for node in walk(body):  # the first undefined one in the body's order
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

    def __init__(self, parts: tuple[Expr | _Splice, ...]):
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
            if isinstance(part, Expr):
                leaves.append(part)
            elif part.node is not None:
                leaves.append(part.node)
            else:
                stack.extend(reversed(part.parts))
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
            nodes = [p for p in parts if isinstance(p, Expr)]
            out[node] = _Splice(parts) if len(nodes) < len(parts) or \
                any(isinstance(i, Ref) and i.name not in keep for i in node.items) else seq(*nodes)
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
#: A long counted repetition of more than this many iterations becomes a rule of its own,
#: whose DFA is its chain of positions, built directly (see :func:`gramc.compiler.pda.
#: build_pda`): inside its rule, the chain would be determinised and minimised with the
#: rest, seconds for a ``maxLength`` of 30,000.
MIN_CHAIN_RULE = 1024


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
    (deterministic). Deciding what to outline (:func:`_plan_outlining`) is apart from the
    rewrite (:class:`_Outlining`).
    """
    plan = _plan_outlining(g, min_size, keep_short)
    if not plan.names:
        return g
    rules = {n: rewrite(b, plan.swap) for n, b in g.rules.items()}
    for e, name in plan.names.items():
        rules[name] = plan.rule_body(e)
    return Grammar(rules, g.start, g.lexemes)


def _plan_outlining(g: Grammar, min_size: int, keep_short: bool) -> _Outlining:
    """Which sub-expressions of ``g`` become rules, and which repetitions call their item."""
    uses = _child_uses(g)
    measure = _ShortParts(keep_short)
    shared = [e for e, n in uses.items()
              if n > 1 and measure.size(e) >= min_size and e.children() and not measure.inline(e)]
    # Every node the rewrite can meet: the children counted, and the rule bodies themselves.
    met = [*uses, *g.rules.values()]
    long_counted = dict.fromkeys(e for e in met if isinstance(e, Repeat) and measure.long_counted(e))
    called = dict.fromkeys(e.item for e in long_counted)  # inline everywhere else
    chains = [e for e in long_counted if e.max is not None and e.max > MIN_CHAIN_RULE and e not in shared]
    names = {e: f"_shared{k}" for k, e in enumerate(dict.fromkeys([*shared, *called, *chains]))}
    return _Outlining(names, frozenset(called), frozenset(long_counted), g.lexemes)


def _child_uses(g: Grammar) -> dict[Expr, int]:
    """How many times each node is a child of a node of a rule body (inside a lexeme nothing
    is counted), in order of first use."""
    uses: dict[Expr, int] = {}
    for body in g.rules.values():
        for node in walk(body, stop=g.lexemes):
            for child in node.children():
                uses[child] = uses.get(child, 0) + 1
    return uses


class _ShortParts:
    """What ``keep_short`` keeps inline, from sizes and longest reads measured once per node."""

    def __init__(self, keep_short: bool):
        self.keep_short = keep_short
        self.sizes: dict[Expr, int] = {}
        self.longest_reads: dict[Expr, int | None] = {}

    def size(self, e: Expr) -> int:
        """The number of nodes of ``e`` written out as a tree (a :class:`Machine` counts its
        states and transitions)."""
        for node in _postorder_unknown(e, self.sizes):
            own = node.weight() if isinstance(node, Machine) else 1
            self.sizes[node] = own + sum(self.sizes[c] for c in node.children())
        return self.sizes[e]

    def longest(self, e: Expr) -> int | None:
        """The most bytes ``e`` can read; None if unbounded or a rule call."""
        return _longest(e, self.longest_reads)

    def short(self, e: Expr) -> bool:
        """Cheap to copy (see :data:`SHORT_BYTES` and :data:`SHORT_SIZE`)."""
        longest = self.longest(e)
        return self.size(e) <= SHORT_SIZE and longest is not None and longest <= SHORT_BYTES

    def inline(self, e: Expr) -> bool:
        """Stays inline wherever it is used: short, or an unbounded loop of a short part."""
        return self.keep_short and (self.short(e) or isinstance(e, Repeat) and e.max is None and self.short(e.item))

    def long_counted(self, e: Repeat) -> bool:
        """A counted repetition of an inline part that reads too much to copy at every
        position (see :data:`MAX_INLINE_REPEAT_BYTES`): it calls its item as a rule."""
        if not (self.keep_short and e.max is not None and self.inline(e.item)):
            return False
        longest = self.longest(e)
        return longest is not None and longest > MAX_INLINE_REPEAT_BYTES


@dataclass(frozen=True)
class _Outlining:
    """What :func:`outline_shared` decided, and the rewrite that carries it out."""

    #: Each sub-expression that becomes a rule, and the rule's name.
    names: dict[Expr, str]
    #: Of those, the items of long counted repetitions: called from there, inline elsewhere.
    called: frozenset[Expr]
    #: The counted repetitions that call their item.
    long_counted: frozenset[Repeat]
    #: The grammar's lexemes, kept whole.
    lexemes: frozenset[Expr]

    def swap(self, e: Expr) -> Expr | None:
        """What ``e`` becomes where it is used (None: rebuilt from its rewritten parts)."""
        if e in self.names and e not in self.called:
            return Ref(self.names[e])
        if isinstance(e, Repeat) and e in self.long_counted:
            return repeat(Ref(self.names[e.item]), e.min, e.max)
        return e if e in self.lexemes else None  # a lexeme stays whole

    def rule_body(self, e: Expr) -> Expr:
        """The body of ``e``'s rule: a lexeme whole, a long counted repetition a call of its
        item, anything else ``e`` itself with its parts swapped."""
        if e in self.lexemes:
            return e
        if isinstance(e, Repeat) and e in self.long_counted and e not in self.called:
            return repeat(Ref(self.names[e.item]), e.min, e.max)
        return rewrite(e, lambda x: None if x is e else self.swap(x))


def _longest(e: Expr, memo: dict) -> int | None:
    """The most bytes (or special tokens) ``e`` can read; None if unbounded or a rule call."""
    for node in _postorder_unknown(e, memo):
        if isinstance(node, (Bytes, Token, TokenName)):
            memo[node] = 1
        elif isinstance(node, Ref):
            memo[node] = None
        elif isinstance(node, Machine):
            memo[node] = node.longest()
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
