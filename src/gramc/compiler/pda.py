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
from gramc.compiler.dfa import byte_classes, determinize_used, merge_byte_columns
from gramc.compiler.ir import Expr, Grammar, Ref, Repeat, rule_refs, walk
from gramc.compiler.nfa import build_nfa
from gramc.compiler.passes import rewrite
from gramc.limits import DEFAULT_LIMITS, Deadline, Limits

#: Rules up to this many IR nodes are inlined even when used more than once.
INLINE_SMALL = 64


def _size(e: Expr) -> int:
    return sum(1 for _ in walk(e))


def collapse_recursion(g: Grammar) -> Grammar:
    """Inline recursive rules that do not refer to themselves directly and are used once
    (or are small), until none is left; the start rule always stays a rule.

    A rule's uses are the rules that refer to it. The choices are made on the reference
    sets alone: inlining a rule gives its users its references. The bodies are built once
    at the end, each inlined rule's callees first, so a cycle of n rules collapses in time
    about its final size (rewriting the users' bodies at every step was quadratic: a
    1,000-rule cycle took 36 s). A body is built early only when its size decides whether
    a rule used more than once is small enough to inline.
    """
    refs = {n: rule_refs(body) for n, body in g.rules.items()}
    users: dict[str, set[str]] = {n: set() for n in g.rules}  # the rules that refer to each
    for name, used in refs.items():
        for ref in used:
            users[ref].add(name)
    inlined: set[str] = set()
    sizes: dict[str, int] = {}  # of the current bodies of rules nothing was inlined into since

    def small(name: str) -> bool:
        if name not in sizes:
            sizes[name] = _size(_inline_bodies(g.rules, inlined, [name])[name])
        return sizes[name] <= INLINE_SMALL

    candidates = [n for n in g.rules if n != g.start]
    while True:
        pick = next((n for n in candidates if n not in inlined and n not in refs[n]
                     and (len(users[n]) <= 1 or small(n))), None)
        if pick is None:
            kept = [n for n in g.rules if n not in inlined]
            return Grammar(_inline_bodies(g.rules, inlined, kept), g.start)
        inlined.add(pick)
        picked = refs.pop(pick)
        for ref in picked:
            users[ref].discard(pick)
        for name in users.pop(pick):
            sizes.pop(name, None)
            for ref in picked:
                users[ref].add(name)
            refs[name] = (refs[name] - {pick}) | picked
        users[pick] = set()


def _inline_bodies(rules: dict[str, Expr], inlined: set[str], names: list[str]) -> dict[str, Expr]:
    """The bodies of ``names`` with every reference to a rule of ``inlined`` replaced by that
    rule's body (itself built so), each inlined rule built once, callees first (explicit
    stack: the inlined rules form chains as long as the grammar)."""
    built: dict[str, Expr] = {}
    for root in names:
        stack = [(root, False)]
        while stack:
            name, callees_done = stack.pop()
            if name in built:
                continue
            if callees_done:
                built[name] = rewrite(rules[name], lambda e: built[e.name] if isinstance(e, Ref)
                                      and e.name in inlined else None)
            else:
                stack.append((name, True))
                stack.extend((ref, False) for ref in rule_refs(rules[name]) & inlined if ref not in built)
    return {n: built[n] for n in names}


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
    nfas = {n: build_nfa(Grammar(g.rules, n), limits, calls) for n in names if _chain(g.rules[n]) is None}
    classes = byte_classes({m for nfa in nfas.values() for m in nfa.cls} - {0})
    token_ids = sorted({t for nfa in nfas.values() for t in nfa.tok if t >= 0})
    first_call = int(classes.max()) + 1 + len(token_ids)
    parts = []
    held = 0  # the rule DFAs built so far stay alive (on their used columns) until stacked
    for name in names:
        nfa = nfas.pop(name, None)
        chain = _chain(g.rules[name])
        if chain is not None:
            item, lo, hi = chain
            parts.append(_chain_dfa(item, lo, hi, first_call, calls))
        else:
            assert nfa is not None  # built above for every rule but the chains
            parts.append(determinize_used(nfa, classes, token_ids, limits, deadline, held,
                                          what=f"the DFA of rule {name!r}"))
        held += parts[-1][0].nbytes
    del nfas
    n_cols = first_call
    n_nodes = 1 + sum(len(accept) - 1 for _, accept, _, _ in parts)
    limits.check_memory(4 * n_nodes * n_cols + held, f"the PDA node table of {n_nodes:,} nodes x {n_cols} columns")
    return _stack(parts, n_cols, classes, token_ids, tuple(names))


