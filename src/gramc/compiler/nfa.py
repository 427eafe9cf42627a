"""Thompson NFA over bytes (and special-token edges), built from the IR.

States are integers; each is one of: a byte edge (a 256-bit class and one target), a token
edge (a special-token id and one target), a call edge (a rule number and one target: the
rule is entered there and returns to the target), an epsilon split (a list of targets), or
the single accepting state. References to rules listed as ``calls`` become call edges; all
other references are inlined, and inlining a rule into itself is an error (recursion needs
call edges: the PDA backend).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gramc.compiler import stackless
from gramc.compiler.ir import EMPTY, NOTHING, Alt, Bytes, Expr, Grammar, Machine, Ref, Repeat, Seq, Token
from gramc.compiler.stackless import Call
from gramc.errors import UnsupportedFeatureError
from gramc.limits import DEFAULT_LIMITS, Limits


@dataclass
class NFA:
    """A Thompson NFA. ``cls[s]`` is 0, ``tok[s]`` and ``call[s]`` -1 where they do not apply."""

    cls: list[int] = field(default_factory=list)
    tok: list[int] = field(default_factory=list)
    call: list[int] = field(default_factory=list)
    nxt: list[int] = field(default_factory=list)
    eps: list[tuple[int, ...]] = field(default_factory=list)
    start: int = -1
    accept: int = -1

    @property
    def n_states(self) -> int:
        return len(self.nxt)

    def closure(self, states: Iterable[int]) -> frozenset[int]:
        """The epsilon closure of ``states``, keeping only non-split states."""
        out: set[int] = set()
        seen: set[int] = set()
        stack = list(states)
        eps = self.eps
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            if eps[s]:
                stack.extend(eps[s])
            else:
                out.add(s)
        return frozenset(out)


class _Builder:
    """Builds an NFA back to front: ``build(expr, out)`` returns the entry state."""

    def __init__(self, grammar: Grammar, limits: Limits, calls: dict[str, int]):
        self.nfa = NFA()
        self.grammar = grammar
        self.limits = limits
        self.calls = calls
        self.inlining: list[str] = []
        self.where = f"the NFA of rule {grammar.start!r}" + (", other rules inlined" if not calls else "")

    def add(self, cls: int = 0, tok: int = -1, nxt: int = -1, eps: tuple[int, ...] = (), call: int = -1) -> int:
        n = self.nfa
        n.cls.append(cls)
        n.tok.append(tok)
        n.call.append(call)
        n.nxt.append(nxt)
        n.eps.append(eps)
        if len(n.nxt) % 4096 == 0:
            self.limits.check("max_nfa_states", len(n.nxt), self.where)
        return len(n.nxt) - 1

    def build(self, e: Expr, out: int) -> Call[int]:
        """The entry state of ``e`` leading to ``out`` (a :mod:`stackless` call: the IR and
        the chain of inlined rules can nest as deep as the source)."""
        if isinstance(e, Bytes):
            return self.add(cls=e.mask, nxt=out)
        if isinstance(e, Seq):
            for item in reversed(e.items):
                out = self.add(cls=item.mask, nxt=out) if isinstance(item, Bytes) else (yield self.build(item, out))
            return out
        if isinstance(e, Alt):
            entries = []
            for item in e.items:
                entries.append((yield self.build(item, out)))
            return self.add(eps=tuple(entries))
        if isinstance(e, Repeat):
            return (yield self.build_repeat(e, out))
        if isinstance(e, Token):
            return self.add(tok=e.id, nxt=out)
        if isinstance(e, Machine):
            return self.build_machine(e, out)
        if isinstance(e, Ref):
            if e.name in self.calls:
                return self.add(call=self.calls[e.name], nxt=out)
            return (yield self.build_ref(e.name, out))
        if e is EMPTY:
            return out
        if e is NOTHING:
            return self.add(eps=())  # a split with no way out: a dead end
        raise TypeError(f"not an IR node: {e!r}")

    def build_repeat(self, e: Repeat, out: int) -> Call[int]:
        if e.max is None:
            loop = self.add(eps=())  # patched below: item then loop, or out
            body = yield self.build(e.item, loop)
            self.nfa.eps[loop] = (body, out)
            tail = loop
        else:
            tail = out
            for _ in range(e.max - e.min):
                tail = self.add(eps=((yield self.build(e.item, tail)), out))
        for _ in range(e.min):
            tail = yield self.build(e.item, tail)
        return tail

    def build_machine(self, m: Machine, out: int) -> int:
        """A copy of the DFA: a split per state (its transitions, and ``out`` where final),
        then a byte edge per transition, row by row (appended in bulk: as :meth:`add` would,
        limit checks included)."""
        n = self.nfa
        base = len(n.nxt)
        k = m.n_states
        edges = [(q, mask, t) for q, row in enumerate(m.edges) for mask, t in row]
        first = base + k  # the first edge state
        eps: list[tuple[int, ...]] = []
        e = first
        for q, row in enumerate(m.edges):
            eps.append(tuple(range(e, e + len(row))) + ((out,) if m.accept[q] else ()))
            e += len(row)
        n.cls += [0] * k + [mask for _, mask, _ in edges]
        n.nxt += [-1] * k + [base + t for _, _, t in edges]
        n.tok += [-1] * (k + len(edges))
        n.call += [-1] * (k + len(edges))
        n.eps += eps + [()] * len(edges)
        for count in range((base // 4096 + 1) * 4096, len(n.nxt) + 1, 4096):
            self.limits.check("max_nfa_states", count, self.where)
        return base + m.start

    def build_ref(self, name: str, out: int) -> Call[int]:
        if name in self.inlining:
            cycle = " -> ".join(self.inlining[self.inlining.index(name) :] + [name])
            raise UnsupportedFeatureError(
                "recursion", reason=f"rule {cycle} is recursive: it needs a PDA, not a DFA"
            )
        self.inlining.append(name)
        entry = yield self.build(self.grammar.rules[name], out)
        self.inlining.pop()
        return entry


def thompson_size(grammar: Grammar, calls: dict[str, int] | None = None) -> int:
    """How many NFA states :func:`build_nfa` would make, counted on the expression DAG
    without expanding it (shared sub-expressions are counted once per use)."""
    memo: dict[int, int] = {}
    calls = calls or {}

    def size(e: Expr, active: frozenset[str]) -> Call[int]:
        if id(e) in memo:
            return memo[id(e)]
        if isinstance(e, (Seq, Alt)):
            n = int(isinstance(e, Alt))
            for item in e.items:
                n += yield size(item, active)
        elif isinstance(e, Repeat):
            item = yield size(e.item, active)
            n = item * (e.max if e.max is not None else e.min + 1) + (e.max or e.min) - e.min + 1
        elif isinstance(e, Machine):
            n = e.weight()
        elif isinstance(e, Ref) and e.name not in calls and e.name not in active:
            n = yield size(grammar.rules[e.name], active | {e.name})
        else:
            n = 1
        memo[id(e)] = n
        return n

    return stackless.run(size(grammar.rules[grammar.start], frozenset((grammar.start,)))) + 1


def build_nfa(grammar: Grammar, limits: Limits = DEFAULT_LIMITS, calls: dict[str, int] | None = None) -> NFA:
    """The Thompson NFA of the grammar's start rule.

    References to the rules in ``calls`` (name -> rule number) become call edges; all other
    references are inlined.
    """
    b = _Builder(grammar, limits, calls or {})
    accept = b.add()
    b.nfa.accept = accept
    b.nfa.start = stackless.run(b.build_ref(grammar.start, accept))
    limits.check("max_nfa_states", b.nfa.n_states, b.where)
    return b.nfa
