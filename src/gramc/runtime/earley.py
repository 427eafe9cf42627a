"""An Earley recogniser over a PDA table: the parse state of a context-free matcher.

The chart is a list of immutable :class:`ChartSet` (one per byte read, plus one per special
token). An item is ``(node, origin)``: the node's rule was entered at chart position
``origin``. Each set also records, per rule, the items waiting for that rule to return
(already advanced past the call), which is all completion needs. Left recursion, nullable
rules and ambiguity need no special cases. Because sets never change once built, rolling back
is truncating the list and forking is copying it.

Every node of the table can still complete its rule and every rule is productive, so a
non-empty set means "the input so far is a viable prefix".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, Sequence

import numpy as np

from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD

Item = tuple[int, int]
TOP = (-1, -1)  # the waiting entry of the start rule at position 0: "return to the caller"


class ChartSet:
    """One Earley set: its items and, per rule, the (return node, origin) items waiting.

    ``conts`` and ``key`` cache interned ids, valid in the parser generation ``gen`` only
    (see :meth:`EarleyParser.new_generation`)."""

    __slots__ = ("items", "waiting", "conts", "key", "gen")

    def __init__(self, items: frozenset[Item], waiting: dict[int, tuple[Item, ...]]):
        self.items = items
        self.waiting = waiting
        self.conts: dict[int, int] = {}
        self.key: int | None | bool = False  # False: not computed yet
        self.gen = -1  # no ids cached yet


class Chart(Protocol):
    """What building a set reads of the chart before it: a set by position (negative from
    the end) and the length. A list of sets, or a view extending one without copying it."""

    def __len__(self) -> int: ...

    def __getitem__(self, j: int, /) -> ChartSet: ...


class ChartView:
    """A matcher's chart: the first ``n`` sets of a list that only ever grows at its end.

    Views of one list share it (a rollback keeps an older view), so extending the newest
    view, a matcher's every step, appends in place instead of copying the chart; a view
    whose list has grown past it, or a ``shared`` one (handed to any matcher by the commit
    memo, perhaps in another thread), copies its own sets first. Sets never change, so a
    view always reads what it was made with."""

    __slots__ = ("sets", "n", "shared")

    def __init__(self, sets: list[ChartSet], n: int, shared: bool = False):
        self.sets, self.n, self.shared = sets, n, shared

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, j: int) -> ChartSet:
        if j < 0:
            j += self.n
        if not 0 <= j < self.n:
            raise IndexError(f"chart position {j} out of range ({self.n} sets)")
        return self.sets[j]

    def sets_to_extend(self) -> tuple[list[ChartSet], int]:
        """A list whose first ``n`` sets are this view's and whose end the caller owns."""
        if self.shared or len(self.sets) != self.n:
            return self.sets[: self.n], self.n
        return self.sets, self.n

    def extended(self, s: ChartSet) -> ChartView:
        """This chart with ``s`` after it."""
        sets, _ = self.sets_to_extend()
        sets.append(s)
        return ChartView(sets, len(sets))

    def copy(self) -> ChartView:
        """A view of its own list (for a fork, which may be stepped from another thread)."""
        return ChartView(self.sets[: self.n], self.n)


class _ListedRows(dict):
    """The rows of a 2-d array by index, each listed on first use and kept."""

    def __init__(self, rows: np.ndarray):
        super().__init__()
        self.rows = rows

    def __missing__(self, i: int) -> list[int]:
        row = self[i] = self.rows[i].tolist()
        return row


