"""PDA nodes that no token can tell apart, so configurations on them share one mask.

A token reads at most ``depth`` bytes (the vocabulary's longest token) or one special token.
Two nodes whose futures agree for that many steps (the same bytes live, into nodes that agree
one step less; the same rules called, returning to nodes that agree one step less; both
accepting or neither) read the same tokens from the same continuation. So a configuration
set may have each node, in it and in its continuations, replaced by one representative of
its class (:class:`Horizon`), and the mask is memoised by that *canonical* key.

That is what lets a string with ``maxLength: 1000`` cost one mask, not one per position: its
positions are a chain of nodes, and all but the last ``depth`` of them agree up to ``depth``
bytes. It also shares the masks and slices of equal values under different properties.

The classes are Moore's partition refinement, stopped after ``depth`` rounds (or when stable,
then they are the full bisimulation). A node that calls a rule able to return without reading
is kept in a class of its own: its return would be reached at the same depth, which one round
per byte cannot account for.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.jit import numba
from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD
from gramc.runtime.earley import TOP, EarleyParser


def horizon_representatives(table: PDATable, depth: int) -> np.ndarray:
    """Per node, the smallest node that agrees with it for ``depth`` steps (see the module)."""
    call_nodes, call_rules, call_rets = table.call_entries()
    base = table.accept.astype(np.int64)
    own = np.unique(call_nodes[table.nullable()[call_rules]])
    base[own] = 2 + own
    base[DEAD] = 2 + DEAD
    ptr, lo, hi, targets = _entries(table.delta, call_nodes, call_rules, call_rets)
    return _refine(ptr, lo, hi, targets, base, int(depth))


@numba.njit(cache=True, nogil=True)
def _entries(delta, call_nodes, call_rules, call_rets):
    """Each node's live columns as runs (first and last column, target) in column order:
    its byte and token columns (``delta``), then its calls (the call entries, by node then
    rule, one run each, rule ``r`` standing as column ``delta.shape[1] + r``); and where each
    node's runs start (``ptr``). A row's runs are maximal, so equal rows have equal runs."""
    n, call_base = delta.shape
    ptr = np.zeros(n + 1, np.int64)
    for v in range(n):
        count = 0
        for c in range(call_base):
            t = delta[v, c]
            if t != DEAD and (c == 0 or delta[v, c - 1] != t):
                count += 1
        ptr[v + 1] = count
    for e in range(len(call_nodes)):
        ptr[call_nodes[e] + 1] += 1
    ptr = np.cumsum(ptr)
    lo = np.empty(ptr[n], np.int64)
    hi = np.empty(ptr[n], np.int64)
    targets = np.empty(ptr[n], np.int64)
    e = 0
    call = 0
    for v in range(n):
        e = ptr[v]
        for c in range(call_base):
            t = delta[v, c]
            if t == DEAD:
                continue
            if c == 0 or delta[v, c - 1] != t:
                lo[e], targets[e] = c, t
                e += 1
            hi[e - 1] = c
        while call < len(call_nodes) and call_nodes[call] == v:
            lo[e] = hi[e] = call_base + call_rules[call]
            targets[e] = call_rets[call]
            e += 1
            call += 1
    return ptr, lo, hi, targets


@numba.njit(cache=True, nogil=True)
def _refine(ptr, lo, hi, targets, base, depth):
    """Moore's refinement from the classes ``base`` over the runs (``lo``, ``hi``,
    ``targets``) of each node's ``ptr`` range, for at most ``depth`` rounds; returns each
    node's representative (the smallest node of its final class). A class of one node never
    splits again, so only the others' nodes are signed in each round (their class ids are
    ``0..k-1``; a node alone in its class keeps the id ``n + node``)."""
    n = len(base)
    cls = np.empty(n, np.int64)
    _classes_of(base, cls)
    active = _shared_classes(cls, n)
    size = 1
    while size < 2 * n:
        size *= 2
    heads = np.empty(size, np.int64)  # open addressing: the first node of each signature
    hashes = np.empty(n, np.uint64)
    new = np.empty(n, np.int64)
    for _ in range(depth):
        if not len(active):
            break
        heads[:] = -1
        count = 0
        for v in active:
            h = np.uint64(base[v]) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(ptr[v + 1] - ptr[v])
            for e in range(ptr[v], ptr[v + 1]):
                h = (h ^ np.uint64(lo[e] << 16 | hi[e])) * np.uint64(0x100000001B3)
                h = (h ^ np.uint64(cls[targets[e]])) * np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(29)
            hashes[v] = h
            slot = np.int64(h & np.uint64(size - 1))
            while True:
                u = heads[slot]
                if u < 0:
                    heads[slot] = v
                    new[v] = count
                    count += 1
                    break
                if hashes[u] == h and _same(u, v, ptr, lo, hi, targets, base, cls):
                    new[v] = new[u]
                    break
                slot = (slot + 1) & (size - 1)
        # Classes are only refined, so the same number of classes means none split: stable.
        stable = count == _count_classes(cls, active, n)
        for v in active:
            cls[v] = new[v]
        if stable:
            break
        active = _shared_classes(cls, n)
    rep = np.full(2 * n, -1, np.int64)
    out = np.empty(n, np.int64)
    for v in range(n):
        if rep[cls[v]] < 0:
            rep[cls[v]] = v
        out[v] = rep[cls[v]]
    return out


@numba.njit(cache=True, nogil=True)
def _shared_classes(cls, n):
    """The nodes whose class (of ``cls``, ids below ``n`` or ``n + node``) has other nodes;
    the others get their own id ``n + node`` in ``cls``."""
    size = np.zeros(2 * n, np.int64)
    for v in range(n):
        size[cls[v]] += 1
    out = np.empty(n, np.int64)
    k = 0
    for v in range(n):
        if size[cls[v]] > 1:
            out[k] = v
            k += 1
        else:
            cls[v] = n + v
    return out[:k]


@numba.njit(cache=True, nogil=True)
def _count_classes(cls, nodes, n):
    """How many distinct classes the ``nodes`` have."""
    seen = np.zeros(2 * n, np.bool_)
    count = 0
    for v in nodes:
        if not seen[cls[v]]:
            seen[cls[v]] = True
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def _classes_of(values, out):
    """Dense class ids of ``values`` (equal values, equal ids) into ``out``."""
    order = np.argsort(values)
    count = -1
    for i in range(len(order)):
        if i == 0 or values[order[i]] != values[order[i - 1]]:
            count += 1
        out[order[i]] = count


@numba.njit(cache=True, nogil=True)
def _same(u, v, ptr, lo, hi, targets, base, cls):
    """Do nodes ``u`` and ``v`` have the same signature over the classes ``cls``?"""
    if base[u] != base[v] or ptr[u + 1] - ptr[u] != ptr[v + 1] - ptr[v]:
        return False
    for k in range(ptr[u + 1] - ptr[u]):
        eu, ev = ptr[u] + k, ptr[v] + k
        if lo[eu] != lo[ev] or hi[eu] != hi[ev] or cls[targets[eu]] != cls[targets[ev]]:
            return False
    return True


class Horizon:
    """Canonical configuration keys of one parser: every node replaced by its representative."""

    def __init__(self, table: PDATable, parser: EarleyParser, depth: int):
        self.rep: list[int] = horizon_representatives(table, depth).tolist()
        self.merges = any(r != v for v, r in enumerate(self.rep))
        self._parser = parser
        self._canonical: dict[int, int] = {}

    def clear(self) -> None:
        """Forget the canonical ids (on a new parser generation: they are its old ids)."""
        self._canonical = {}

    def key(self, key: int) -> int:
        """The canonical id of the configuration key (or continuation) ``key``: the same
        set with each node, its continuations' too, replaced by its representative."""
        if not self.merges:
            return key
        done, rep, parser = self._canonical, self.rep, self._parser
        stack = [key]
        while stack:  # iterative: continuations nest as deep as the JSON does
            k = stack[-1]
            if k in done:
                stack.pop()
                continue
            members = parser.interned(k)
            todo = [w[1] for w in members if w is not TOP and w[1] not in done]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            if all(w is TOP or rep[w[0]] == w[0] and done[w[1]] == w[1] for w in members):
                done[k] = k  # already canonical (most keys): no new set to build and intern
            else:
                done[k] = parser.intern(frozenset(w if w is TOP else (rep[w[0]], done[w[1]]) for w in members))
        return done[key]
