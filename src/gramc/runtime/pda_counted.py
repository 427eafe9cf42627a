"""Counted repetitions of a called item (a string's ``maxLength``): tokens priced by count.

A counted repetition ``x{m,N}`` of a short item, over a few items, calls the item as a rule
(the compiler's ``MAX_INLINE_REPEAT_BYTES``: a JSON string with ``maxLength`` 3 or more): its
positions are a chain of nodes ``c_0 .. c_N``, ``c_i`` calling ``x`` and returning to
``c_{i+1}``. Every position is a different stack. The horizon
(:mod:`gramc.runtime.pda_horizon`) merges those further than the longest token from the end,
but the last ones, and every position of a chain shorter than that, would each be a walk of
the whole vocabulary through the stack DFA.

Yet the item reads the same way at every position. When its boundaries are unambiguous (it
calls nothing, its accepting nodes read nothing, it cannot be empty) and no byte that may
follow an iteration, where the repetition may stop, can also start one, a token read from a
node of the item reads the same bytes, ending in the same number of *further* iterations,
whatever the position. So per item node the vocabulary is walked once, through the item
looped on itself with the iterations counted (:class:`CountedSlice`), and a position with
``r`` iterations left takes the tokens that start at most ``r`` more. The tokens whose next
byte at a boundary cannot start an iteration are exits: they are walked on the real stack from
the chain node that boundary returns to, as the exits of :mod:`gramc.runtime.pda_slices`
are. A JSON string character takes one such walk per item node met (shared by every schema
compiled against the vocabulary), and a position then costs the OR of one cached row.
"""

from __future__ import annotations

import weakref

import numpy as np

from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD
from gramc.automata.trie import TokenTrie
from gramc.automata.walk import WalkBuffers, set_walked, walk
from gramc.bitmask import n_words
from gramc.limits import DEFAULT_RUNTIME_LIMITS, RuntimeLimits
from gramc.runtime.cache import LRUCache
from gramc.runtime.earley import TOP

#: Largest item priced by count: the counted walk's table has a row per item node and
#: iteration (a JSON string character has 21 nodes) ...
MAX_ITEM_NODES = 64
#: ... and at most this many rows in all (2,709 for that character and Llama 3's 128-byte
#: tokens; a vocabulary with far longer tokens prices only smaller items).
MAX_COUNTED_STATES = 65_536
#: Item shapes per vocabulary, shared by every table of this process. Each holds the positions
#: of the tokens it reads and up to ``max_len + 1`` packed rows: at most ~2 MB for Llama 3 (a
#: JSON string character has one shape per node met). Bound: ``RuntimeLimits.counted_shapes``
#: of the table that made its CountedItems last.
_SHAPES: "weakref.WeakKeyDictionary[TokenTrie, LRUCache]" = weakref.WeakKeyDictionary()


class CountedSlice:
    """The tokens read from one item node, looped, by the number of further iterations they
    start (``u``: 0 while they stay in the current one).

    ``alive`` are the sorted positions of the tokens read alive to their end, ascending by
    ``u``, the first ``alive_le[u]`` of them starting at most ``u``. ``exits`` (lo, hi, depth,
    u), ascending by ``u``, are the tokens that leave at the boundary after ``u + 1``
    iterations: they share their first ``depth`` bytes and are walked on from there, on the
    real stack. ``exit_le[u]`` rows have at most ``u``, over ``exit_tokens[i]`` tokens for the
    first ``i`` rows; ``exit_us`` are the distinct ``u`` of the rows."""

    def __init__(self, trie: TokenTrie, alive: np.ndarray, u_alive: np.ndarray, exits: np.ndarray, max_u: int):
        # Not the trie itself: the shapes are kept in a dictionary weakly keyed by it.
        self._sorted_ids, self._n_words = trie.sorted_ids, n_words(trie.vocab_size)
        self.alive = alive
        self.alive_le = np.searchsorted(u_alive, np.arange(max_u + 1), side="right")
        self.exits = exits
        self.exit_le = np.searchsorted(exits[:, 3], np.arange(max_u + 1), side="right")
        self.exit_tokens = np.concatenate([[0], np.cumsum(exits[:, 1] - exits[:, 0])])
        self.exit_us = np.unique(exits[:, 3]).tolist()
        self.max_u = max_u
        self._words: dict[int, np.ndarray] = {}

    def words(self, left: int) -> np.ndarray:
        """The packed row of the tokens alive with at most ``left`` further iterations (from
        the nearest smaller count's row where there is one: a few more tokens each)."""
        u = min(left, self.max_u)
        row = self._words.get(u)
        if row is None:
            below = max((v for v in self._words if v < u), default=-1)
            if below < 0:
                row = np.zeros(self._n_words, dtype=np.uint32)
            else:
                row = self._words[below].copy()
            lo = int(self.alive_le[below]) if below >= 0 else 0
            set_walked(row, self._sorted_ids, self.alive[lo:], int(self.alive_le[u]) - lo)
            row.flags.writeable = False
            self._words[u] = row
        return row


