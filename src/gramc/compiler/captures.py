"""The capture grammar an artifact carries when its source names captures (llguidance Lark
``[capture]`` / ``[capture="name"]``): the lowered grammar as a plain context-free grammar over
bytes and special tokens, which :mod:`gramc.runtime.captures` parses the committed text with.

Only grammars with captures get one (``meta["captures"]``); every other artifact is unchanged.
The JSON form (the runtime cannot import the compiler):

- ``rules``: a list of nonterminals, each a list of alternatives, each a list of symbols:
  ``["r", k]`` nonterminal ``k``, ``["b", "<hex>"]`` a byte class (the 256-bit set as hex),
  ``["t", id]`` a special token;
- ``start``: the start nonterminal; ``names``: ``[[k, capture name], ...]``;
- ``unsupported``: captures gramc cannot report exactly (asking for captures then raises).

>>> from gramc.compiler.ir import Grammar, Ref, literal, seq
>>> g = Grammar({"s": seq(literal(b"a"), Ref("r")), "r": literal(b"b")}, "s", captures={"r": "x"})
>>> capture_grammar(g)["names"]
[[1, 'x']]
"""

from __future__ import annotations

from typing import Any

from gramc.compiler.ir import EMPTY, NOTHING, Alt, Bytes, Expr, Grammar, Machine, Ref, Repeat, Seq, Token
from gramc.errors import LimitExceededError

__all__ = ["capture_grammar", "MAX_CAPTURE_SYMBOLS"]

#: The most symbols a capture grammar may hold (counted repetitions are written out).
MAX_CAPTURE_SYMBOLS = 200_000


class _Writer:
    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        self.index = {name: i for i, name in enumerate(grammar.rules)}
        self.rules: list[list[list[list[Any]]]] = [[] for _ in grammar.rules]
        self.memo: dict[Expr, list[list[Any]]] = {}
        self.size = 0

    def fresh(self, alternatives: list[list[list[Any]]]) -> list[Any]:
        self.rules.append(alternatives)
        self.size += sum(len(a) for a in alternatives) + 1
        if self.size > MAX_CAPTURE_SYMBOLS:
            raise LimitExceededError("max_capture_symbols", self.size, MAX_CAPTURE_SYMBOLS,
                                     "the capture grammar (counted repetitions written out)")
        return ["r", len(self.rules) - 1]

    def symbols(self, e: Expr) -> list[list[Any]]:
        """The symbols of ``e`` in a sequence (a nonterminal where it has alternatives)."""
        found = self.memo.get(e)
        if found is not None:
            return found
        out: list[list[Any]]
        if e is EMPTY:
            out = []
        elif isinstance(e, Bytes):
            out = [["b", format(e.mask, "x")]]
        elif isinstance(e, Ref):
            out = [["r", self.index[e.name]]]
        elif isinstance(e, Token):
            out = [["t", e.id]]
        elif isinstance(e, Seq):
            out = [s for item in e.items for s in self.symbols(item)]
        elif isinstance(e, Alt):
            out = [self.fresh([self.symbols(item) for item in e.items])]
        elif e is NOTHING:
            out = [self.fresh([])]
        elif isinstance(e, Repeat):
            out = self.repeat(e)
        elif isinstance(e, Machine):
            out = [self.machine(e)]
        else:  # TokenName: resolved before a compile gets here
            raise TypeError(f"cannot write {type(e).__name__} into a capture grammar")
        self.memo[e] = out
        return out

    def machine(self, e: Machine) -> list[Any]:
        """A :class:`Machine` as a right-linear grammar: one nonterminal per state, an
        alternative per transition (its bytes, then the target's nonterminal), an empty one
        where the state accepts."""
        base = len(self.rules)
        self.rules.extend([] for _ in e.accept)
        for q, (edges, final) in enumerate(zip(e.edges, e.accept)):
            alts: list[list[list[Any]]] = [[["b", format(mask, "x")], ["r", base + t]] for mask, t in edges]
            if final:
                alts.append([])
            self.rules[base + q] = alts
            self.size += sum(len(a) for a in alts) + 1
        if self.size > MAX_CAPTURE_SYMBOLS:
            raise LimitExceededError("max_capture_symbols", self.size, MAX_CAPTURE_SYMBOLS,
                                     "the capture grammar (a byte automaton written out)")
        return ["r", base + e.start]

    def repeat(self, e: Repeat) -> list[list[Any]]:
        item = self.symbols(e.item)
        self.size += len(item) * e.min
        if e.max is None:  # star := item star | ε
            star = self.fresh([])
            self.rules[star[1]] += [item + [star], []]
            tail = [star]
        else:  # up to k more: opt_k := item opt_{k-1} | ε
            tail = []
            for _ in range(e.max - e.min):
                tail = [self.fresh([item + tail, []])]
        return item * e.min + tail


def capture_grammar(grammar: Grammar) -> dict[str, Any]:
    """The JSON capture grammar of ``grammar`` (module doc). One too large to write out
    (:data:`MAX_CAPTURE_SYMBOLS`) still compiles: its captures are listed as unsupported."""
    w = _Writer(grammar)
    try:
        for name, body in grammar.rules.items():
            w.rules[w.index[name]] = [w.symbols(body)]
    except LimitExceededError as err:
        why = f"the capture grammar is too large ({err})"
        return {"rules": [[]], "start": 0, "names": [],
                "unsupported": {**{n: why for n in grammar.captures.values()}, **grammar.uncaptured}}
    return {"rules": w.rules, "start": w.index[grammar.start],
            "names": [[w.index[r], n] for r, n in grammar.captures.items()],
            "unsupported": dict(grammar.uncaptured)}
