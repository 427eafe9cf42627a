"""Counted repetitions of a regular grammar: ``x{m,n}`` as a counter, not ``n`` copies of ``x``.

:func:`build_counted_dfa` looks for bounded repetitions whose unrolled copies would cost many
DFA states (outermost first), builds each repetition's item as a DFA once, and the rest of the
grammar as an outer DFA in which each such repetition is a *call* (the NFA's call edges, one
column per counter). Where the item or the places it is called from do not read
unambiguously (see :mod:`gramc.automata.counted`), it returns None and the grammar is unrolled
as before.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.counted import MAX_COUNTED_STATES, CountedDFA, item_is_countable, unambiguous
from gramc.automata.tables import DEAD, DFATable
from gramc.compiler.dfa import build_dfa, byte_classes, determinize, merge_byte_columns
from gramc.compiler.ir import EMPTY, Expr, Grammar, Ref, Repeat, Seq, Token, TokenName, alt, postorder, repeat, seq
from gramc.compiler.nfa import build_nfa, thompson_size
from gramc.compiler.passes import rewrite
from gramc.limits import DEFAULT_LIMITS, Deadline, Limits

#: A repetition is counted when unrolling it would make more than this many DFA states
#: (its maximum times its item's live states): below it, the unrolled states bind in
#: milliseconds and keep the artifact a plain DFA (eager rows, the GPU batch path).
COUNT_MIN_STATES = 1024
#: Whole grammars are built inline while their Thompson NFA is at most this part of the limit
#: (as :data:`gramc.compiler.pipeline.INLINE_NFA_FRACTION`).
_INLINE_NFA_FRACTION = 8


def build_counted_dfa(grammar: Grammar, limits: Limits = DEFAULT_LIMITS,
                      min_states: int = COUNT_MIN_STATES) -> CountedDFA | None:
    """The :class:`CountedDFA` of a non-recursive grammar whose large bounded repetitions can
    be counted, or None (no such repetition, or one that cannot be read unambiguously)."""
    body = merge_nested_counts(grammar.rules[grammar.start], limits.max_repeat)
    counted = _choose(body, min_states, limits)
    if not counted:
        return None
    names = _fresh_names(grammar, len(counted))
    calls = {name: k for k, name in enumerate(names)}
    calling: dict[Expr, Expr] = {rep: (Ref(name) if rep.min >= 1 else alt(EMPTY, Ref(name)))
                                 for (rep, _), name in zip(counted, names)}
    replaced = rewrite(body, calling.get)
    outer_grammar = Grammar({**grammar.rules, grammar.start: replaced}, grammar.start)
    if thompson_size(outer_grammar, calls) > limits.max_nfa_states // _INLINE_NFA_FRACTION:
        return None
    nfa = build_nfa(outer_grammar, limits, calls)
    if any(t >= 0 for t in nfa.tok):
        return None
    classes = byte_classes(set(nfa.cls) - {0})
    deadline = Deadline(limits.max_compile_seconds)
    delta, accept, start = determinize(nfa, classes, [], len(counted), limits, deadline)
    n_byte = int(classes.max()) + 1
    delta, classes = merge_byte_columns(delta, classes, n_byte)
    n_byte = int(classes.max()) + 1
    calls_live = delta[:, n_byte:] != DEAD
    if (calls_live.sum(axis=1) > 1).any():
        return None  # two counters may start at one place: not one reading
    call_kind = np.where(calls_live.any(axis=1), np.argmax(calls_live, axis=1), -1).astype(np.int32)
    call_next = np.where(call_kind >= 0, delta[np.arange(len(delta)), n_byte + np.maximum(call_kind, 0)], 0)
    outer = DFATable(delta=np.ascontiguousarray(delta[:, :n_byte]), byte_class=classes,
                     token_ids=np.zeros(0, dtype=np.int32), accept=accept, start=start)
    bounds = np.array([[max(rep.min, 1), rep.max] for rep, _ in counted], dtype=np.int64)
    cdfa = CountedDFA(outer, call_kind, call_next.astype(np.int32), tuple(item for _, item in counted), bounds)
    if not len(cdfa.sites) or cdfa.n_states > MAX_COUNTED_STATES or not unambiguous(cdfa):
        return None
    return cdfa


def merged_bounds(inner: Repeat, outer_min: int, outer_max: int) -> tuple[int, int] | None:
    """The bounds of ``x{m1,n1}`` repeated ``{m2,n2}`` times as one repetition ``x{m,n}``,
    or None where the counts do not form one range.

    Language concatenation is associative, so the nested repetition is ``x^j`` for every
    ``j`` in the union of ``[k*m1, k*n1]`` over ``k`` in ``[m2, n2]``. Consecutive ranges
    meet when ``(k+1)*m1 <= k*n1 + 1``, which gets easier as ``k`` grows: checking the
    smallest ``k`` suffices. Both repetitions bounded.
    """
    m1, n1 = inner.min, inner.max
    if n1 is None or n1 < 1:
        return None
    if outer_max > outer_min and (outer_min + 1) * m1 > outer_min * n1 + 1:
        return None
    return m1 * outer_min, n1 * outer_max


def merge_nested_counts(body: Expr, max_repeat: int) -> Expr:
    """``body`` with each bounded repetition of a bounded repetition merged into one, where
    the counts form one range of at most ``max_repeat``: ``((a{1,40}){1,40}){1,40}`` is
    ``a{1,64000}``, one counter. Unrolled, each DFA state of it is a set of NFA states as
    large as its position (the inner counts are ambiguous), gigabytes before a limit fires.
    """
    new: dict[int, Expr] = {}
    changed = False
    for node in postorder(body):
        if isinstance(node, Repeat):
            item = new[id(node.item)]
            inner = item if isinstance(item, Repeat) and node.max is not None else None
            bounds = merged_bounds(inner, node.min, node.max) if inner is not None and node.max is not None else None
            if inner is not None and bounds is not None and bounds[1] <= max_repeat:
                new[id(node)] = repeat(inner.item, *bounds)
                changed = True
            else:
                new[id(node)] = node if item is node.item else repeat(item, node.min, node.max)
        elif node.children() and any(new[id(c)] is not c for c in node.children()):
            parts = [new[id(c)] for c in node.children()]
            new[id(node)] = seq(*parts) if isinstance(node, Seq) else alt(*parts)
        else:
            new[id(node)] = node
    return new[id(body)] if changed else body


def _choose(body: Expr, min_states: int, limits: Limits) -> list[tuple[Repeat, DFATable]]:
    """The repetitions to count, outermost first (nothing inside one is counted), with their
    item DFAs."""
    chosen: list[tuple[Repeat, DFATable]] = []
    seen: set[int] = set()
    stack = [body]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Repeat) and node.max is not None and node.max >= 2:
            item = _item_dfa(node, min_states, limits)
            if item is not None:
                chosen.append((node, item))
                continue
        stack.extend(reversed(node.children()))
    return chosen


def _item_dfa(rep: Repeat, min_states: int, limits: Limits) -> DFATable | None:
    """The item DFA of ``rep`` when counting it pays and is possible, else None."""
    if any(isinstance(n, (Ref, Token, TokenName)) for n in postorder(rep.item)):
        return None
    if rep.max is None:
        return None
    size = thompson_size(Grammar.single(rep.item))
    if size * rep.max < min_states or size > limits.max_nfa_states // _INLINE_NFA_FRACTION:
        return None  # Thompson states bound the DFA's from above... and from below, nearly
    item = build_dfa(Grammar.single(rep.item), limits)
    if not item_is_countable(item) or (item.n_states - 1) * rep.max < min_states:
        return None
    return item


def _fresh_names(grammar: Grammar, n: int) -> list[str]:
    """``n`` rule names no rule of ``grammar`` has (the counters' call targets)."""
    out: list[str] = []
    k = 0
    while len(out) < n:
        name = f"_count{k}"
        if name not in grammar.rules:
            out.append(name)
        k += 1
    return out


