"""Exact token budgets of counted DFA artifacts (:mod:`gramc.runtime.counted`).

A counted DFA's states are outer states and counter states ``(site j, count c, item state
i)``; a site may allow 100,000 iterations, so the fewest tokens to an accepting state cannot
be searched state by state as for a DFA (:class:`gramc.runtime.budget.DFABudget`). What makes
it tractable is that a token read from a counter state does the same thing at every count:
it starts ``u`` further iterations (``u <= L``, the longest token) and ends in item state
``i'``, or it ends the repetition after ``u`` more and walks on from the site's return state
to a fixed state. Only the bounds depend on the count: with ``r = max - c`` iterations left
and ``need = min - c`` still needed, the first kind needs ``u <= r``, the second
``need <= u <= r``.

So per site the distances are computed *layer by layer*, from ``c = max`` down to 1, each
layer (one value per item state) from the ``L`` layers above it and the values of the exits'
targets; a layer's own ``u = 0`` moves are relaxed to a fixed point. Two stretches of counts
read the same layer function at every count: ``r >= L`` with ``need <= 0`` (every exit
allowed) and ``r >= L`` with ``need > L`` (none). In them the ``L`` layers above a count
determine all layers below it, so once those ``L`` layers repeat those of ``p`` counts
higher, up to adding a constant ``q`` (``q = 0`` in the first stretch, whose exits do not
shift), every lower count of the stretch is ``p`` counts up plus ``q``: the stretch is stored
as that rule, not layer by layer (a JSON string of ``maxLength`` 100,000 stores a few hundred
layers). Outer states take the least over their token rows, as a DFA's do. Sites and outer
states depend on each other (an exit reaches outer states, an outer state enters a site at a
low count), so both are recomputed in rounds from "no completion" down until a round changes
nothing: each round's values are lengths of real token paths, and a round lowers every value
that a path one site-visit longer improves (Bellman-Ford over the site visits), so the fixed
point is the exact distance.

Masks: an outer state's tokens sorted by their target's distance make a budget cut a prefix
(as for a DFA). A counter state's tokens are grouped by what they do (``u`` and end item
state, or ``u`` and exit target): a cut keeps the groups whose target is near enough, so a
budgeted mask of a counter state costs a lookup of at most ``L + 1`` layers and the union of
the kept groups' ids.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gramc.runtime.budget import INF, _cut, _Cuts
from gramc.runtime.cache import LRUCache


class _Moves:
    """The tokens read from one counter state's item state, grouped by what they do.

    Group ``g`` is ``ids[starts[g]:starts[g+1]]``: tokens that start ``u[g]`` further
    iterations and end in local item state ``to[g]`` (``exit[g]`` False), or that end the
    repetition after ``u[g]`` more and reach counted-DFA state ``to[g]`` (``exit[g]`` True)."""

    def __init__(self, ids: np.ndarray, starts: np.ndarray, u: np.ndarray, to: np.ndarray, exit: np.ndarray):
        self.ids, self.starts, self.u, self.to, self.exit = ids, starts, u, to, exit


class _Layers:
    """One site's distances by count: explicit layers, and stretches given by a period."""

    def __init__(self) -> None:
        self.explicit: dict[int, np.ndarray] = {}
        self.periodic: list[tuple[int, int, int, int, int]] = []  # (low, high, ref, p, q)

    def get(self, c: int) -> np.ndarray:
        """The layer of count ``c`` (one value per local item state)."""
        row = self.explicit.get(c)
        if row is not None:
            return row
        for low, high, ref, p, q in self.periodic:
            if low <= c <= high:
                k = -(-(ref - c) // p)
                return np.minimum(self.get(c + k * p) + k * q, INF)
        raise KeyError(c)

    def canonical(self, c: int, L: int) -> tuple[int, int]:
        """``(c0, off)``: every token's target from count ``c`` is ``off`` tokens further
        than the same token's from ``c0`` (a count in a periodic stretch, where the layers of
        ``c .. c+L`` repeat those ``p`` counts up, maps to one of ``p`` counts)."""
        for low, high, ref, p, q in self.periodic:
            if low <= c <= high and c < ref - L - p:
                k = -(-(ref - L - p - c) // p)
                return c + k * p, k * q
        return c, 0


class CountedBudget:
    """Exact budget masks of a :class:`~gramc.runtime.counted.CountedTokenTable` (module doc)."""

    def __init__(self, table: Any):
        self.table = table
        self.cdfa = cdfa = table.cdfa
        self.eos = np.array(table.eos_ids, dtype=np.int64)
        self.L = int(table.max_len)
        self._cuts = _Cuts(table)
        self._moves_cache = LRUCache(table.limits.counted_shapes)  # vocabulary-sized each
        self._layers: list[_Layers | None] = [None] * len(cdfa.sites)
        self._outer: np.ndarray | None = None  # per outer state its distance, once solved

    # ------------------------------------------------------------ distances

    def value(self, q: int) -> int:
        """The fewest tokens (EOS not counted) from state ``q`` to an accepting state."""
        if self._outer is None:
            self._solve()
        return self._value(q)

    def _value(self, q: int) -> int:
        assert self._outer is not None
        if q < self.cdfa.n_outer:
            return int(self._outer[q])
        j, c, i = self.cdfa.decode(q)
        layers = self._layers[j]
        return INF if layers is None else int(layers.get(c)[i - 1])

    def _values(self, qs: np.ndarray) -> np.ndarray:
        return np.array([self._value(q) for q in qs.tolist()], dtype=np.int64)

    def to_finish(self, q: int) -> int:
        """Fewest tokens to finish from ``q``, EOS included where the vocabulary has one."""
        d = self.value(q)
        return d if d >= INF else d + (len(self.eos) > 0)

    def _solve(self) -> None:
        """Outer distances and every site's layers, in rounds until nothing changes."""
        cdfa, table = self.cdfa, self.table
        n_outer = cdfa.n_outer
        rows = table.all_rows()
        src = np.repeat(np.arange(n_outer, dtype=np.int64), np.diff(rows.indptr))
        size = cdfa.n_states
        pairs = np.unique(src * size + rows.next_state.astype(np.int64))  # 1-d: far faster than axis=0
        o_src, o_dst = pairs // size, pairs % size
        inner = o_dst < n_outer
        accept = np.flatnonzero(cdfa.outer.accept)
        summaries = [self._site_summary(j) for j in range(len(cdfa.sites))]
        self._outer = np.full(n_outer, INF, dtype=np.int64)
        self._outer[accept] = 0
        last: list[np.ndarray] | None = None
        while True:
            entered = self._values(o_dst[~inner])
            while True:  # the outer states, with the sites' current values
                target = np.empty(len(o_dst), dtype=np.int64)
                target[inner] = self._outer[o_dst[inner]]
                target[~inner] = entered
                new = self._outer.copy()
                np.minimum.at(new, o_src, np.minimum(target + 1, INF))
                if np.array_equal(new, self._outer):
                    break
                self._outer = new
            for j, summary in enumerate(summaries):
                self._layers[j] = self._site_layers(j, *summary)
            now = [self._outer.copy()] + [self._entries(j) for j in range(len(summaries))]
            if last is not None and all(np.array_equal(a, b) for a, b in zip(now, last)):
                return
            last = now

    def _entries(self, j: int) -> np.ndarray:
        """Site ``j``'s layers at the counts a token from elsewhere can reach (1..L+1)."""
        layers = self._layers[j]
        assert layers is not None
        hi = self.cdfa.site_info(j)[2]
        return np.stack([layers.get(c) for c in range(1, min(hi, self.L + 1) + 1)])

    def _site_summary(self, j: int) -> tuple[np.ndarray, ...]:
        """Site ``j``'s moves from every item state as arrays: alive (src, u, dst) sorted by
        ``u``, and exits (src, u, target state)."""
        w = int(self.cdfa.widths[self.cdfa.site_info(j)[0]])
        alive: list[np.ndarray] = []
        exits: list[np.ndarray] = []
        for i in range(1, w + 1):
            mv = self._moves(j, i)
            src = np.full(len(mv.u), i - 1, dtype=np.int64)
            part = np.stack([src, mv.u, mv.to], axis=1)
            alive.append(part[~mv.exit])
            exits.append(part[mv.exit])
        a = np.concatenate(alive) if alive else np.zeros((0, 3), dtype=np.int64)
        a = a[np.argsort(a[:, 1], kind="stable")]
        e = np.concatenate(exits) if exits else np.zeros((0, 3), dtype=np.int64)
        return a[:, 0], a[:, 1], a[:, 2], e[:, 0], e[:, 1], e[:, 2]

    def _site_layers(self, j: int, a_src: np.ndarray, a_u: np.ndarray, a_dst: np.ndarray,
                     e_src: np.ndarray, e_u: np.ndarray, e_to: np.ndarray) -> _Layers:
        """Site ``j``'s layers from ``c = max`` down, periodic stretches stored as rules."""
        cdfa, L = self.cdfa, self.L
        k, lo, hi, ret = cdfa.site_info(j)
        item = cdfa.items[k]
        w = item.n_states - 1
        finals = np.flatnonzero(item.accept[1:])
        ends_here = bool(cdfa.outer.accept[ret])
        a_le = np.searchsorted(a_u, np.arange(L + 1), side="right")
        ex = np.full((w, L + 1), INF, dtype=np.int64)
        if len(e_src):
            np.minimum.at(ex, (e_src, e_u), self._values(e_to))
        z = int(a_le[0])  # the first z moves stay in the layer (u = 0)
        out = _Layers()
        win = np.full((L + 1, w), INF, dtype=np.int64)  # win[u]: the layer of c + u
        keys: dict[bytes, tuple[int, int]] = {}
        zone = None
        c = hi
        while c >= 1:
            r, need = hi - c, lo - c
            cand = np.full(w, INF, dtype=np.int64)
            n1 = int(a_le[min(r, L)])
            if n1 > z:
                np.minimum.at(cand, a_src[z:n1], win[a_u[z:n1], a_dst[z:n1]] + 1)
            a, b = max(need, 0), min(r, L)
            if a <= b:
                cand = np.minimum(cand, ex[:, a : b + 1].min(axis=1) + 1)
            if need <= 0 and ends_here:
                cand[finals] = 0
            if z:
                while True:
                    new = cand.copy()
                    np.minimum.at(new, a_src[:z], cand[a_dst[:z]] + 1)
                    if np.array_equal(new, cand):
                        break
                    cand = new
            layer = np.minimum(cand, INF)
            out.explicit[c] = layer
            win[2:] = win[1:-1]
            win[1] = layer
            here = None if r < L else "exits" if need <= 0 else "none" if need > L else None
            if here != zone:
                zone, keys = here, {}
            if zone is not None:
                block = win[1:]
                finite = block < INF
                m = int(block[finite].min()) if finite.any() else 0
                key = np.where(finite, block - m, -1).tobytes()
                seen = keys.get(key)
                if seen is not None and (zone == "none" or seen[1] == m):
                    low = lo if zone == "exits" else 1
                    if low <= c - 1:
                        out.periodic.append((low, c - 1, c, seen[0] - c, m - seen[1]))
                    if zone == "none" or lo <= 1:
                        break
                    c = lo - 1  # past the stretch: its last L layers, by the rule
                    for u in range(1, L + 1):
                        win[u] = out.get(c + u) if c + u <= hi else INF
                    zone, keys = None, {}
                    continue
                keys[key] = (c, m)
            c -= 1
        return out

    # ------------------------------------------------------------ moves

    def _moves(self, j: int, i: int) -> _Moves:
        """The tokens read from item state ``i`` of site ``j``, grouped (:class:`_Moves`)."""
        found = self._moves_cache.get((j, i))
        if found is None:
            found = self._moves_cache.put((j, i), self._walk(j, i))
        return found

    def _walk(self, j: int, i: int) -> _Moves:
        from gramc.automata.walk import walk
        from gramc.runtime.pda_counted import counted_moves  # numba: imported on first use

        cdfa, table, L = self.cdfa, self.table, self.L
        k, _, _, ret = cdfa.site_info(j)
        item = cdfa.items[k]
        rows = item.delta[1:][:, item.byte_class].astype(np.int64) - 1
        trie, buf = table.trie, table._walk_buffers()
        pos, u, ends, exits = counted_moves(rows, item.accept[1:].astype(bool), cdfa.outer_live_bytes(ret),
                                            item.start - 1, i - 1, L, trie, buf)
        parts = [(pos, u.astype(np.int64), ends.astype(np.int64), np.zeros(len(pos), dtype=bool))]
        _, ids_of, delta, byte_class = table._walk_table()
        for v in np.unique(exits[:, 3]).tolist():  # one walk per u: the count each exit is at
            rows_v = exits[exits[:, 3] == v]
            buf.ranges[: len(rows_v)] = rows_v
            buf.ranges[: len(rows_v), 3] = ret
            ne, _, _, _ = walk(delta, byte_class, trie.blob, trie.offsets, trie.lengths, trie.lcp, trie.skip,
                               trie.max_len, buf.ranges, len(rows_v), np.zeros(0, dtype=np.bool_), False,
                               buf.pos, buf.next, 0, buf.hits, buf.pending, buf.missing)
            parts.append((buf.pos[:ne].copy(), np.full(ne, v, dtype=np.int64), ids_of[buf.next[:ne]].astype(np.int64),
                          np.ones(ne, dtype=bool)))
        p, uu, to, ex = (np.concatenate(x) for x in zip(*parts))
        if not len(p):
            none = np.zeros(0, dtype=np.int64)
            return _Moves(none.astype(np.int32), np.zeros(1, dtype=np.int64), none, none, np.zeros(0, dtype=bool))
        size = cdfa.n_states
        keys = (ex.astype(np.int64) * (L + 1) + uu) * size + to  # (exit, u, to) as one int64
        groups, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
        order = np.argsort(inverse.reshape(-1), kind="stable")
        ids = trie.sorted_ids[p[order]].astype(np.int32)
        starts = np.concatenate([[0], np.cumsum(counts)])
        head, to_of = np.divmod(groups, size)
        exit_of, u_of = np.divmod(head, L + 1)
        return _Moves(ids, starts, u_of, to_of, exit_of.astype(bool))

    # ------------------------------------------------------------ masks

    def words(self, q: int, n: int) -> np.ndarray:
        """The packed row of state ``q`` with ``n`` tokens left (read-only)."""
        if self._outer is None:
            self._solve()
        self._cuts._check()
        has_eos = len(self.eos) > 0
        limit = n - 1 - has_eos  # the distance a token's target may have
        eos = n >= 1 and has_eos and self.cdfa.accepts(q)
        if q < self.cdfa.n_outer:
            return self._outer_words(q, n, limit, eos)
        j, c, i = self.cdfa.decode(q)
        layers = self._layers[j]
        assert layers is not None
        c0, off = layers.canonical(c, self.L)
        order = self._cuts.orders.get(("counted", j, i, c0))
        if order is None:
            order = self._cuts.orders.put(("counted", j, i, c0), self._counter_order(j, c0, i))
        k = int(np.searchsorted(order[1], limit - off, side="right")) if n >= 1 else 0
        if n >= 1 and k == len(order[0]):
            return self.table.words(q)  # every allowed token fits (EOS is in it where complete)
        key = ("counted", j, i, c0, k, eos)
        row = self._cuts.rows.get(key)
        if row is None:
            row = self._cuts.rows.put(key, _cut(self.table.words(q), order[0], k, self.eos if eos else None))
        return row

    def _counter_order(self, j: int, c: int, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The tokens allowed at counter state ``(j, c, i)``, sorted by their target's
        distance, and those distances."""
        _, lo, hi, _ = self.cdfa.site_info(j)
        mv = self._moves(j, i)
        layers = self._layers[j]
        assert layers is not None
        r, need = hi - c, lo - c
        live = np.where(mv.exit, (mv.u >= need) & (mv.u <= r), mv.u <= r)
        dist = np.full(len(mv.u), INF, dtype=np.int64)
        inside = np.flatnonzero(live & ~mv.exit)
        if len(inside):
            us = mv.u[inside]
            block = np.stack([layers.get(c + v) for v in range(int(us.max()) + 1)])
            dist[inside] = block[us, mv.to[inside]]
        outside = np.flatnonzero(live & mv.exit)
        dist[outside] = self._values(mv.to[outside])
        sizes = np.diff(mv.starts)
        groups = np.flatnonzero(live)
        groups = groups[np.argsort(dist[groups], kind="stable")]
        ids = np.concatenate([mv.ids[mv.starts[g] : mv.starts[g + 1]] for g in groups.tolist()]) if len(groups) \
            else np.zeros(0, dtype=np.int32)
        return ids, np.repeat(dist[groups], sizes[groups])

    def _outer_words(self, q: int, n: int, limit: int, eos: bool) -> np.ndarray:
        """An outer state's cut row: its tokens sorted by their target's distance, a prefix kept."""
        order = self._cuts.orders.get(q)
        if order is None:
            ids, nxt = self.table._row(q)
            targets, inverse = np.unique(np.asarray(nxt, dtype=np.int64), return_inverse=True)
            d = self._values(targets)[inverse.reshape(-1)]
            o = np.argsort(d, kind="stable")
            order = self._cuts.orders.put(q, (np.asarray(ids)[o], d[o]))
        k = int(np.searchsorted(order[1], limit, side="right")) if n >= 1 else 0
        if n >= 1 and k == len(order[0]):
            return self.table.words(q)
        row = self._cuts.rows.get((q, k, eos))
        if row is None:
            row = self._cuts.rows.put((q, k, eos), _cut(self.table.words(q), order[0], k,
                                                         self.eos if eos else None))
        return row
