"""Recursive grammar -> PDA table: one minimal DFA per remaining rule, with call columns.

After the passes, the grammar's rules are the start rule and the recursive ones. Rules that
are recursive but do not call themselves directly and are used once (JSON's ``object`` and
``array`` inside ``value``) are inlined too, so fewer rule boundaries remain: masks are
exact and precomputed inside a rule, and only depend on the parse stack across boundaries.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD
from gramc.compiler.dfa import byte_classes, determinize, merge_byte_columns
from gramc.compiler.ir import Expr, Grammar, Ref, walk
from gramc.compiler.nfa import build_nfa
from gramc.compiler.passes import rewrite
from gramc.limits import DEFAULT_LIMITS, Deadline, Limits

#: Rules up to this many IR nodes are inlined even when used more than once.
INLINE_SMALL = 64


def _uses(g: Grammar) -> dict[str, int]:
    count = {n: 0 for n in g.rules}
    for body in g.rules.values():
        for node in walk(body):
            if isinstance(node, Ref):
                count[node.name] += 1
    return count


def _size(e: Expr) -> int:
    return sum(1 for _ in walk(e))


def collapse_recursion(g: Grammar) -> Grammar:
    """Inline recursive rules that do not refer to themselves directly and are used once
    (or are small), until none is left; the start rule always stays a rule."""
    rules = dict(g.rules)
    while True:
        uses = _uses(Grammar(rules, g.start))
        pick = next((n for n, body in rules.items()
                     if n != g.start and n not in {r.name for r in walk(body) if isinstance(r, Ref)}
                     and (uses[n] <= 1 or _size(body) <= INLINE_SMALL)), None)
        if pick is None:
            return Grammar(rules, g.start)
        body = rules.pop(pick)
        rules = {n: rewrite(b, lambda e: body if e == Ref(pick) else None) for n, b in rules.items()}


def build_pda(grammar: Grammar, limits: Limits = DEFAULT_LIMITS, collapse: bool = True,
              deadline: Deadline | None = None) -> PDATable:
    """The PDA table of a grammar whose rules (after the passes) are the ones to keep.

    With ``collapse`` (the default) recursive rules used once are inlined first; without it
    every rule stays a rule, which keeps each rule's DFA small. ``deadline`` defaults to a
    fresh one of ``limits.max_compile_seconds``.
    """
    deadline = deadline or Deadline(limits.max_compile_seconds, "building the PDA")
    g = collapse_recursion(grammar) if collapse else grammar
    names = [g.start] + [n for n in g.rules if n != g.start]
    calls = {n: i for i, n in enumerate(names)}
    nfas = [build_nfa(Grammar(g.rules, n), limits, calls) for n in names]
    classes = byte_classes({m for nfa in nfas for m in nfa.cls} - {0})
    token_ids = sorted({t for nfa in nfas for t in nfa.tok if t >= 0})
    parts = [determinize(nfa, classes, token_ids, len(names), limits, deadline) for nfa in nfas]
    n_nodes = 1 + sum(len(accept) - 1 for _, accept, _ in parts)
    limits.check_memory(4 * n_nodes * parts[0][0].shape[1],
                        f"the PDA node table of {n_nodes:,} nodes x {parts[0][0].shape[1]} columns")
    return _stack(parts, classes, token_ids, tuple(names))


def _stack(parts, classes: np.ndarray, token_ids: list[int], names: tuple[str, ...]) -> PDATable:
    """Put the rules' DFAs into one node space: node 0 dead, then each rule's live states."""
    sizes = [len(accept) - 1 for _, accept, _ in parts]
    base = np.concatenate([[1], 1 + np.cumsum(sizes)[:-1]]).astype(np.int64)
    n_nodes = 1 + sum(sizes)
    n_cols = parts[0][0].shape[1]
    delta = np.zeros((n_nodes, n_cols), dtype=np.int32)
    accept = np.zeros(n_nodes, dtype=bool)
    node_rule = np.full(n_nodes, -1, dtype=np.int32)
    rule_start = np.zeros(len(parts), dtype=np.int32)
    for r, (d, acc, start) in enumerate(parts):
        lo, hi = base[r], base[r] + sizes[r]
        local = d[1:]
        delta[lo:hi] = np.where(local != DEAD, local + (lo - 1), DEAD)
        accept[lo:hi] = acc[1:]
        node_rule[lo:hi] = r
        rule_start[r] = lo + start - 1
    nbc = int(classes.max()) + 1
    delta, classes = merge_byte_columns(delta, classes, nbc)
    return PDATable(delta=delta, byte_class=classes, token_ids=np.array(token_ids, dtype=np.int32),
                    accept=accept, node_rule=node_rule, rule_start=rule_start, start_rule=0,
                    rule_names=names)
