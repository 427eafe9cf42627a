"""Lazy lexemes and their competitors: llguidance's lexer decision as a language rewrite.

llguidance lexes. At a lexeme boundary its Earley parser allows the set ``S`` of lexemes that
its current row expects, and the lexer reads bytes for all of them at once. A *lazy* lexeme
(``[lazy]``, ``stop=``, ``suffix=``) is emitted as soon as it matches, together with every
other lazy lexeme of ``S`` that matches the same bytes, and the rest of ``S`` is dropped
(llguidance's ``regexvec.rs``, ``lowest_match``). Hence, in the contexts where a lazy ``H`` is
allowed next to a lexeme ``X``:

- a greedy ``X`` never matches a string with a prefix (itself included) in ``H``;
- a lazy ``X`` never matches a string with a *proper* prefix in ``H`` (ties are kept).

gramc has no lexer, so :func:`resolve` writes that decision into the grammar: an occurrence
of ``X`` loses ``H · Σ*`` (``H · Σ+``) when ``H`` is allowed *wherever* that occurrence is.
Whether it is follows from the LR(0) automaton of the lexeme-level grammar: the items of
an Earley row are the union of the LR(0) states of the viable prefixes that derive the
input, so a lexeme expected in every state (and in the states reached from it over
nullable rules) that holds the occurrence's item is allowed in every row that expects the
occurrence. Where a competitor is allowed only in some of those rows, gramc cannot write
the decision exactly: it keeps the larger language and reports the pair (a warning).

Greedy lexemes against each other (maximal munch) are not decided here: gramc accepts
every split, as for plain Lark (docs/grammars/lark.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from gramc.compiler import regular
from gramc.compiler.ir import (
    ALL_BYTES,
    EMPTY,
    NOTHING,
    Alt,
    Bytes,
    Expr,
    Ref,
    Repeat,
    Seq,
    Token,
    TokenName,
    alt,
    repeat,
    seq,
)
from gramc.limits import DEFAULT_LIMITS, Limits

MAX_SYMBOLS = 50_000  # symbols in the lexeme-level grammar's productions
MAX_STATES = 20_000  # LR(0) states
_ANY = Bytes(ALL_BYTES)

Occurrence = tuple[str, int]  # (rule, preorder index of the leaf in its body)


@dataclass
class Resolution:
    """The rules with restricted lexeme occurrences, and the (lexeme, lazy lexeme) pairs
    gramc could not decide exactly (it accepts more than llguidance there)."""

    rules: dict[str, Expr]
    inexact: list[tuple[str, str]] = field(default_factory=list)


def resolve(rules: Mapping[str, Expr], start: str, lexemes: Mapping[str, Expr],
            lazy: Collection[str], opaque: Collection[str],
            limits: Limits = DEFAULT_LIMITS) -> Resolution:
    """Apply the lazy-lexeme decision to ``rules``.

    Args:
        rules: the grammar; a ``Ref`` to a name in ``lexemes`` or ``opaque`` is one lexeme.
        start: the start rule.
        lexemes: lexeme rule name -> its language (rule-free IR).
        lazy: the lazy lexemes among ``lexemes``.
        opaque: names that start a sub-grammar (``%json``, ``%lark``) whose lexemes are not
            known here: a lazy lexeme allowed next to one is reported as inexact.
    """
    bnf = _Bnf(rules, start, lexemes, opaque)
    lexemes = {**bnf.leaves, **lexemes}
    found = conflicts(lexemes, lazy, limits)
    everything = sorted({(x, h) for x, hs in found.items() for h in hs})
    if not found or bnf.too_big:
        return Resolution(dict(rules), everything if bnf.too_big else [])
    surely, maybe = bnf.allowed_with(set(lazy))
    if surely is None:
        return Resolution(dict(rules), everything)
    inexact: set[tuple[str, str]] = set()
    cut: dict[Occurrence, frozenset[str]] = {}
    for occ, lexeme in bnf.occurrences.items():
        if lexeme in opaque:
            inexact.update((lexeme, h) for h in maybe.get(occ, ()))
            continue
        if occ not in surely or lexeme not in found:
            continue
        known = found[lexeme] & surely[occ]
        inexact.update((lexeme, h) for h in found[lexeme] - known)
        if known:
            cut[occ] = frozenset(known)
    out = dict(rules)
    made: dict[tuple[str, frozenset[str]], str] = {}

    def restricted(lexeme: str, by: frozenset[str]) -> Expr:
        if (lexeme, by) not in made:
            name = f"{lexeme}~{'~'.join(sorted(by))}"
            tail = repeat(_ANY, 1 if lexeme in lazy else 0, None)
            cutters = alt(*(seq(lexemes[h], tail) for h in sorted(by)))
            out[name] = regular.difference(lexemes[lexeme], cutters, limits)
            made[(lexeme, by)] = name
        return Ref(made[(lexeme, by)])

    for rule in {occ[0] for occ in cut}:
        counter = [0]
        out[rule] = _rewrite(rules[rule], rule, counter, cut, restricted)
    return Resolution(out, sorted(inexact))


def conflicts(lexemes: Mapping[str, Expr], lazy: Collection[str],
               limits: Limits) -> dict[str, set[str]]:
    """lexeme -> the lazy lexemes that can end inside (or, for a greedy one, at the end of)
    one of its strings."""
    out: dict[str, set[str]] = {}
    for h in lazy:
        for x, lang in lexemes.items():
            if x == h:
                continue
            started = seq(lexemes[h], repeat(_ANY, 1 if x in lazy else 0, None))
            if not regular.is_empty(regular.intersection(lang, started, limits), limits):
                out.setdefault(x, set()).add(h)
    return out


def _rewrite(expr: Expr, rule: str, counter: list[int], cut: Mapping[Occurrence, frozenset[str]],
             restricted: Callable[[str, frozenset[str]], Expr]) -> Expr:
    """``expr`` with the leaves of ``cut`` (numbered in preorder as :class:`_Bnf` numbers
    them) replaced by their restricted lexemes."""
    index = counter[0]
    counter[0] += 1
    if isinstance(expr, Seq):
        return seq(*(_rewrite(e, rule, counter, cut, restricted) for e in expr.items))
    if isinstance(expr, Alt):
        return alt(*(_rewrite(e, rule, counter, cut, restricted) for e in expr.items))
    if isinstance(expr, Repeat):
        return repeat(_rewrite(expr.item, rule, counter, cut, restricted), expr.min, expr.max)
    if (rule, index) in cut and isinstance(expr, Ref):
        return restricted(expr.name, cut[(rule, index)])
    return expr


class _Bnf:
    """The grammar over lexemes as plain productions, and its LR(0) automaton."""

    def __init__(self, rules: Mapping[str, Expr], start: str, lexemes: Mapping[str, Expr],
                 opaque: Collection[str]):
        self.rules, self.terminals = rules, set(lexemes) | set(opaque)
        self.prods: list[tuple[str, tuple[str, ...]]] = []
        self.by_lhs: dict[str, list[int]] = {}
        self.at: dict[tuple[int, int], Occurrence] = {}  # (production, dot) -> occurrence
        self.occurrences: dict[Occurrence, str] = {}  # occurrence -> its lexeme
        self.leaves: dict[str, Expr] = {}  # lexemes written inline (not rule references)
        self.size, self.too_big, self.fresh = 0, False, 0
        self._add("\x00start", [[(start, None)]])  # production 0: the augmented start
        todo, seen = [start], {start}
        while todo and not self.too_big:
            name = todo.pop()
            before = len(self.prods)
            self._add(name, self._alts(rules[name], name, [0]))
            self.too_big |= self.size > MAX_SYMBOLS
            for _lhs, rhs in self.prods[before:]:
                for sym in rhs:
                    if sym in rules and sym not in self.terminals and sym not in seen:
                        seen.add(sym)
                        todo.append(sym)

    # --- productions

    def _add(self, lhs: str, alts: list[list[tuple[str, Occurrence | None]]]) -> None:
        for rhs in alts:
            k = len(self.prods)
            self.prods.append((lhs, tuple(s for s, _o in rhs)))
            self.by_lhs.setdefault(lhs, []).append(k)
            for pos, (_s, occ) in enumerate(rhs):
                if occ is not None:
                    self.at[(k, pos)] = occ
            self.size += len(rhs) + 1
        self.by_lhs.setdefault(lhs, [])

    def _helper(self, alts: list[list[tuple[str, Occurrence | None]]]) -> str:
        self.fresh += 1
        name = f"\x00n{self.fresh}"
        self._add(name, alts)
        return name

    def _alts(self, e: Expr, rule: str, counter: list[int]) -> list[list[tuple[str, Occurrence | None]]]:
        """The alternatives of ``e`` as symbol sequences (each symbol with its occurrence)."""
        index = counter[0]
        counter[0] += 1
        if e is NOTHING:
            return []
        if e is EMPTY:
            return [[]]
        if isinstance(e, Seq):
            out: list[list[tuple[str, Occurrence | None]]] = [[]]
            for item in e.items:
                parts = self._alts(item, rule, counter)
                if len(parts) == 1:
                    out = [o + parts[0] for o in out]
                else:
                    sym = self._helper(parts) if parts else None
                    out = [o + [(sym, None)] for o in out] if sym else []
            return out
        if isinstance(e, Alt):
            return [a for item in e.items for a in self._alts(item, rule, counter)]
        if isinstance(e, Repeat):
            if self.size > MAX_SYMBOLS or e.min + (e.max or 0) > MAX_SYMBOLS:
                self.too_big = True
                return [[]]
            one: tuple[str, Occurrence | None] = (self._helper(self._alts(e.item, rule, counter)), None)
            if e.max is None:
                star = self._helper([[]])
                self.prods.append((star, (one[0], star)))
                self.by_lhs[star].append(len(self.prods) - 1)
                return [[one] * e.min + [(star, None)]]
            tail = self._helper([[]])
            for _ in range(e.max - e.min):
                tail = self._helper([[], [one, (tail, None)]])
            return [[one] * e.min + [(tail, None)]]
        if isinstance(e, Ref) and e.name not in self.terminals:
            return [[(e.name, None)]]
        if isinstance(e, (Token, TokenName)):
            return [[(f"{e}", None)]]  # special tokens never compete with bytes
        name = e.name if isinstance(e, Ref) else f"{e}"
        if not isinstance(e, Ref):
            self.leaves[name] = e
        self.occurrences[(rule, index)] = name
        return [[(name, (rule, index))]]

    # --- LR(0)

    def allowed_with(self, lazy: set[str]) -> tuple[dict[Occurrence, set[str]] | None,
                                                    dict[Occurrence, set[str]]]:
        """Per lexeme occurrence: the lazy lexemes allowed in every row that allows it
        (None: the automaton is too big), and those allowed in some LR(0) state with it."""
        nullable = self._nullable()
        states: dict[frozenset[tuple[int, int]], int] = {}
        order: list[frozenset[tuple[int, int]]] = []
        edges: list[dict[str, int]] = []
        todo = [self._closure({(0, 0)})]
        states[todo[0]] = 0
        order.append(todo[0])
        edges.append({})
        while todo:
            s = todo.pop()
            k = states[s]
            moves: dict[str, set[tuple[int, int]]] = {}
            for p, d in s:
                rhs = self.prods[p][1]
                if d < len(rhs):
                    moves.setdefault(rhs[d], set()).add((p, d + 1))
            for sym, kernel in moves.items():
                t = self._closure(kernel)
                if t not in states:
                    if len(states) >= MAX_STATES:
                        return None, {}
                    states[t] = len(order)
                    order.append(t)
                    edges.append({})
                    todo.append(t)
                edges[k][sym] = states[t]
        expected = [{self.prods[p][1][d] for p, d in s if d < len(self.prods[p][1])} for s in order]
        entries: list[list[tuple[int, str]]] = [[] for _ in order]
        for k, out in enumerate(edges):
            for sym, target in out.items():
                entries[target].append((k, sym))
        # group[k]: the lazies expected in state k or in a state reached from it over a
        # nullable rule (an Earley row holding state(γ) holds state(γB) for nullable B).
        group = [expected[k] & lazy for k in range(len(order))]
        changed = True
        while changed:
            changed = False
            for k, out in enumerate(edges):
                for sym, target in out.items():
                    if sym in nullable and not group[target] <= group[k]:
                        group[k] |= group[target]
                        changed = True
        # sure[k]: the lazies in every row that holds state k for some viable prefix γ: its
        # group, and when γ = δA, what the row must hold for δα, A -> α (the last rule
        # applied: a shorter derivation, so the greatest fixpoint is sound).
        sure = [set(lazy) for _ in order]
        changed = True
        while changed:
            changed = False
            for k in range(len(order)):
                new = group[k] | self._up(k, entries[k], edges, sure, lazy)
                if new != sure[k]:
                    sure[k], changed = new, True
        surely: dict[Occurrence, set[str]] = {}
        maybe: dict[Occurrence, set[str]] = {}
        for k, s in enumerate(order):
            for p, d in s:
                occ = self.at.get((p, d))
                if occ is None:
                    continue
                surely[occ] = surely[occ] & sure[k] if occ in surely else set(sure[k])
                maybe.setdefault(occ, set()).update(group[k] | sure[k])
        return surely, maybe

    def _up(self, t: int, entries: list[tuple[int, str]], edges: list[dict[str, int]],
            sure: list[set[str]], lazy: set[str]) -> set[str]:
        """The lazies every row holding state ``t`` holds through how ``t`` is entered."""
        if t == 0 or not entries:
            return set()
        out = set(lazy)
        for k, sym in entries:
            if sym not in self.by_lhs:
                return set()  # entered by a lexeme: nothing more is known
            for p in self.by_lhs[sym]:
                state: int | None = k
                for x in self.prods[p][1]:
                    state = edges[state].get(x) if state is not None else None
                if state is None:
                    return set()  # no state for δα: claim nothing
                out &= sure[state]
        return out

    def _closure(self, kernel: set[tuple[int, int]]) -> frozenset[tuple[int, int]]:
        items, todo = set(kernel), list(kernel)
        while todo:
            p, d = todo.pop()
            rhs = self.prods[p][1]
            if d < len(rhs) and rhs[d] in self.by_lhs:
                for q in self.by_lhs[rhs[d]]:
                    if (q, 0) not in items:
                        items.add((q, 0))
                        todo.append((q, 0))
        return frozenset(items)

    def _nullable(self) -> set[str]:
        out: set[str] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.prods:
                if lhs not in out and all(s in out for s in rhs):
                    out.add(lhs)
                    changed = True
        return out
