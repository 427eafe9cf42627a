"""Budget-aware masks: with ``n`` tokens left, only the tokens after which the output can
still be completed within ``n - 1`` more.

A budget counts every token still to be committed, the end-of-sequence token included: with
``n`` left, EOS is allowed where the output is complete and ``n >= 1``, and any other token
only if the output after it can be completed in ``n - 1`` tokens (``n - 2`` and then EOS). A
vocabulary without EOS ids ends where the output is complete: there the completion is
``n - 1`` tokens that reach an accepting state.

**DFA artifacts: exact.** :class:`DFABudget` finds, per state, the fewest tokens that reach an
accepting state (a backward breadth-first search over the token transitions, linear in the
rows once their (state, next state) pairs are made distinct), on the first budgeted mask: no
artifact stores them (no format change) and an artifact never asked for a budget never pays
for them. A lazy table binds every state's row first (the search needs every transition).
Per state the allowed tokens sorted by their target's distance make a budget cut a prefix;
the cut rows are cached by (state, prefix length).

**Counted DFA artifacts: exact**, by distances computed per counter layer with periodic
stretches (:mod:`gramc.runtime.budget_counted`).

**PDA artifacts: a sound upper bound.** The fewest tokens from a configuration needs the
stack and the vocabulary together; :class:`PDABudget` uses the fewest *single-byte tokens*
(and grammar special tokens, one token each) that complete it: per node, the fewest such
steps to its rule's end, a call costing its rule's fewest (Knuth's generalisation of
Dijkstra's algorithm over the PDA), and per configuration the least, over the stacks it
holds, of the sum over their frames. A byte-level vocabulary (GPT-2, Llama 3, Qwen: every byte
is a token) makes it the fewest bytes; where some byte is no token, completions spelled with
it are not counted (a node that needs one has no bound, and is never allowed under a
budget). Since a completion of ``b`` such steps is ``b`` tokens, a token is allowed when the
bound after it fits: the output can always be finished within the budget, but a token that
could finish with longer tokens only may be refused. The bound after a token comes from the
configuration the stack DFA (:mod:`gramc.runtime.pda_stack_dfa`) reaches by the token's bytes,
or, for left-recursive grammars (and states the stack DFA declines), from the Earley chart.
"""

from __future__ import annotations

import heapq
import operator
import weakref
from typing import Any, Sequence

import numpy as np

from gramc.automata.tables import DEAD
from gramc.bitmask import set_bits, unpack_row
from gramc.errors import GramcError
from gramc.runtime.cache import LRUCache

#: "No completion": larger than any budget (and than any sum of a few of them).
INF = 1 << 60

_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def check_budget(budget: Any) -> int:
    """``budget`` as a number of tokens (an int >= 0), or a clear TypeError / ValueError."""
    if isinstance(budget, bool):
        raise TypeError(f"a token budget is an int, got {budget!r}")
    try:
        n = operator.index(budget)
    except TypeError:
        raise TypeError(f"a token budget is an int (tokens left), got {budget!r}") from None
    if n < 0:
        raise ValueError(f"a token budget must be >= 0, got {n}")
    return n


def budget_of(table: Any) -> Any:
    """The budget masks of a token table (made on first use and kept with the table): a
    :class:`DFABudget`, a :class:`PDABudget` or a
    :class:`~gramc.runtime.budget_counted.CountedBudget`."""
    found = _tables.get(table)
    if found is None:
        from gramc.runtime.budget_counted import CountedBudget
        from gramc.runtime.counted import CountedTokenTable
        from gramc.runtime.pda_tokens import PDATokenTable
        from gramc.runtime.token_table import TokenTable

        if isinstance(table, TokenTable):
            found = DFABudget(table)
        elif isinstance(table, PDATokenTable):
            found = PDABudget(table)
        elif isinstance(table, CountedTokenTable):
            found = CountedBudget(table)
        else:
            raise GramcError(f"token budgets are not supported for {type(table).__name__}")
        _tables[table] = found
    return found