class CountedItems:
    """The items of ``table`` whose chains are priced by count (see the module doc), with each
    chain node's iterations left."""

    def __init__(self, table: PDATable, max_len: int, limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS):
        self._table = table
        self._limits = limits
        self.max_u = max_len  # an iteration reads a byte at least
        call_nodes, call_rules, call_rets = table.call_entries()
        self._calls = calls = table.calls()
        node_rule = table.node_rule
        reads = (table.delta[:, : table.n_byte_classes] != DEAD).any(axis=1)  # per node
        accept = table.accept.astype(bool)
        # Candidates: rules that call nothing, whose accepting nodes read nothing, and that
        # cannot be empty.
        calling = np.zeros(table.n_rules, dtype=bool)
        calling[node_rule[call_nodes]] = True
        final_reads = np.zeros(table.n_rules, dtype=bool)
        final_reads[node_rule[accept & reads]] = True
        candidate = ~calling & ~final_reads & ~accept[table.rule_start]
        # Per item: the nodes its calls return to, and the nodes calling it as their only
        # call (the horizon may put a chain's head for a node it returns to).
        rets: dict[int, set[int]] = {}
        only = np.bincount(call_nodes, minlength=table.n_nodes)[call_nodes] == 1
        for n, r, ret, single in zip(call_nodes.tolist(), call_rules.tolist(), call_rets.tolist(), only.tolist()):
            if candidate[r]:
                rets.setdefault(r, set()).update((ret, n) if single else (ret,))
        sizes = np.bincount(node_rule[node_rule >= 0], minlength=table.n_rules)  # the dead node has none
        small = (sizes <= MAX_ITEM_NODES) & (sizes * (max_len + 1) <= MAX_COUNTED_STATES)
        self.rets = {r: frozenset(ys) for r, ys in rets.items() if small[r] and self._chained(r, ys)}
        if self.rets:
            flow = _Flow(table, calls)
            start = table.rule_start
            exits = {r: self._exit_bytes(r, rets, flow) for r, rets in self.rets.items()}
            self._exits = {r: bits for r, bits in exits.items() if not flow.first_of(int(start[r])) & bits}
            self.rets = {r: self.rets[r] for r in self._exits}
        rule_item = np.full(table.n_rules, -1, dtype=np.int64)
        rule_item[list(self.rets)] = list(self.rets)
        # Per node: its priced item, or -1 (the dead node too).
        self.item_of: list[int] = np.where(node_rule >= 0, rule_item[node_rule], -1).tolist()
        self._left: dict[int, int] = {}
        self._ahead: dict[tuple[int, int], list[int]] = {}
        self._by_node = LRUCache(limits.counted_shapes)
        self._shared: LRUCache | None = None  # the vocabulary's shapes, on the first slice

    def set_limits(self, limits: RuntimeLimits) -> None:
        """Bound the kept slices by ``limits`` (this table's start empty)."""
        self._limits = limits
        self._by_node = LRUCache(limits.counted_shapes)
        if self._shared is not None:
            self._shared.resize(limits.counted_shapes)

    def cache_stats(self) -> dict[str, dict[str, int]]:
        out = {"counted_slices": self._by_node.stats()}
        if self._shared is not None:
            out["counted_shapes"] = self._shared.stats()
        return out

    def chain_nodes(self) -> np.ndarray:
        """The chain nodes of the priced items (each calls its item as its only call),
        ascending: the stack DFA prices the tokens read from them by count."""
        return np.array(sorted({y for item, ys in self.rets.items() for y in ys if self._link(y) == item}),
                        dtype=np.int64)

    def _chained(self, item: int, nodes) -> bool:
        """Does one of ``nodes`` call ``item`` as its only call, returning to a node that
        does so again (a chain two iterations long, at least)?"""
        return any(self._link(y) == item and self._link(self._calls[y][0][1]) == item for y in nodes)

    def _link(self, node: int) -> int:
        """The item ``node`` calls as its only call, or -1."""
        c = self._calls[node]
        return c[0][0] if len(c) == 1 else -1

    def _exit_bytes(self, item: int, rets, flow: "_Flow") -> int:
        """The byte classes (bits) that may be read at a boundary of ``item`` other than by
        another iteration: what its return nodes read, or what follows their rule where they
        may return."""
        table = self._table
        links = [y for y in rets if self._link(y) == item]  # a chain's nodes: most of them
        # A link reads its own bytes or calls the item again, which cannot be empty: it may
        # return only where it accepts. Its bytes and rule are taken for all links at once.
        live = (table.delta[links, : table.n_byte_classes] != DEAD).any(axis=0)
        out = int.from_bytes(np.packbits(live, bitorder="little").tobytes(), "little")
        rules = set(table.node_rule[links][table.accept[links].astype(bool)].tolist())
        for y in rets.difference(links):
            out |= flow.first_of(y)
            if flow.ends(y):
                rules.add(int(table.node_rule[y]))
        for r in rules:
            out |= flow.follow(r)
        return out

    def parts(self, node: int, k: int, interned) -> list[tuple[int, int]] | None:
        """The (return node, continuation) entries of the configuration ``(node, k)`` where
        ``node`` is in a priced item and every entry of ``k`` returns into one of its chains;
        else None."""
        item = self.item_of[node]
        if item < 0:
            return None
        entries = interned(k)
        rets = self.rets[item]
        if TOP in entries or not all(y in rets for y, _ in entries):
            return None
        return list(entries)

    def left(self, y: int, item: int) -> int:
        """The iterations of ``item`` the chain allows after returning to ``y`` (0 where
        ``y`` does not call it again), up to ``max_u`` (no token can start more): a chain
        that loops back (``item*`` kept as a rule's call) allows as many as wanted."""
        if self._link(y) != item:
            return 0
        out = self._left.get(y)
        if out is None:
            path, seen, z = [], set(), y
            while self._link(z) == item and z not in self._left and z not in seen:
                path.append(z)
                seen.add(z)
                z = self._calls[z][0][1]
            out = self._left[z] if z in self._left else self.max_u if z in seen else 0
            for v in reversed(path):
                out = min(out + 1, self.max_u)
                self._left[v] = out
        return out

    def ahead(self, y: int, item: int) -> list[int]:
        """The chain nodes from ``y``: the node returned to after each further iteration of
        ``item`` (as many as the longest token can start)."""
        out = self._ahead.get((y, item))
        if out is None:
            out = [y]
            for _ in range(min(self.left(y, item), self.max_u)):
                out.append(self._calls[out[-1]][0][1])
            self._ahead[(y, item)] = out
        return out

    def slice_for(self, node: int, trie: TokenTrie, buf: WalkBuffers) -> CountedSlice:
        """The :class:`CountedSlice` of item node ``node`` (shared by shape across tables)."""
        found = self._by_node.get(node)
        if found is None:
            table = self._table
            item = int(table.node_rule[node])
            nodes = np.flatnonzero(table.node_rule == item)
            local = np.full(table.n_nodes, -1, dtype=np.int64)
            local[nodes] = np.arange(len(nodes))
            byte_class = table.byte_class.astype(np.int64)
            targets = table.delta[nodes][:, byte_class]
            rows = np.where(targets == DEAD, -1, local[targets])  # per byte; -1: dead
            finals = table.accept[nodes].astype(bool)
            bits = self._exits[item]
            exit_bytes = np.array([(bits >> int(c)) & 1 for c in byte_class], dtype=bool)
            start = int(local[table.rule_start[item]])
            found = counted_slice(rows, finals, exit_bytes, start, int(local[node]), self.max_u, trie, buf,
                                  self._shared_shapes(trie))
            self._by_node.put(node, found)
        return found

    def _shared_shapes(self, trie: TokenTrie) -> LRUCache:
        """The process's shapes for ``trie``, bounded by this table's limits."""
        self._shared = shared_shapes(trie, self._limits.counted_shapes, self._shared)
        return self._shared


