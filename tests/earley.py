"""An independent Earley recogniser over IR grammars, for tests of context-free grammars.

It shares no code with gramc's automata: the IR is flattened into plain BNF productions
(one nonterminal per sub-expression), and a textbook Earley recogniser (with the
Aycock-Horspool treatment of nullable symbols) runs over bytes. Special-token terminals
(``Token``) are matched by ``("token", id)`` input items.

Only productive symbols are kept, so a non-empty last chart set means the input is a viable
prefix: every item left there can still be completed.
"""

from __future__ import annotations

from typing import Iterable, Union

from gramc.compiler.ir import EMPTY, NOTHING, Alt, Bytes, Expr, Grammar, Machine, Ref, Repeat, Seq, Token

Symbol = Union[str, int, tuple]  # nonterminal name | byte-class mask (int) | ("tok", id)
Item = tuple[int, int, int]  # (production index, dot, origin)
InputItem = Union[int, tuple]  # a byte, or ("token", id)


class EarleyOracle:
    """Recognise bytes (and special tokens) against a grammar; viable-prefix queries."""

    def __init__(self, grammar: Grammar):
        self.prods: list[tuple[str, tuple[Symbol, ...]]] = []
        self._names: dict[Expr, str] = {}
        self.start = "<start>"
        self.prods.append((self.start, (self._nt_for_rule(grammar, grammar.start),)))
        self._grammar = grammar
        self._done_rules: set[str] = set()
        self._pending = [grammar.start]
        while self._pending:
            name = self._pending.pop()
            if name not in self._done_rules:
                self._done_rules.add(name)
                if name not in grammar.rules:
                    raise KeyError(f"undefined rule {name!r}")
                self._add(f"rule:{name}", (self._nt(grammar.rules[name]),))
        self._prune_unproductive()
        self.by_lhs: dict[str, list[int]] = {}
        for i, (lhs, _) in enumerate(self.prods):
            self.by_lhs.setdefault(lhs, []).append(i)
        self.nullable = self._nullable()

    # ------------------------------------------------------------ IR -> BNF

    def _nt_for_rule(self, grammar: Grammar, name: str) -> str:
        return f"rule:{name}"

    def _add(self, lhs: str, rhs: tuple[Symbol, ...]) -> None:
        self.prods.append((lhs, rhs))

    def _sym(self, e: Expr) -> Symbol:
        if isinstance(e, Bytes):
            return e.mask
        if isinstance(e, Token):
            return ("tok", e.id)
        if isinstance(e, Ref):
            self._pending.append(e.name)
            return f"rule:{e.name}"
        return self._nt(e)

    def _nt(self, e: Expr) -> str:
        if e in self._names:
            return self._names[e]
        name = f"e{len(self._names)}"
        self._names[e] = name
        if isinstance(e, Seq):
            self._add(name, tuple(self._sym(i) for i in e.items))
        elif isinstance(e, Alt):
            for i in e.items:
                self._add(name, (self._sym(i),))
        elif isinstance(e, Repeat):
            self._repeat(name, e)
        elif isinstance(e, Machine):  # right-linear: one nonterminal per state
            self._add(name, (f"{name}:{e.start}",))
            for q, row in enumerate(e.edges):
                for mask, target in row:
                    self._add(f"{name}:{q}", (mask, f"{name}:{target}"))
                if e.accept[q]:
                    self._add(f"{name}:{q}", ())
        elif e is EMPTY:
            self._add(name, ())
        elif e is NOTHING:
            pass  # no production: the empty language
        else:
            self._add(name, (self._sym(e),))
        return name

    def _repeat(self, name: str, e: Repeat) -> None:
        item = self._sym(e.item)
        head = (item,) * e.min
        if e.max is None:
            star = f"{name}*"
            self._add(star, ())
            self._add(star, (item, star))
            self._add(name, head + (star,))
        else:
            for k in range(e.min, e.max + 1):
                self._add(name, (item,) * k)

    def _prune_unproductive(self) -> None:
        productive: set[str] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.prods:
                if lhs not in productive and all(not isinstance(s, str) or s in productive for s in rhs):
                    productive.add(lhs)
                    changed = True
        self.prods = [(l, r) for l, r in self.prods
                      if l in productive and all(not isinstance(s, str) or s in productive for s in r)]

    def _nullable(self) -> set[str]:
        null: set[str] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.prods:
                if lhs not in null and all(isinstance(s, str) and s in null for s in rhs):
                    null.add(lhs)
                    changed = True
        return null

    # ------------------------------------------------------------ recognition

    def initial(self) -> list[set[Item]]:
        """The chart before any input."""
        chart = [set()]
        for p in self.by_lhs.get(self.start, []):
            self._add_item(chart, 0, (p, 0, 0))
        return chart

    def _add_item(self, chart: list[set[Item]], k: int, item: Item) -> None:
        work = [item]
        while work:
            it = work.pop()
            if it in chart[k]:
                continue
            chart[k].add(it)
            p, dot, origin = it
            lhs, rhs = self.prods[p]
            if dot < len(rhs):
                sym = rhs[dot]
                if isinstance(sym, str):
                    for q in self.by_lhs.get(sym, []):
                        work.append((q, 0, k))
                    if sym in self.nullable:
                        work.append((p, dot + 1, origin))
            else:  # complete: advance every item in the origin set waiting for lhs
                for (p2, d2, o2) in list(chart[origin]):
                    rhs2 = self.prods[p2][1]
                    if d2 < len(rhs2) and rhs2[d2] == lhs:
                        work.append((p2, d2 + 1, o2))
                if origin == k:  # nullable completion inside this set: re-scan later adds
                    pass

    def step(self, chart: list[set[Item]], x: InputItem) -> list[set[Item]]:
        """The chart after one more input item (a new list sharing the old sets)."""
        k = len(chart) - 1
        chart = chart + [set()]
        for (p, dot, origin) in chart[k]:
            rhs = self.prods[p][1]
            if dot < len(rhs) and _matches(rhs[dot], x):
                self._add_item(chart, k + 1, (p, dot + 1, origin))
        return chart

    def feed(self, chart: list[set[Item]], data: Iterable[InputItem]) -> list[set[Item]]:
        for x in data:
            if not chart[-1]:
                break
            chart = self.step(chart, x)
        return chart

    def is_viable(self, chart: list[set[Item]]) -> bool:
        return bool(chart[-1])

    def is_complete(self, chart: list[set[Item]]) -> bool:
        return any(self.prods[p][0] == self.start and dot == len(self.prods[p][1]) and o == 0
                   for (p, dot, o) in chart[-1])

    def fullmatch(self, data: Iterable[InputItem]) -> bool:
        return self.is_complete(self.feed(self.initial(), data))

    def is_viable_prefix(self, data: Iterable[InputItem]) -> bool:
        return self.is_viable(self.feed(self.initial(), data))


def _matches(sym: Symbol, x: InputItem) -> bool:
    if isinstance(sym, int):
        return isinstance(x, int) and (sym >> x) & 1 == 1
    if isinstance(sym, tuple):
        return isinstance(x, tuple) and x[1] == sym[1]
    return False