def budget_stats(table: Any) -> dict[str, dict[str, int]]:
    """The budget caches of ``table`` (none before its first budgeted mask)."""
    found = _tables.get(table)
    return {} if found is None else found._cuts.stats()


class _Cuts:
    """Packed rows cut to a prefix of a sorted token order, by (state key, prefix length),
    in an LRU bounded by the table's ``RuntimeLimits.budget_rows`` (re-read when the table's
    limits change)."""

    def __init__(self, table: Any):
        self._table = table
        self._limits: Any = None
        self._check()

    def _check(self) -> None:
        if self._table.limits is not self._limits:
            self._limits = self._table.limits
            self.orders = LRUCache(self._limits.budget_rows)  # sorted (ids, distances) by state key
            self.rows = LRUCache(self._limits.budget_rows)  # cut rows by (state key, prefix)

    def clear(self) -> None:
        self.orders.clear()
        self.rows.clear()

    def stats(self) -> dict[str, dict[str, int]]:
        return {"budget_orders": self.orders.stats(), "budget_rows": self.rows.stats()}


def _cut(words: np.ndarray, ids: np.ndarray, k: int, eos: np.ndarray | None) -> np.ndarray:
    """A packed row of the first ``k`` of ``ids`` and ``eos`` (when not None), read-only."""
    row = np.zeros_like(words)
    set_bits(row, ids[:k])
    if eos is not None:
        set_bits(row, eos)
    row.flags.writeable = False
    return row


class DFABudget:
    """Exact budget masks of a DFA token table (module doc)."""

    def __init__(self, table: Any):
        self.table = table
        self.eos = np.array(table.eos_ids, dtype=np.int64)
        self._dist: tuple[np.ndarray, np.ndarray] | None = None  # see _token_distances
        self._csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._cuts = _Cuts(table)

    def distances(self) -> np.ndarray:
        """Per state, the fewest tokens (EOS not counted) that reach an accepting state;
        :data:`INF` where none does (the dead state)."""
        if self._dist is None:
            self._dist = _token_distances(self.table.dfa, *self._rows())
        return self._dist[0]

    def _rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._csr is None:
            self._csr = self.table.csr()  # binds every state of a lazy table
        return self._csr

    def to_finish(self, q: int) -> int:
        """Fewest tokens to finish from state ``q``, EOS included where the vocabulary has
        one (:data:`INF` if none)."""
        d = int(self.distances()[q])
        return d if d >= INF else d + (len(self.eos) > 0)

    def words(self, q: int, n: int) -> np.ndarray:
        """The packed row of state ``q`` with ``n`` tokens left (read-only)."""
        table = self.table
        dist = self.distances()
        assert self._dist is not None
        limit = n - 1 - (len(self.eos) > 0)  # the distance a token's target may have
        if n >= 1 and limit >= self._dist[1][q]:
            return table.words(q)  # every allowed token fits
        self._cuts._check()
        eos = self.eos if n >= 1 and table.dfa.accept[q] else None
        order = self._cuts.orders.get(q)
        if order is None:
            indptr, ids, nxt = self._rows()
            a, b = indptr[q], indptr[q + 1]
            d = dist[nxt[a:b]]
            o = np.argsort(d, kind="stable")
            order = self._cuts.orders.put(q, (ids[a:b][o], d[o]))
        k = int(np.searchsorted(order[1], limit, side="right")) if n >= 1 else 0
        row = self._cuts.rows.get((q, k, eos is not None))
        if row is None:
            row = self._cuts.rows.put((q, k, eos is not None), _cut(table.words(q), order[0], k, eos))
        return row