def shared_shapes(trie: TokenTrie, bound: int, last: LRUCache | None = None) -> LRUCache:
    """The process's counted shapes for ``trie``'s vocabulary, bounded by ``bound`` (the
    limits of the table that uses them; re-applied when ``last``, the cache that table used
    before, is another one)."""
    shared = _SHAPES.get(trie)
    if shared is None:
        shared = _SHAPES[trie] = LRUCache(bound)
    elif shared is not last:
        shared.resize(bound)
    return shared


def counted_slice(rows: np.ndarray, finals: np.ndarray, exit_bytes: np.ndarray, start: int, node: int,
                  max_u: int, trie: TokenTrie, buf: WalkBuffers, shared: LRUCache) -> CountedSlice:
    """The :class:`CountedSlice` of item node ``node`` (local ids ``0..m-1``): ``rows`` int
    ``[m, 256]`` the next node per byte (-1: dead), ``finals`` the nodes that end an
    iteration, ``exit_bytes`` bool ``[256]`` the bytes that may follow one, ``start`` the
    node an iteration begins at. Shared by shape, in ``shared``, across tables (and
    automaton kinds)."""
    head = np.array([node, start, max_u], dtype=np.int64)
    key = b"".join(np.ascontiguousarray(a).tobytes() for a in (head, rows.astype(np.int64),
                                                             finals.astype(bool), exit_bytes.astype(bool)))
    found = shared.get(key)
    if found is None:
        found = shared.put(key, _counted_walk(rows, finals, exit_bytes, start, node, max_u, trie, buf))
    return found