class EarleyParser:
    """Earley operations over one :class:`PDATable` (shared by all matchers of an artifact)."""

    def __init__(self, table: PDATable):
        self.table = table
        # Rows of the transition table as lists (the fastest to index from Python), each
        # listed when a node is first met: listing every node's at load cost most of a large
        # artifact's load time.
        self.byte_next: Mapping[int, list[int]] = _ListedRows(table.delta[:, : table.n_byte_classes])
        # Special tokens' columns (not the whole table: call columns are not needed).
        self.token_col = {int(t): i for i, t in enumerate(table.token_ids)}
        n_bytes = table.n_byte_classes
        self.token_rows: Mapping[int, list[int]] = _ListedRows(table.delta[:, n_bytes : n_bytes + len(table.token_ids)])
        self.cls: list[int] = table.byte_class.tolist()
        self.calls = table.calls()
        self.accept: list[bool] = table.accept.tolist()
        self.node_rule: list[int] = table.node_rule.tolist()
        self.rule_start: list[int] = table.rule_start.tolist()
        self.start_rule = table.start_rule
        # Nodes that neither call nor return: a set of only these is its own closure (most
        # bytes of a string or a number), so building it skips the closure loop.
        self.inert: list[bool] = [not a and not c for a, c in zip(self.accept, self.calls)]
        self._interned: dict[frozenset, int] = {}
        # Per node met: the bytes and byte classes it reads (bounded by the table's nodes).
        self._live: dict[int, tuple[int, int]] = {}
        self._values: list[frozenset] = []
        self.generation = 0
        # Per (node, token): where an item of that node is after the token's last two bytes,
        # when every byte before the last leaves it inert or dead (see feed_token).
        self._paths: dict[tuple[int, int], int | None] = {}
        self.max_paths = 1 << 16
        self.path_resets = 0

    # ------------------------------------------------------------ building sets

    def initial(self) -> ChartView:
        """The chart before any input."""
        first = self.closure([], [(self.rule_start[self.start_rule], 0)], 0)
        first.waiting.setdefault(self.start_rule, ())
        first.waiting[self.start_rule] += (TOP,)
        return ChartView([first], 1)

    def closure(self, chart: Chart, seeds: list[Item], k: int) -> ChartSet:
        """The set at position ``k`` from its scanned ``seeds`` (predictions, completions)."""
        items: set[Item] = set()
        waiting: dict[int, list[Item]] = {}
        completed: set[int] = set()  # rules that returned with origin k (nullable here)
        work = list(seeds)
        calls, accept, node_rule, rule_start = self.calls, self.accept, self.node_rule, self.rule_start
        while work:
            it = work.pop()
            if it in items:
                continue
            items.add(it)
            n, j = it
            for r, ret in calls[n]:
                waiting.setdefault(r, []).append((ret, j))
                work.append((rule_start[r], k))
                if r in completed:
                    work.append((ret, j))
            if accept[n]:
                r = node_rule[n]
                if j == k:
                    if r not in completed:
                        completed.add(r)
                        work.extend(waiting.get(r, ()))
                else:
                    work.extend(w for w in chart[j].waiting.get(r, ()) if w is not TOP)
        return ChartSet(frozenset(items), {r: tuple(w) for r, w in waiting.items()})

    def scan_byte(self, chart: Chart, b: int) -> ChartSet | None:
        """The next set after byte ``b``, or None if no item can read it."""
        c = self.cls[b]
        nxt = self.byte_next
        seeds = [(t, j) for n, j in chart[-1].items if (t := nxt[n][c]) != DEAD]
        if not seeds:
            return None
        inert = self.inert
        if all(inert[n] for n, _ in seeds):
            return _inert_set(chart[-1], frozenset(seeds))
        return self.closure(chart, seeds, len(chart))

    def scan_token(self, chart: Sequence[ChartSet], token_id: int) -> ChartSet | None:
        """The next set after special token ``token_id``, or None."""
        col = self.token_col.get(token_id)
        if col is None:
            return None
        rows = self.token_rows
        seeds = [(t, j) for n, j in chart[-1].items if (t := rows[n][col]) != DEAD]
        return self.closure(chart, seeds, len(chart)) if seeds else None

    def feed_token(self, chart: ChartView, token: int, data: bytes) -> ChartView | None:
        """``chart`` extended by ``data``, the bytes of ``token`` (as :meth:`feed`).

        Most multi-byte tokens run inside a string or a number: every set before the last is
        *inert* (no item calls or returns), so no item can ever start at those positions and
        no later step reads them. They are stood for by one shared empty set (what an inert
        set offers a reader of its waiting items), and only the last set is built, from each
        item's memoised path through the token."""
        if len(data) < 2:
            return self.feed(chart, data)
        sets, n = chart.sets_to_extend()
        paths = self._paths
        last: list[Item] = []
        for node, origin in sets[-1].items:
            end = paths.get((node, token), _UNKNOWN)
            if end == _UNKNOWN:
                end = self._path(node, token, data)
            if end is None:
                return self.feed(chart, data)  # an item calls or returns inside the token
            if end != DEAD:
                last.append((end, origin))
        if not last:
            return None
        k = n + len(data) - 1
        inert = self.inert
        if all(inert[v] for v, _ in last):
            final = _inert_set(sets[-1], frozenset(last))
        else:
            final = self.closure(sets, last, k)  # reads only sets where items started (< n)
        sets.extend([_GAP] * (len(data) - 1))
        sets.append(final)
        return ChartView(sets, k + 1)

    def _path(self, node: int, token: int, data: bytes) -> int | None:
        """Where an item of ``node`` is after ``data`` (DEAD: it dies), or None when it
        reaches a node that calls or returns before the last byte; memoised (bounded)."""
        nxt, cls, inert = self.byte_next, self.cls, self.inert
        v, end = node, None
        for b in data[:-1]:
            v = nxt[v][cls[b]]
            if v == DEAD or not inert[v]:
                break
        else:
            end = nxt[v][cls[data[-1]]]
        if v == DEAD:
            end = DEAD
        if len(self._paths) >= self.max_paths:
            self._paths = {}
            self.path_resets += 1
        self._paths[node, token] = end
        return end

    def feed(self, chart: ChartView, data: bytes) -> ChartView | None:
        """``chart`` extended by ``data``, or None if it dies on the way (``chart`` unchanged)."""
        sets, n = chart.sets_to_extend()
        for b in data:
            s = self.scan_byte(sets, b)
            if s is None:
                del sets[n:]  # only this call appended there
                return None
            sets.append(s)
        return ChartView(sets, len(sets))

    # ------------------------------------------------------------ queries

    def is_complete(self, s: ChartSet) -> bool:
        """Can the input end here? (the start rule returned to the top level)."""
        accept, node_rule, start = self.accept, self.node_rule, self.start_rule
        return any(j == 0 and accept[n] and node_rule[n] == start for n, j in s.items)

    def live_bytes(self, s: ChartSet) -> set[int]:
        """The byte classes some item of ``s`` can read next."""
        bits = 0
        for n, _ in s.items:
            bits |= self._live_bits(n)[1]
        return set(_bit_positions(bits))

    def next_bytes(self, s: ChartSet) -> list[int]:
        """The bytes some item of ``s`` can read next, ascending."""
        bits = 0
        for n, _ in s.items:
            bits |= self._live_bits(n)[0]
        return _bit_positions(bits)

    def _live_bits(self, n: int) -> tuple[int, int]:
        """The bytes and the byte classes node ``n`` reads, as bits (kept per node met)."""
        bits = self._live.get(n)
        if bits is None:
            row = self.byte_next[n]
            classes = sum(1 << c for c, t in enumerate(row) if t != DEAD)
            bits = self._live[n] = (sum(1 << b for b, c in enumerate(self.cls) if classes >> c & 1), classes)
        return bits

    def key(self, chart: Sequence[ChartSet]) -> int | None:
        """An id equal for two charts exactly when their last sets have the same items and
        the same continuations (so the same future): the key masks are memoised by.

        None when a continuation is cyclic (left recursion at this position).
        """
        s = chart[-1]
        self._conts_of(s)
        if s.key is False:
            try:
                s.key = self.intern(frozenset((n, self._cont(chart, j, self.node_rule[n]))
                                               for n, j in s.items))
            except _Cyclic:
                s.key = None
        return s.key

    def _cont(self, chart: Sequence[ChartSet], j: int, r: int) -> int:
        """The interned continuation of rule ``r`` entered at position ``j``: what its return
        leads to, recursively. Iterative (nesting may be thousands deep); raises _Cyclic on a
        continuation that contains itself."""
        conts_of = self._conts_of
        known = conts_of(chart[j]).get(r)
        if known is not None:
            return known  # most calls: an older set's continuation, interned already
        node_rule = self.node_rule
        on_path: set[tuple[int, int]] = set()
        stack = [(j, r, False)]
        while stack:
            j2, r2, expanded = stack.pop()
            s = chart[j2]
            conts = conts_of(s)
            if r2 in conts:
                continue
            waiting = s.waiting.get(r2, ())
            if expanded:
                conts[r2] = self.intern(frozenset(
                    w if w is TOP else (w[0], chart[w[1]].conts[node_rule[w[0]]]) for w in waiting))
                on_path.discard((j2, r2))
                continue
            if (j2, r2) in on_path:
                raise _Cyclic
            on_path.add((j2, r2))
            stack.append((j2, r2, True))
            for w in waiting:
                if w is not TOP and node_rule[w[0]] not in conts_of(chart[w[1]]):
                    stack.append((w[1], node_rule[w[0]], False))
        return chart[j].conts[r]

    def _conts_of(self, s: ChartSet) -> dict[int, int]:
        """The continuations cached on ``s``, first forgotten (with its key) when they are of
        an older generation."""
        if s.gen != self.generation:
            s.gen, s.conts, s.key = self.generation, {}, False
        return s.conts

    def intern(self, key: frozenset) -> int:
        """The id of ``key`` in the table configuration keys and continuations share."""
        value = self._interned.get(key)
        if value is None:
            value = self._interned[key] = len(self._values)
            self._values.append(key)
        return value

    @property
    def n_paths(self) -> int:
        """How many token paths are memoised now (see :meth:`feed_token`)."""
        return len(self._paths)

    @property
    def n_interned(self) -> int:
        """How many sets are interned in this generation."""
        return len(self._values)

    def new_generation(self) -> None:
        """Forget every interned set: ids handed out before mean nothing now. Charts stay
        valid (their sets' cached ids are of the old generation, so they are made afresh on
        the next :meth:`key`); the caller drops whatever else it keyed by those ids."""
        self._interned = {}
        self._values = []
        self.generation += 1

    def interned(self, value_id: int) -> frozenset:
        """The set an id from :meth:`key` or :meth:`intern` stands for: for a key, the
        (node, continuation) pairs of the set; for a continuation, its (return node,
        continuation) pairs and :data:`TOP`."""
        return self._values[value_id]


def _bit_positions(bits: int) -> list[int]:
    """The positions of the set bits of ``bits``, ascending."""
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


_UNKNOWN = -2  # not a node: a path not memoised yet
#: The set standing for every inert set before a token's last byte (see feed_token): no item
#: starts there, so it is only ever read for the rules waiting there, of which it has none.
_GAP = ChartSet(frozenset(), {})


def _inert_set(before: ChartSet, items: frozenset[Item]) -> ChartSet:
    """The set of inert ``items`` after ``before``: ``before`` itself when it holds the same
    items and no rule starts there (a byte or token that loops inside a string or a number),
    so that its cached key and continuations serve again; a new set otherwise. (No rule
    starts at a set without waiting items, so no item reads its position.)"""
    if not before.waiting and before.items == items:
        return before
    return ChartSet(items, {})


class _Cyclic(Exception):
    """A continuation that refers to itself (left recursion): not memoisable."""
