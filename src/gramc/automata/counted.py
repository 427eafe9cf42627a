"""Regular languages with counted repetitions: an outer DFA whose states may *call* a counter.

Unrolled, ``x{m,n}`` is ``n`` copies of ``x``'s states, and a DFA of it binds every copy to the
vocabulary (a JSON string with ``maxLength`` 512 is ~10,000 states). A :class:`CountedDFA`
keeps ``x`` once. The outer DFA has, per state, at most one *call* of a counter ``k`` (an item
DFA and bounds ``min >= 1``, ``max``) and the state the call returns to; the language is the
outer DFA's with each call read as ``item{min,max}``. Reading is deterministic because the
compiler only builds one where (checked again when a file is read):

- an item cannot be empty and its accepting states read nothing (an iteration's end is
  known when it is reached);
- a calling state reads no byte an iteration may start with;
- the return state reads (itself, or by the call it makes in turn) no byte an iteration may
  start with.

A state of the language is an outer state, or a *counter state* ``(site, count, item state)``
where the site is the calling outer state and ``count`` (``1..max``) the iterations begun.
Both are numbered in one integer space so that a matcher keeps one number: outer states first,
then the counter states of each site, site by site (:meth:`CountedDFA.encode`).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from gramc.automata.tables import DEAD, DFATable

#: The largest number of states (outer and counter) a counted DFA may number: ids are int32.
MAX_COUNTED_STATES = 2**31 - 1
#: Largest item counted (live DFA states): the counted walk of an item has a state per item
#: state and per further iteration a token can start (the longest token's bytes).
MAX_ITEM_STATES = 256


@dataclass(frozen=True, eq=False)
class CountedDFA:
    """An outer DFA with counters (see the module doc).

    Attributes:
        outer: the outer DFA over byte classes (no special-token columns); a state whose only
            way on is its call has an all-dead byte row.
        call_kind: int32 ``[S]``, the counter each outer state calls, or -1.
        call_next: int32 ``[S]``, the outer state a call returns to (0 where none).
        items: the item DFA of each counter ``k`` (canonical: dead 0, start 1).
        bounds: int64 ``[K, 2]``, each counter's ``(min, max)``, ``1 <= min <= max``.
    """

    outer: DFATable
    call_kind: np.ndarray
    call_next: np.ndarray
    items: tuple[DFATable, ...]
    bounds: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------ numbering

    @property
    def start(self) -> int:
        return self.outer.start

    @cached_property
    def n_outer(self) -> int:
        return self.outer.n_states

    @cached_property
    def sites(self) -> np.ndarray:
        """The calling outer states, ascending (site ``j`` is ``sites[j]``)."""
        return np.flatnonzero(self.call_kind >= 0)

    @cached_property
    def widths(self) -> np.ndarray:
        """Live states per item (its counter states per count)."""
        return np.array([item.n_states - 1 for item in self.items], dtype=np.int64)

    @cached_property
    def site_base(self) -> np.ndarray:
        """The first id of each site's counter states, and one past the last (int64 ``[J+1]``)."""
        kinds = self.call_kind[self.sites]
        sizes = self.bounds[kinds, 1] * self.widths[kinds]
        return self.n_outer + np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @property
    def n_states(self) -> int:
        """States in all: outer and counter (ids ``0..n_states-1``)."""
        return int(self.site_base[-1])

    @cached_property
    def _site_of(self) -> dict[int, int]:
        return {int(p): j for j, p in enumerate(self.sites.tolist())}

    @cached_property
    def _site_list(self) -> tuple[list[int], list[tuple[int, int, int, int, int]]]:
        """Per site, as Python ints (read at every step): its first id, and its
        ``(kind, min, max, return state, item width)``."""
        info = []
        for p in self.sites.tolist():
            k = int(self.call_kind[p])
            info.append((k, int(self.bounds[k, 0]), int(self.bounds[k, 1]), int(self.call_next[p]),
                         int(self.widths[k])))
        return self.site_base.tolist(), info

    def encode(self, site: int, count: int, i: int) -> int:
        """The id of counter state ``(site, count, item state i)``."""
        base, info = self._site_list
        return base[site] + (count - 1) * info[site][4] + i - 1

    def decode(self, q: int) -> tuple[int, int, int]:
        """``(site, count, item state)`` of counter state ``q`` (``q >= n_outer``)."""
        base, info = self._site_list
        j = bisect_right(base, q) - 1
        c, i = divmod(q - base[j], info[j][4])
        return j, c + 1, i + 1

    def site_info(self, j: int) -> tuple[int, int, int, int]:
        """``(kind, min, max, return state)`` of site ``j``."""
        return self._site_list[1][j][:4]

    # ------------------------------------------------------------ reading

    def first_bytes(self, k: int) -> np.ndarray:
        """bool ``[256]``: the bytes an iteration of counter ``k`` may start with."""
        item = self.items[k]
        return item.delta[item.start, item.byte_class] != DEAD

    def outer_live_bytes(self, q: int) -> np.ndarray:
        """bool ``[256]``: the bytes readable from outer state ``q`` (its own, and its call's)."""
        live = self.outer.delta[q, self.outer.byte_class] != DEAD
        k = int(self.call_kind[q])
        return live | self.first_bytes(k) if k >= 0 else live

    def outer_step(self, q: int, b: int) -> int:
        """The state after byte ``b`` from outer state ``q``: its own move, else the first
        step of the iteration its call begins."""
        t = int(self.outer.delta[q, self.outer.byte_class[b]])
        k = int(self.call_kind[q])
        if t != DEAD or k < 0:
            return t
        item = self.items[k]
        i = int(item.delta[item.start, item.byte_class[b]])
        return DEAD if i == DEAD else self.encode(self._site_of[q], 1, i)

    def step_byte(self, q: int, b: int) -> int:
        """The state after byte ``b`` from ``q`` (DEAD if it dies)."""
        if q < self.n_outer:
            return self.outer_step(q, b)
        j, c, i = self.decode(q)
        k, lo, hi, ret = self.site_info(j)
        item = self.items[k]
        t = int(item.delta[i, item.byte_class[b]])
        if t != DEAD:
            return self.encode(j, c, t)
        if not item.accept[i]:
            return DEAD
        if c < hi:
            t = int(item.delta[item.start, item.byte_class[b]])
            if t != DEAD:
                return self.encode(j, c + 1, t)
        return self.outer_step(ret, b) if c >= lo else DEAD

    def step_bytes(self, q: int, data: bytes) -> int:
        """The state after reading ``data`` from ``q`` (DEAD if it dies): :meth:`step_byte`
        byte by byte, with a counter state's site decoded once and its item read from plain
        lists while the bytes stay inside the repetition (a commit inside a long string)."""
        at, n = 0, len(data)
        while at < n:
            if q < self.n_outer:
                q = self.outer_step(q, data[at])
                at += 1
            else:
                j, c, i = self.decode(q)
                k, lo, hi, ret = self.site_info(j)
                moves, finals, first = self._item_lists(k)
                while at < n:
                    b = data[at]
                    t = moves[i][b]
                    if t == DEAD and finals[i]:
                        if c < hi and first[b] != DEAD:
                            c, t = c + 1, first[b]
                        elif c >= lo:
                            break  # leaves the repetition: the return state reads b
                    if t == DEAD:
                        return DEAD
                    i, at = t, at + 1
                else:
                    return self.encode(j, c, i)
                q = self.outer_step(ret, data[at])
                at += 1
            if q == DEAD:
                return DEAD
        return q

    def _item_lists(self, k: int) -> tuple[list, list, list]:
        """Counter ``k``'s item as lists: next state per (state, byte), accepting states, and
        the first step per byte."""
        key = ("lists", k)
        if key not in self._cache:
            item = self.items[k]
            moves = item.delta[:, item.byte_class].tolist()
            self._cache[key] = (moves, item.accept.tolist(), moves[item.start])
        return self._cache[key]

    def accepts(self, q: int) -> bool:
        """Is the input read to ``q`` in the language?"""
        if q < self.n_outer:
            return bool(self.outer.accept[q])
        j, c, i = self.decode(q)
        k, lo, _, ret = self.site_info(j)
        return bool(self.items[k].accept[i]) and c >= lo and bool(self.outer.accept[ret])

    def fullmatch(self, data: bytes) -> bool:
        """Is ``data`` in the language?"""
        return self.accepts(self.step_bytes(self.start, data))

    def live_bytes(self, q: int) -> np.ndarray:
        """bool ``[256]``: the bytes readable from ``q``."""
        if q < self.n_outer:
            return self.outer_live_bytes(q)
        j, c, i = self.decode(q)
        k, lo, hi, ret = self.site_info(j)
        item = self.items[k]
        live = item.delta[i, item.byte_class] != DEAD
        if item.accept[i]:
            if c < hi:
                live = live | self.first_bytes(k)
            if c >= lo:
                live = live | self.outer_live_bytes(ret)
        return live

    def forced_bytes(self, q: int, limit: int) -> bytes:
        """Up to ``limit`` bytes the language forces from ``q`` (each the only live byte of a
        state that does not accept)."""
        out = bytearray()
        while len(out) < limit and not self.accepts(q):
            live = np.flatnonzero(self.live_bytes(q))
            if len(live) != 1:
                break
            out.append(int(live[0]))
            q = self.step_byte(q, int(live[0]))
        return bytes(out)

    # ------------------------------------------------------------ the walk table

    def expanded(self, max_len: int) -> tuple[DFATable, np.ndarray]:
        """A plain DFA that reads like this one for up to ``max_len`` bytes from an outer state
        (or from a return state, after a byte or more), and the id of each of its states.

        Its states are the outer ones (same ids), then per site the counter states of counts
        ``1..min(max, max_len + 1)``: a token reaches no further (an iteration reads a byte at
        least), so the last count's further iterations are cut. The token walk binds outer
        states and walks the tokens that leave a counter on it."""
        key = ("expanded", max_len)
        if key not in self._cache:
            self._cache[key] = self._expand(max_len)
        return self._cache[key]

    def _expand(self, max_len: int) -> tuple[DFATable, np.ndarray]:
        outer, items = self.outer, self.items
        maps = np.vstack([outer.byte_class] + [item.byte_class for item in items]).astype(np.int64)
        columns, byte_class = np.unique(maps, axis=1, return_inverse=True)
        byte_class = byte_class.reshape(-1)
        n_outer, n_cols = self.n_outer, columns.shape[1]
        sites = self.sites.tolist()
        layers = [min(int(self.bounds[self.call_kind[p], 1]), max_len + 1) for p in sites]
        widths = [int(self.widths[self.call_kind[p]]) for p in sites]
        sizes = np.array([n * w for n, w in zip(layers, widths)], dtype=np.int64)
        offset = n_outer + np.concatenate([[0], np.cumsum(sizes)])
        delta = np.zeros((int(offset[-1]), n_cols), dtype=np.int64)
        accept = np.zeros(int(offset[-1]), dtype=bool)
        ids = np.zeros(int(offset[-1]), dtype=np.int64)
        ids[:n_outer] = np.arange(n_outer)
        accept[:n_outer] = outer.accept
        delta[:n_outer] = outer.delta[:, columns[0]]
        starts = []  # per site: the first step of an iteration, per column (0: none)
        for j, p in enumerate(sites):
            item = items[int(self.call_kind[p])]
            first = item.delta[item.start, columns[1 + int(self.call_kind[p])]].astype(np.int64)
            starts.append(np.where(first != DEAD, offset[j] + first - 1, DEAD))
            entry = (delta[p] == DEAD) & (first != DEAD)
            delta[p, entry] = starts[j][entry]
        for j, p in enumerate(sites):
            k = int(self.call_kind[p])
            item, w, n = items[k], widths[j], layers[j]
            lo, hi, ret = int(self.bounds[k, 0]), int(self.bounds[k, 1]), int(self.call_next[p])
            moves = item.delta[1:, columns[1 + k]].astype(np.int64)  # [w, cols], local ids
            finals = item.accept[1:].astype(bool)
            base = offset[j] + np.arange(n)[:, None, None] * w  # [n, 1, 1]: count c's ids
            body = np.where(moves[None] != DEAD, base + moves[None] - 1, DEAD)  # [n, w, cols]
            # At an iteration's end: the next count's first step (starts[j] is count 1's),
            # else, with the minimum met, the return state's move.
            count = np.arange(1, n + 1)[:, None]
            more = (count < hi) & (count < n) & (starts[j][None] != DEAD)
            leave = np.where(count >= lo, delta[ret][None], DEAD)
            body[:, finals] = np.where(more, starts[j][None] + count * w, leave)[:, None, :]
            delta[offset[j] : offset[j + 1]] = body.reshape(-1, n_cols)
            counts = np.repeat(np.arange(1, n + 1), w)
            local = np.tile(np.arange(1, w + 1), n)
            accept[offset[j] : offset[j + 1]] = finals[local - 1] & (counts >= lo) & bool(outer.accept[ret])
            ids[offset[j] : offset[j + 1]] = self.site_base[j] + (counts - 1) * w + local - 1
        table = DFATable(delta=delta.astype(np.int32), byte_class=byte_class.astype(np.uint8),
                         token_ids=np.zeros(0, dtype=np.int32), accept=accept, start=self.start)
        return table, ids

    # ------------------------------------------------------------ storage

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays to store in an artifact (names without a section prefix): the outer
        DFA's, then the calls and the items stacked in one node space."""
        sizes = [item.n_states for item in self.items]
        width = max(item.delta.shape[1] for item in self.items)
        stacked = np.zeros((sum(sizes), width), dtype=np.int32)
        at = 0
        for item in self.items:
            stacked[at : at + item.n_states, : item.delta.shape[1]] = item.delta
            at += item.n_states
        return {
            **self.outer.arrays(),
            "call_kind": self.call_kind.astype(np.int32),
            "call_next": self.call_next.astype(np.int32),
            "item_offset": np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            "item_byte_class": np.vstack([item.byte_class for item in self.items]).astype(np.uint8),
            "item_delta": stacked,
            "item_accept": np.concatenate([item.accept for item in self.items]).astype(bool),
        }


def unambiguous(cdfa: CountedDFA) -> bool:
    """Do the calls read deterministically? No calling state reads a byte its iteration may
    start with, and no byte its return state may read may start one either (module doc of
    :mod:`gramc.automata.counted`; the items are checked by :func:`item_is_countable`)."""
    for p in cdfa.sites.tolist():
        k = int(cdfa.call_kind[p])
        first = cdfa.first_bytes(k)
        own = cdfa.outer.delta[p, cdfa.outer.byte_class] != DEAD
        if (own & first).any() or (cdfa.outer_live_bytes(int(cdfa.call_next[p])) & first).any():
            return False
    return True


def item_is_countable(item: DFATable) -> bool:
    """Can the item be counted: not empty, no special tokens, accepting states that read
    nothing (an iteration ends where it is first complete), and small enough?"""
    if item.start == DEAD or item.accept[item.start] or len(item.token_ids):
        return False
    if item.n_states - 1 > MAX_ITEM_STATES:
        return False
    return not (item.delta[item.accept.astype(bool)] != DEAD).any()