def _counted_walk(rows: np.ndarray, finals: np.ndarray, exit_bytes: np.ndarray, start: int, node: int,
                  max_u: int, trie: TokenTrie, buf: WalkBuffers) -> CountedSlice:
    """The :class:`CountedSlice` of :func:`counted_moves` (the tokens' end nodes dropped)."""
    pos, u, _, exits = counted_moves(rows, finals, exit_bytes, start, node, max_u, trie, buf)
    order = np.argsort(u.astype(np.int16), kind="stable")  # a stable sort of 16-bit keys is a radix sort
    return CountedSlice(trie, pos[order], u[order].astype(np.int16), exits, max_u)


def counted_moves(rows: np.ndarray, finals: np.ndarray, exit_bytes: np.ndarray, start: int, node: int,
                  max_u: int, trie: TokenTrie, buf: WalkBuffers
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every token walked from item node ``node`` through the item looped on itself, counted:
    state ``1 + u*m + i`` is item node ``i`` after ``u`` further iterations began, and state
    ``1 + (max_u+1)*m + u`` the exit at the boundary after ``u + 1`` (a marked state with no
    way on). Returns the tokens read alive (sorted positions, their ``u``, their end node)
    and the exits (rows of lo, hi, depth of the exit byte, u; ascending by u). The token
    budgets of counted DFAs need the end nodes; masks need only the counts."""
    # The item's own byte classes: a table of a few columns walks several times faster.
    columns, cls = np.unique(np.vstack([rows, exit_bytes[None]]), axis=1, return_inverse=True)
    rows, exit_bytes = columns[:-1], columns[-1].astype(bool)
    m = len(rows)
    base = 1 + np.arange(max_u + 1, dtype=np.int64) * m
    n_states = 1 + (max_u + 1) * m + max_u + 1
    trans = np.zeros((n_states, rows.shape[1]), dtype=np.int32)
    body = np.where(rows[None] >= 0, base[:, None, None] + rows[None], DEAD)  # (u, node, byte)
    again = rows[start]
    exit_states = 1 + (max_u + 1) * m + np.arange(max_u + 1)
    boundary = np.where(exit_bytes[None], exit_states[:, None], DEAD)  # (u, byte)
    more = np.zeros_like(boundary)
    more[:-1] = np.where(again[None] >= 0, base[1:, None] + again[None], DEAD)
    body[:, finals] = np.where(again[None] >= 0, more, boundary)[:, None, :]
    trans[1 : 1 + (max_u + 1) * m] = body.reshape(-1, rows.shape[1])
    marker = np.zeros(n_states, dtype=np.bool_)
    marker[exit_states] = True
    buf.ranges[0] = (0, len(trie.sorted_ids), 0, 1 + node)
    ne, nh, _, _ = walk(trans, cls.reshape(-1).astype(np.int64), trie.blob, trie.offsets, trie.lengths,
                        trie.lcp, trie.skip, trie.max_len, buf.ranges, 1, marker, True, buf.pos, buf.next, 0,
                        buf.hits, buf.pending, buf.missing)
    pos, end = buf.pos[:ne], buf.next[:ne]
    inside = ~marker[end]  # a token ending on an exit byte is the exit walk's to judge
    u, ends = np.divmod(end[inside] - 1, m)
    exits = buf.hits[:nh].copy()
    exits[:, 2] -= 1  # from the boundary: the exit byte is read on the real stack
    exits[:, 3] -= 1 + (max_u + 1) * m
    exits = exits[np.argsort(exits[:, 3], kind="stable")]
    return pos[inside].copy(), u, ends, exits


class _Flow:
    """What a PDA may read first from a node, and after a rule returns, as bit sets of byte
    classes (for :class:`CountedItems`: which bytes may end an iteration's chain)."""

    def __init__(self, table: PDATable, calls):
        self._table, self._calls = table, calls
        self._null = table.nullable()
        self._first: dict[int, int] = {}
        self._follow: dict[int, int] = {}
        _, call_rules, call_rets = table.call_entries()
        self._sites: dict[int, list[int]] = {}
        for r, ret in zip(call_rules.tolist(), call_rets.tolist()):
            self._sites.setdefault(r, []).append(ret)

    def reads(self, node: int) -> int:
        """The byte classes ``node`` reads itself."""
        live = self._table.delta[node, : self._table.n_byte_classes] != DEAD
        return int.from_bytes(np.packbits(live, bitorder="little").tobytes(), "little")

    def _closure(self, node: int) -> set[int]:
        """The nodes reachable from ``node`` without reading: rule starts called, and return
        nodes of calls to rules that may be empty."""
        seen, todo = {node}, [node]
        start = self._table.rule_start
        while todo:
            for r, ret in self._calls[todo.pop()]:
                for v in (int(start[r]), ret) if self._null[r] else (int(start[r]),):
                    if v not in seen:
                        seen.add(v)
                        todo.append(v)
        return seen

    def first_of(self, node: int) -> int:
        """The byte classes some token may read first from ``node`` before its rule returns."""
        out = self._first.get(node)
        if out is None:
            out = 0
            for v in self._closure(node):
                out |= self.reads(v)
            self._first[node] = out
        return out

    def ends(self, node: int) -> bool:
        """Can ``node``'s rule return from it without reading?"""
        return self._table._reaches_accept(node, self._calls, self._null)

    def follow(self, rule: int) -> int:
        """The byte classes that may be read right after ``rule`` returns (its callers' return
        nodes, and what follows their rules where those may return in turn)."""
        out = self._follow.get(rule)
        if out is None:
            out = 0
            seen, todo = {rule}, [rule]
            while todo:
                for ret in self._sites.get(todo.pop(), ()):
                    out |= self.first_of(ret)
                    if self.ends(ret):
                        r2 = int(self._table.node_rule[ret])
                        if r2 not in seen:
                            seen.add(r2)
                            todo.append(r2)
            self._follow[rule] = out
        return out