def _token_distances(dfa: Any, indptr: np.ndarray, ids: np.ndarray, nxt: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(per state the fewest tokens to an accepting state, per state the largest distance
    of its tokens' targets): a breadth-first search backwards over the distinct
    (state, next state) pairs of the token rows."""
    s = dfa.n_states
    counts = np.diff(indptr)
    src = np.repeat(np.arange(s, dtype=np.int64), counts)
    pairs = np.unique(nxt.astype(np.int64) * s + src)  # by target, then source
    pred = pairs % s
    starts = np.searchsorted(pairs // s, np.arange(s + 1))
    dist = np.full(s, INF, dtype=np.int64)
    frontier = np.flatnonzero(dfa.accept)
    frontier = frontier[frontier != DEAD]
    dist[frontier] = 0
    level = 0
    while len(frontier):
        level += 1
        lo, hi = starts[frontier], starts[frontier + 1]
        sizes = hi - lo
        if not sizes.sum():
            break
        at = np.repeat(lo - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) + np.arange(sizes.sum())
        found = np.unique(pred[at])
        found = found[dist[found] == INF]
        dist[found] = level
        frontier = found
    target = dist[nxt] if len(nxt) else np.zeros(0, dtype=np.int64)
    worst = np.full(s, -1, dtype=np.int64)
    nonempty = counts > 0
    if len(nxt):
        worst[nonempty] = np.maximum.reduceat(target, indptr[:-1][nonempty])
    return dist, worst


class PDABudget:
    """Budget masks of a PDA token table from a sound bound (module doc)."""

    def __init__(self, tokens: Any):
        self.tokens = tokens
        self.parser = tokens.parser
        vocab = tokens.vocab
        self.eos = np.array(vocab.eos_ids, dtype=np.int64)
        special = vocab.special_ids
        #: The bytes that are tokens on their own (every byte in a byte-level vocabulary).
        self.byte_tokens = frozenset(t[0] for i, t in enumerate(vocab.tokens) if len(t) == 1 and i not in special)
        self.cost = node_costs(tokens.table, self.byte_tokens)
        self._special = np.array(sorted(special), dtype=np.int64)
        self._cuts = _Cuts(tokens)
        self._ids_of = (-1, -1)  # (parser generation, stack-DFA resets) the id costs are of
        self._cont_cost: list[int] = []
        self._state_cost: dict[int, int] = {}
        self._gen = -1
        #: False: take every bound from the Earley chart (tests check the stack DFA agrees).
        self.use_stack = True

    # ------------------------------------------------------------ bounds

    def to_finish(self, chart: Any) -> int:
        """The bound on the tokens to finish from ``chart``, EOS included where the
        vocabulary has one (:data:`INF` if there is none)."""
        b = chart_bound(self.parser, self.cost, chart)
        return b if b >= INF else b + (len(self.eos) > 0)

    def _after(self, chart: Any, key: int | None, ids: np.ndarray) -> np.ndarray:
        """The bound after each token of ``ids`` (allowed tokens, EOS excluded)."""
        from gramc.runtime.pda_tokens import _Overlay

        out = np.full(len(ids), INF, dtype=np.int64)
        special = np.isin(ids, self._special)
        for i in np.flatnonzero(special).tolist():
            s = self.parser.scan_token(chart, int(ids[i]))
            if s is not None:
                out[i] = chart_bound(self.parser, self.cost, _Overlay(chart, [s]))
        byte_ids = np.flatnonzero(~special)
        if not len(byte_ids):
            return out
        if self.use_stack and key is not None and self.tokens._stack_usable:
            from gramc.runtime.pda_stack_dfa import TooLarge

            stack = self.tokens._stack_dfa()
            try:
                states = stack.end_states(key, ids[byte_ids])
            except TooLarge:
                pass
            else:
                out[byte_ids] = self._state_costs(stack, states)
                return out
        out[byte_ids] = self._by_chart(chart, ids[byte_ids])
        return out

    def _by_chart(self, chart: Any, ids: np.ndarray) -> np.ndarray:
        """Bounds after byte tokens by the Earley parser, the chart's costs shared."""
        from gramc.runtime.pda_tokens import _Overlay

        memo: dict[int, dict[int, int]] = {}  # positions of ``chart``: shared by every token
        out = np.full(len(ids), INF, dtype=np.int64)
        token_bytes, parser, base = self.tokens.token_bytes, self.parser, len(chart)
        for i, t in enumerate(ids.tolist()):
            ext: list[Any] = []
            view = _Overlay(chart, ext)
            for b in token_bytes[t]:
                s = parser.scan_byte(view, b)
                if s is None:
                    break
                ext.append(s)
            else:
                out[i] = chart_bound(parser, self.cost, view, memo)
                for j in range(base, base + len(ext)):
                    memo.pop(j, None)  # the token's own positions
        return out

    def _state_costs(self, stack: Any, states: np.ndarray) -> np.ndarray:
        """The bound of each stack-DFA state of ``states`` (memoised while their ids hold)."""
        now = (self.parser.generation, stack.resets)
        if now != self._ids_of:
            self._ids_of, self._cont_cost, self._state_cost = now, [], {}
        cost, memo = self.cost, self._state_cost
        out = np.empty(len(states), dtype=np.int64)
        for i, s in enumerate(states.tolist()):
            c = memo.get(s)
            if c is None:
                configs = stack.configs(s)
                self._extend_conts(max((k for _, k in configs), default=-1))
                conts = self._cont_cost
                c = memo[s] = min((cost[n] + conts[k] for n, k in configs), default=INF)
            out[i] = c
        return out

    def _extend_conts(self, upto: int) -> None:
        """Cost of every interned continuation up to id ``upto``: a continuation's members are
        interned before it, so ascending ids see their members' costs."""
        conts, cost, interned = self._cont_cost, self.cost, self.parser.interned
        for k in range(len(conts), upto + 1):
            best = INF
            for w in interned(k):
                if w[0] < 0:  # TOP: the top level's return, nothing left to read
                    best = 0
                    break
                best = min(best, cost[w[0]] + conts[w[1]])
            conts.append(min(best, INF))

    # ------------------------------------------------------------ masks

    def words(self, chart: Any, n: int) -> np.ndarray:
        """The packed row of configuration ``chart`` with ``n`` tokens left (read-only)."""
        tokens = self.tokens
        plain = tokens.words(chart)
        key = tokens._key(chart)
        cuts = self._cuts
        cuts._check()
        if self.parser.generation != self._gen:
            self._gen = self.parser.generation
            cuts.clear()
        complete = n >= 1 and len(self.eos) > 0 and self.parser.is_complete(chart[-1])
        eos = self.eos if complete else None
        limit = n - 1 - (len(self.eos) > 0)
        order = cuts.orders.get(key) if key is not None else None
        if order is None:
            ids = np.flatnonzero(unpack_row(plain, len(plain) * 32))
            ids = ids[~np.isin(ids, self.eos)]
            after = self._after(chart, key, ids)
            o = np.argsort(after, kind="stable")
            order = (ids[o], after[o])
            if key is not None:
                cuts.orders.put(key, order)
        k = int(np.searchsorted(order[1], limit, side="right")) if n >= 1 else 0
        if k == len(order[0]) and n >= 1:
            return plain  # every allowed token fits (EOS is in the plain row where complete)
        row = cuts.rows.get((key, k, complete)) if key is not None else None
        if row is None:
            row = _cut(plain, order[0], k, eos)
            if key is not None:
                cuts.rows.put((key, k, complete), row)
        return row


def node_costs(table: Any, byte_tokens: frozenset[int]) -> list[int]:
    """Per node, the fewest steps to its rule's end: a byte of ``byte_tokens`` or a special
    token is one, a call is its rule's fewest (from the rule's start). Knuth's generalisation
    of Dijkstra's algorithm: a node is final when popped; a call edge is relaxed once both
    its callee's start and its return node are final. :data:`INF` where there is none."""
    n_nodes = table.n_nodes
    nb = table.n_byte_classes
    usable = np.zeros(nb + len(table.token_ids), dtype=bool)
    for b in byte_tokens:
        usable[int(table.byte_class[b])] = True
    usable[nb:] = True
    plain = table.delta[:, : nb + len(table.token_ids)]
    src, col = np.nonzero((plain != DEAD) & usable[None, :])
    back: list[list[int]] = [[] for _ in range(n_nodes)]  # node -> nodes one step before it
    for s, t in zip(src.tolist(), plain[src, col].tolist()):
        back[t].append(s)
    callers: list[list[tuple[int, int]]] = [[] for _ in range(n_nodes)]  # node -> (caller, other part)
    rule_start = table.rule_start.tolist()
    for n, r, ret in zip(*(a.tolist() for a in table.call_entries())):
        start = rule_start[r]
        callers[start].append((n, ret))
        if ret != start:
            callers[ret].append((n, start))
    cost = [INF] * n_nodes
    done = [False] * n_nodes
    heap = [(0, int(q)) for q in np.flatnonzero(table.accept) if q != DEAD]
    for _, q in heap:
        cost[q] = 0
    heapq.heapify(heap)
    while heap:
        c, q = heapq.heappop(heap)
        if done[q]:
            continue
        done[q] = True
        for p in back[q]:
            if not done[p] and c + 1 < cost[p]:
                cost[p] = c + 1
                heapq.heappush(heap, (c + 1, p))
        for p, other in callers[q]:
            if done[p] or not done[other]:
                continue
            total = c + cost[other]
            if total < cost[p]:
                cost[p] = total
                heapq.heappush(heap, (total, p))
    return cost


def chart_bound(parser: Any, cost: Sequence[int], chart: Any,
                memo: dict[int, dict[int, int]] | None = None) -> int:
    """The least, over the stacks the chart's last set holds, of the cost of finishing every
    frame: per item ``(node, origin)``, ``cost[node]`` plus what its rule's return costs at
    ``origin`` (the cheapest waiting item's node cost plus its own return, down to the top
    level). ``memo`` keeps the per-position return costs between calls on one chart."""
    memo = {} if memo is None else memo
    items = chart[len(chart) - 1].items
    for j in {j for _, j in items}:
        _returns(parser, cost, chart, j, memo)
    node_rule = parser.node_rule
    best = INF
    for n, j in items:
        best = min(best, cost[n] + memo[j].get(node_rule[n], INF))
    return min(best, INF)


def _returns(parser: Any, cost: Sequence[int], chart: Any, at: int,
             memo: dict[int, dict[int, int]]) -> None:
    """Fill ``memo[j]`` (rule -> cost of returning from it, entered at position ``j``) for
    ``at`` and every position it depends on, without recursion (charts nest deep)."""
    node_rule = parser.node_rule
    stack = [at]
    while stack:
        j = stack[-1]
        if j in memo:
            stack.pop()
            continue
        waiting = chart[j].waiting
        need = {w[1] for ws in waiting.values() for w in ws if w[1] >= 0 and w[1] < j and w[1] not in memo}
        if need:
            stack.extend(need)
            continue
        stack.pop()
        # Within the set, a return may lead to another rule entered here: a small shortest
        # path over the rules waited for at j (Dijkstra, edge costs >= 0).
        best: dict[int, int] = {}
        inner: dict[int, list[tuple[int, int]]] = {}
        for r, ws in waiting.items():
            b = INF
            for w in ws:
                if w[1] < 0:
                    b = 0
                elif w[1] < j:
                    b = min(b, cost[w[0]] + memo[w[1]].get(node_rule[w[0]], INF))
                else:
                    inner.setdefault(node_rule[w[0]], []).append((r, cost[w[0]]))
            best[r] = b
        heap = [(b, r) for r, b in best.items() if b < INF]
        heapq.heapify(heap)
        final: set[int] = set()
        while heap:
            b, r = heapq.heappop(heap)
            if r in final:
                continue
            final.add(r)
            for r2, w in inner.get(r, ()):
                if b + w < best.get(r2, INF):
                    best[r2] = b + w
                    heapq.heappush(heap, (b + w, r2))
        memo[j] = best