def _chain(body: Expr) -> tuple[str, int, int] | None:
    """``(item rule, min, max)`` where a rule's body is a bounded repetition of one call (a
    long ``maxLength`` chain: :data:`gramc.compiler.passes.MIN_CHAIN_RULE`), else None."""
    if isinstance(body, Repeat) and isinstance(body.item, Ref) and body.max is not None:
        return body.item.name, body.min, body.max
    return None


def _chain_dfa(item: str, lo: int, hi: int, first_call: int,
               calls: dict[str, int]) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """The canonical minimal DFA of ``item{lo,hi}`` as :func:`determinize_used` gives it:
    positions ``1 .. hi + 1`` (iterations done plus one), each calling ``item`` and going
    on to the next, accepting from ``lo`` done. Every position is a different count, so
    the chain is minimal. Built in time linear in ``hi``, it is not bounded by
    ``max_dfa_states`` (a subset construction's guard): ``hi`` is bounded by ``max_repeat``
    where the repetition was written, and the chain's nodes by the node table's
    ``max_memory`` check."""
    delta = np.zeros((hi + 2, 1), dtype=np.int32)
    delta[1 : hi + 1, 0] = np.arange(2, hi + 2, dtype=np.int32)
    accept = np.zeros(hi + 2, dtype=bool)
    accept[1 + lo :] = True
    return delta, accept, 1, np.array([first_call + calls[item]], dtype=np.int64)


def _stack(parts, n_cols: int, classes: np.ndarray, token_ids: list[int], names: tuple[str, ...]) -> PDATable:
    """Put the rules' DFAs (each on its used columns) into one node space: node 0 dead, then
    each rule's live states; their read columns (the first ``n_cols``) into one dense table,
    their call columns into the sparse call arrays. A part is dropped once copied."""
    sizes = [len(accept) - 1 for _, accept, _, _ in parts]
    base = np.concatenate([[1], 1 + np.cumsum(sizes)[:-1]]).astype(np.int64)
    n_nodes = 1 + sum(sizes)
    delta = np.zeros((n_nodes, n_cols), dtype=np.int32)
    accept = np.zeros(n_nodes, dtype=bool)
    node_rule = np.full(n_nodes, -1, dtype=np.int32)
    rule_start = np.zeros(len(parts), dtype=np.int32)
    call_nodes, call_rules, call_returns = [], [], []
    for r in range(len(parts)):
        d, acc, start, used = parts[r]
        parts[r] = None
        lo, hi = base[r], base[r] + sizes[r]
        local = d[1:]
        reads = used < n_cols
        delta[lo:hi, used[reads]] = np.where(local[:, reads] != DEAD, local[:, reads] + (lo - 1), DEAD)
        calls = local[:, ~reads]
        rows, cols = np.nonzero(calls != DEAD)  # by node, then rule (``used`` ascends)
        call_nodes.append(rows + lo)
        call_rules.append(used[~reads][cols] - n_cols)
        call_returns.append(calls[rows, cols].astype(np.int64) + (lo - 1))
        accept[lo:hi] = acc[1:]
        node_rule[lo:hi] = r
        rule_start[r] = lo + start - 1
    nbc = int(classes.max()) + 1
    delta, classes = merge_byte_columns(delta, classes, nbc)
    nodes = np.concatenate(call_nodes)
    return PDATable(delta=delta, byte_class=classes, token_ids=np.array(token_ids, dtype=np.int32),
                    accept=accept, node_rule=node_rule, rule_start=rule_start, start_rule=0,
                    rule_names=names,
                    call_indptr=np.concatenate([[0], np.cumsum(np.bincount(nodes, minlength=n_nodes))]).astype(np.int64),
                    call_rule=np.concatenate(call_rules).astype(np.int32),
                    call_return=np.concatenate(call_returns).astype(np.int32))
