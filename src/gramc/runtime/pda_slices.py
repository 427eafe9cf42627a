"""Per PDA node, the tokens it reads without touching the stack: walked once, reused per stack.

A lazy table's mask of a configuration set ``F`` is the union, over its configurations
``(node, k)``, of the tokens that configuration reads (a stack-DFA state is a set, and a token
lives in a set exactly when it lives from one of its members). A token read from a node
through *plain* nodes only (no calls, not accepting: nothing is pushed or popped) lives or
dies whatever the stack ``k`` is, since the real states on the way are ``{(m, k)}``. So per
node, the vocabulary is walked once through the PDA's own byte transitions, where entering a
non-plain node is an *exit*:

- tokens read alive to their end, or ending on an exit byte (the node entered is real), are
  accepted whatever the stack: one packed row;
- tokens that die before an exit are rejected;
- the sub-trees that read on past an exit depend on the stack, and are the only tokens
  walked per configuration: through the stack DFA, from the exit node on that configuration's
  stack, at the exit depth.

Inside a JSON string body, that is the tokens with a ``"`` (1-3% of a vocabulary) instead of
all of them.

String bodies are also *loops* (strongly connected plain nodes) that recur under many nodes
(one per property). A node of a loop is walked with the loop's other exits folded in as well,
and the result is shared by every node of the same shape (the loop's transitions renumbered
from the node). A node whose first byte enters a loop (the node before a string's first
character, a property name that may also be any other key) takes the slice of the loop node
it enters with most tokens, and walks only the tokens whose first byte leads it elsewhere:
its own shape would differ from node to node in those few bytes, and cost a whole walk each.
"""

from __future__ import annotations

import weakref

import numpy as np

from gramc.automata.jit import numba
from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD
from gramc.automata.trie import TokenTrie
from gramc.automata.walk import set_walked, shared_buffers, walk
from gramc.bitmask import n_words
from gramc.limits import DEFAULT_RUNTIME_LIMITS, RuntimeLimits
from gramc.runtime.cache import LRUCache

#: Loops larger than this are walked per node (their shape would cost more than it saves).
MAX_LOOP_NODES = 256
#: A node whose first byte leaves the plain nodes for more than this share of the tokens is
#: not sliced: nearly all its tokens would be walked on the stack again anyway.
MAX_FIRST_EXIT_SHARE = 0.25
#: Loop shapes per vocabulary (each holds a packed row), shared by every table walked against
#: the same trie in this process: a JSON string body has the same shape in every schema. Bound:
#: ``RuntimeLimits.shared_slice_shapes`` of the table that made its NodeSlices last.
_SHAPES: "weakref.WeakKeyDictionary[TokenTrie, LRUCache]" = weakref.WeakKeyDictionary()
#: The byte classes of a shape written out over all 256 bytes (so no table's classes are in it).
_EVERY_BYTE = np.arange(256, dtype=np.int64)


class Slice:
    """The tokens of one node: ``words`` (packed) are read alive whatever the stack. Each row
    of ``exits`` (lo, hi, depth, node) says that the tokens at sorted positions ``lo..hi``
    share their first ``depth`` bytes, the last of which entered ``node`` (not plain, or out
    of the loop): from there they must be walked on the real stack (the tokens ending right
    there are in ``words`` too). ``exit_nodes`` are the distinct nodes of ``exits``,
    ``exit_at`` the index of each row's node among them, and ``exit_tokens`` the number of
    tokens under the exits. Read-only by convention (a plain class: one is made per node
    met, and a frozen dataclass costs several times more to make)."""

    __slots__ = ("words", "exits", "exit_nodes", "exit_at", "exit_tokens")

    def __init__(self, words: np.ndarray, exits: np.ndarray, exit_nodes: list[int], exit_at: np.ndarray,
                 exit_tokens: int):
        self.words, self.exits, self.exit_nodes = words, exits, exit_nodes
        self.exit_at, self.exit_tokens = exit_at, exit_tokens


def _slice(words: np.ndarray, exits: np.ndarray) -> Slice:
    """The :class:`Slice` of ``words`` and ``exits``, with the exits' nodes gathered once."""
    nodes, at, n_tokens = _exit_summary(exits)
    return Slice(words, exits, nodes.tolist(), at, n_tokens)


class NodeSlices:
    """The :class:`Slice` of each node of ``table`` against ``trie``, made on first use."""

    def __init__(self, table: PDATable, trie: TokenTrie, short_loops: int | None = None,
                 limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS):
        """``short_loops``: where every node is plain (a DFA's table), its loops would be one
        strongly connected component of most nodes (a JSON document's structure loops back
        through every string), too large to share by shape; then only the transitions on
        cycles of at most this many bytes make loops (a string body's characters and escapes).
        ``limits``: the bounds of the slices kept (``node_slices``, ``shared_slice_shapes``)."""
        self.trie = trie
        self._succ = np.ascontiguousarray(table.delta[:, : table.n_byte_classes], dtype=np.int32)
        calls = table.calls()
        plain = np.array([not c for c in calls], dtype=np.bool_) & ~table.accept.astype(np.bool_)
        plain[DEAD] = False
        cyclic = self._succ if short_loops is None else _on_short_cycles(self._succ, short_loops)
        self._comp = _loop_components(cyclic, plain)
        # Nodes per loop, counted once: counting per loop met cost ~10 us a loop on large tables.
        self._sizes: list[int] = np.bincount(self._comp[self._comp >= 0]).tolist()
        self._shape_scratch = np.full(len(self._succ), -1, dtype=np.int64)
        # The plain walk: the byte transitions, where entering a node that is not plain is an
        # exit (a marked state with no way on); the last row is the start node's own.
        n = len(self._succ)
        self._plain = np.zeros((n + 1, self._succ.shape[1]), dtype=np.int32)
        self._plain[:n][plain] = self._succ[plain]
        self._exit = np.append(~plain, False)
        self._exit[DEAD] = False
        self._byte_class = table.byte_class.astype(np.int64)
        self._n_words = n_words(trie.vocab_size)
        self._reads: list[bool] = np.any(self._succ, axis=1).tolist()
        # Per first byte: the sorted positions of the tokens starting with it, and how many.
        starts = trie.blob[trie.offsets].astype(np.int64)
        self._first_lo = np.searchsorted(starts, np.arange(256), side="left").astype(np.int64)
        self._first_hi = np.searchsorted(starts, np.arange(256), side="right").astype(np.int64)
        self._first_count = (self._first_hi - self._first_lo).astype(np.float64)
        # Their share per byte class, to price a node's first-byte exits.
        self._first_share = np.bincount(self._byte_class, weights=self._first_count,
                                        minlength=self._succ.shape[1]) / max(1, len(trie.sorted_ids))
        self.set_limits(limits)

    def set_limits(self, limits: RuntimeLimits) -> None:
        """Bound the kept slices by ``limits`` (this table's start empty)."""
        self._by_node = LRUCache(limits.node_slices)  # Slice, or None: not sliced
        self._by_local = LRUCache(limits.node_slices)  # this table's loop shapes, by byte class
        shapes = _SHAPES.get(self.trie)
        if shapes is None:
            shapes = _SHAPES[self.trie] = LRUCache(limits.shared_slice_shapes)
        else:
            shapes.resize(limits.shared_slice_shapes)
        self._by_shape = shapes

    def cache_stats(self) -> dict[str, dict[str, int]]:
        return {"node_slices": self._by_node.stats(), "shared_slice_shapes": self._by_shape.stats()}

    def reads(self, node: int) -> bool:
        """Does ``node`` read any byte itself?"""
        return self._reads[node]

    def slice_for(self, node: int) -> Slice | None:
        """The slice of ``node`` (which reads some byte), or None where slicing does not pay:
        then its configurations are walked on the stack whole."""
        found = self._by_node.get(node, False)
        if found is False:
            found = self._by_node.put(node, self._make(node))
        return found

    def _make(self, node: int) -> Slice | None:
        row = self._succ[node]
        # The loops the node is in or enters on its first byte (a string body, and the
        # node before its first character): their tokens are shared by shape.
        exit_share, loops = _first_step(row, self._exit, self._first_share, self._comp, node)
        if exit_share > MAX_FIRST_EXIT_SHARE:
            return None
        comps = set(loops.tolist())
        if comps and sum(self._sizes[c] for c in comps) <= MAX_LOOP_NODES:
            if self._comp[node] < 0:
                found = self._entry_slice(row)
                if found is not None:
                    return found
            return self._loop_slice(node, comps)
        self._plain[-1] = row
        return self._walk(self._plain, self._exit, len(self._plain) - 1)

    def _loop_slice(self, node: int, comps: set[int]) -> Slice:
        """The slice of ``node`` from the walk of its loops' shape from it (shared by every
        node of the same shape)."""
        local, targets = _shape(self._succ, self._comp, np.array(sorted(comps), dtype=np.int64), node,
                                self._shape_scratch)
        local_key = local.tobytes()
        shared = self._by_local.get(local_key)  # this table's shapes, by byte class
        if shared is None:
            wide = local[:, self._byte_class]  # per byte: the same string body in every table
            key = wide.tobytes()
            shared = self._by_shape.get(key)
            if shared is None:
                shared = self._by_shape.put(key, self._loop_walk(wide, len(targets)))
            self._by_local.put(local_key, shared)
        exits = shared.exits.copy()
        exits[:, 3] = targets[exits[:, 3] - (len(local) + 1)]  # local exit -> its node
        # Exits are distinct nodes, so the shared slice's distinct exits map one to one.
        nodes = targets[np.array(shared.exit_nodes, dtype=np.int64) - (len(local) + 1)].tolist()
        return Slice(shared.words, exits, nodes, shared.exit_at, shared.exit_tokens)

    def _entry_slice(self, row: np.ndarray) -> Slice | None:
        """The slice of the node whose transitions are ``row``, which enters a loop on its first
        byte (the node before a string's first character, or a property name that may also be
        any string) but is not in it, from the slice of the loop node it enters with most
        tokens: a token whose first byte leads both nodes to the same node is read the same way
        from both. Only the tokens whose first byte leads this node elsewhere are walked here.
        None if the loop node has no slice."""
        target = row[self._byte_class]  # per first byte
        like = _heaviest_entered(target, self._comp, self._first_count)
        base = self.slice_for(like)
        if base is None:
            return None
        copy, lo, hi, exits, rows = _entry_plan(target, self._succ[like][self._byte_class], self._first_lo,
                                                self._first_hi, self._first_count, base.exits,
                                                self.trie.blob, self.trie.offsets)
        if not len(lo) and not copy:
            return base  # no first byte differs
        if copy:
            # Few tokens start with a byte both read the same way (a node that reads one
            # byte of a loop's many): copy those rather than clear the rest.
            words = np.zeros_like(base.words)
            _copy_ranges(words, base.words, self.trie.sorted_ids, lo, hi)
        else:
            words = base.words.copy()
            _clear_ranges(words, self.trie.sorted_ids, lo, hi)
        # The tokens starting with the differing bytes, walked from depth 1 (a byte that enters
        # a node that is not plain is an exit there: the walk records it as a hit).
        walked_exits = self.walk_rows(self._plain, self._exit, rows, into=words)
        words.flags.writeable = False
        return _slice(words, np.concatenate([exits, walked_exits]))

    def _loop_walk(self, wide: np.ndarray, n_exits: int) -> Slice:
        """Every token walked from local state 1 through ``wide`` (a shape's rows, one column
        per byte; exits are marked states with no way on); the exits' rows keep their local
        numbers."""
        m = len(wide)
        trans = np.zeros((m + 1 + n_exits, 256), dtype=np.int32)
        trans[1 : m + 1] = wide
        marker = np.zeros(m + 1 + n_exits, dtype=np.bool_)
        marker[m + 1 :] = True
        return self._walk(trans, marker, 1, _EVERY_BYTE)

    def _walk(self, trans: np.ndarray, marker: np.ndarray, start: int,
              cls: np.ndarray | None = None) -> Slice:
        """Every token walked from ``start`` through ``trans``, whose marked states are exits.
        The walk starts past the first byte, at the tokens of each first byte ``start``
        reads: a node reading few first bytes does not scan the other 250 first bytes."""
        cls = self._byte_class if cls is None else cls
        rows = _first_rows(trans[start][cls], self._first_lo, self._first_hi)
        words = np.zeros(self._n_words, dtype=np.uint32)
        exits = self.walk_rows(trans, marker, rows, words, cls)
        words.flags.writeable = False
        return _slice(words, exits)

    def walk_rows(self, trans: np.ndarray, marker: np.ndarray, rows: np.ndarray, into: np.ndarray,
                   cls: np.ndarray | None = None) -> np.ndarray:
        """The tokens of the disjoint ranges ``rows`` (see :func:`walk`) walked through
        ``trans`` (columns: ``cls``, the table's byte classes by default): those read alive
        are set in the packed row ``into``; returns the exits (hits) met."""
        trie, buf = self.trie, shared_buffers(len(self.trie.sorted_ids))
        buf.ranges[: len(rows)] = rows
        cls = self._byte_class if cls is None else cls
        ne, nh, _, _ = walk(trans, cls, trie.blob, trie.offsets, trie.lengths, trie.lcp,
                            trie.skip, trie.max_len, buf.ranges, len(rows), marker, True,
                            buf.pos, buf.next, 0, buf.hits, buf.pending, buf.missing)
        # A token ending on an exit byte is alive too: the node it enters is a real node.
        set_walked(into, trie.sorted_ids, buf.pos, ne)
        return buf.hits[:nh].copy()


@numba.njit(cache=True, nogil=True)
def _clear_ranges(words, sorted_ids, lo, hi):
    """Clear in the packed row ``words`` the tokens at sorted positions ``lo[i]..hi[i]``."""
    for i in range(len(lo)):
        for p in range(lo[i], hi[i]):
            t = sorted_ids[p]
            words[t >> 5] &= ~(np.uint32(1) << np.uint32(t & 31))


@numba.njit(cache=True, nogil=True)
def _exit_summary(exits):
    """The distinct exit nodes of ``exits`` with each row's index among them (see
    :func:`_distinct`), and the number of tokens under the rows."""
    nodes, at = _distinct(exits[:, 3])
    return nodes, at, np.int64((exits[:, 1] - exits[:, 0]).sum())


@numba.njit(cache=True, nogil=True)
def _distinct(values):
    """The distinct ``values`` ascending, and the index of each value among them: np.unique
    with ``return_inverse``, without its fixed cost on the few exits of a slice."""
    order = np.argsort(values)
    out = np.empty(len(values), np.int64)
    at = np.empty(len(values), np.int64)
    n = 0
    for i in order:
        if n == 0 or out[n - 1] != values[i]:
            out[n] = values[i]
            n += 1
        at[i] = n - 1
    return out[:n], at


@numba.njit(cache=True, nogil=True)
def _first_step(row, exit_, first_share, comp, node):
    """For a node's transitions ``row`` (per byte class): the share of the tokens whose
    first byte leaves the plain nodes, and the loops (ids of ``comp``) the node is in or
    enters on its first byte."""
    share = 0.0
    loops = np.empty(len(row) + 1, np.int64)
    n = 0
    if comp[node] >= 0:
        loops[0] = comp[node]
        n = 1
    for c in range(len(row)):
        t = row[c]
        if t == DEAD:
            continue
        if exit_[t]:
            share += first_share[c]
        if comp[t] >= 0:
            loops[n] = comp[t]
            n += 1
    return share, loops[:n]


@numba.njit(cache=True, nogil=True)
def _entry_plan(target, like, first_lo, first_hi, first_count, base_exits, blob, offsets):
    """How an entry node's slice is made from the slice of the loop node it enters
    (``target`` and ``like``: their next node per first byte). Returns (copy, lo, hi, exits,
    rows): ``copy`` says whether the base tokens to keep, those of the first bytes both
    read the same live way, are fewer than the others, and so are copied rather than the
    others cleared; ``lo..hi`` are the sorted-position ranges to copy or clear (empty, with
    ``copy`` False, when no first byte differs); ``exits`` are the base exits under first
    bytes that do not differ; ``rows`` are the walk rows (lo, hi, depth 1, node) of the
    differing first bytes that the entry node reads."""
    n_differ, n_agree = 0.0, 0.0
    differ = np.zeros(256, np.bool_)
    n_rows = 0
    for b in range(256):
        if first_hi[b] <= first_lo[b]:
            continue
        if target[b] != like[b]:
            differ[b] = True
            n_differ += first_count[b]
            n_rows += target[b] != DEAD
        elif target[b] != DEAD:
            n_agree += first_count[b]
    copy = n_differ > 0 and n_agree < n_differ
    n_ranges = 0
    lo = np.empty(256, np.int64)
    hi = np.empty(256, np.int64)
    if n_differ > 0:
        for b in range(256):
            if first_hi[b] > first_lo[b] and (differ[b] if not copy else not differ[b] and target[b] != DEAD):
                lo[n_ranges], hi[n_ranges] = first_lo[b], first_hi[b]
                n_ranges += 1
    exits = np.empty_like(base_exits)
    kept = 0
    for i in range(len(base_exits)):
        if not differ[blob[offsets[base_exits[i, 0]]]]:
            exits[kept] = base_exits[i]
            kept += 1
    rows = np.empty((n_rows, 4), np.int64)
    r = 0
    for b in range(256):
        if differ[b] and target[b] != DEAD:
            rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = first_lo[b], first_hi[b], 1, target[b]
            r += 1
    return copy, lo[:n_ranges], hi[:n_ranges], exits[:kept], rows


@numba.njit(cache=True, nogil=True)
def _first_rows(target, first_lo, first_hi):
    """The walk rows (lo, hi, depth 1, node) of the first bytes some token starts with that
    lead somewhere (``target``: the next node per first byte)."""
    rows = np.empty((256, 4), np.int64)
    n = 0
    for b in range(256):
        if target[b] != DEAD and first_hi[b] > first_lo[b]:
            rows[n, 0], rows[n, 1], rows[n, 2], rows[n, 3] = first_lo[b], first_hi[b], 1, target[b]
            n += 1
    return rows[:n]


@numba.njit(cache=True, nogil=True)
def _heaviest_entered(target, comp, count):
    """Of the loop nodes that ``target`` (a node per first byte) enters, the one entered by
    the most tokens (``count`` per first byte); the caller knows there is one."""
    nodes = np.empty(256, np.int64)
    weights = np.zeros(256, np.float64)
    n = 0
    for b in range(256):  # a node reads few distinct targets: a linear search is cheapest
        node = target[b]
        if node == DEAD or comp[node] < 0:
            continue
        j = 0
        while j < n and nodes[j] != node:
            j += 1
        if j == n:
            nodes[n] = node
            n += 1
        weights[j] += count[b]
    best = 0
    for j in range(1, n):
        if weights[j] > weights[best] or weights[j] == weights[best] and nodes[j] < nodes[best]:
            best = j
    return nodes[best]


@numba.njit(cache=True, nogil=True)
def _copy_ranges(words, source, sorted_ids, lo, hi):
    """Copy from the packed row ``source`` into ``words`` the bits of the tokens at sorted
    positions ``lo[i]..hi[i]``."""
    for i in range(len(lo)):
        for p in range(lo[i], hi[i]):
            t = sorted_ids[p]
            words[t >> 5] |= source[t >> 5] & (np.uint32(1) << np.uint32(t & 31))


@numba.njit(cache=True, nogil=True)
def _shape(succ, comp, loops, node, index):
    """The transitions from ``node`` through the nodes of the loops ``loops`` (ids of
    ``comp``), renumbered in breadth-first order from ``node``: local states 1..m, 0 is DEAD,
    and m+1+j is the j-th node entered on the way out (back into ``node`` too unless it is in
    a loop). ``index`` is scratch, -1 everywhere (and left so). Returns the local rows and the
    nodes of the exits."""
    n_cols = succ.shape[1]
    order = [node]
    outs = [node]
    outs.pop()
    index[node] = 1
    rows = np.empty((16, n_cols), np.int32)
    i = 0
    while i < len(order):
        if i == len(rows):
            grown = np.empty((2 * len(rows), n_cols), np.int32)
            grown[:i] = rows
            rows = grown
        for c in range(n_cols):
            t = succ[order[i], c]
            if t == DEAD:
                rows[i, c] = DEAD
                continue
            inside = False
            for loop in loops:
                inside |= comp[t] == loop
            if inside:
                if index[t] < 0:
                    order.append(t)
                    index[t] = len(order)
                rows[i, c] = index[t]
            else:  # an exit: numbered -1 - j, renumbered once m is known
                if index[t] <= -2:  # exits are kept as -2 - j in index (node too, if entered)
                    j = -2 - index[t]
                else:
                    j = len(outs)
                    outs.append(t)
                    index[t] = -2 - j
                rows[i, c] = -1 - j
        i += 1
    m = len(order)
    local = rows[:m].copy()
    for r in range(m):
        for c in range(n_cols):
            if local[r, c] < 0:
                local[r, c] = m - local[r, c]
    for t in order:
        index[t] = -1
    for t in outs:
        index[t] = -1
    return local, np.array(outs, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _on_short_cycles(succ, max_cycle):
    """``succ`` with DEAD for every transition that is on no cycle of at most ``max_cycle``
    transitions (u -> v is kept when v reaches u again within ``max_cycle - 1``)."""
    n, n_cols = succ.shape
    count = np.zeros(n + 1, np.int64)  # predecessors, as CSR
    for u in range(n):
        for c in range(n_cols):
            if succ[u, c] != DEAD:
                count[succ[u, c] + 1] += 1
    ptr = np.cumsum(count)
    preds = np.empty(ptr[-1], np.int64)
    fill = ptr[:-1].copy()
    for u in range(n):
        for c in range(n_cols):
            v = succ[u, c]
            if v != DEAD:
                preds[fill[v]] = u
                fill[v] += 1
    out = np.full_like(succ, DEAD)
    seen = np.full(n, -1, np.int64)  # the u whose backward search reached a node
    frontier = np.empty(n, np.int64)
    nxt = np.empty(n, np.int64)
    for u in range(n):
        seen[u] = u
        frontier[0] = u
        size = 1
        for _ in range(max_cycle - 1):  # the nodes that reach u within max_cycle - 1
            m = 0
            for i in range(size):
                for e in range(ptr[frontier[i]], ptr[frontier[i] + 1]):
                    w = preds[e]
                    if seen[w] != u:
                        seen[w] = u
                        nxt[m] = w
                        m += 1
            frontier[:m] = nxt[:m]
            size = m
            if not size:
                break
        for c in range(n_cols):
            v = succ[u, c]
            if v != DEAD and seen[v] == u:
                out[u, c] = v
    return out


def _loop_components(succ: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """Per node, the id of its loop (a strongly connected set of plain nodes with at least
    one transition inside it), or -1."""
    return _keep_loops(_strong_components(succ, plain), succ)


@numba.njit(cache=True, nogil=True)
def _keep_loops(comp, succ):
    """``comp`` with -1 for the components that are not loops: a component is a loop when
    one of its nodes has a transition to a node of the same one."""
    looped = np.zeros(len(comp) + 1, np.bool_)
    for v in range(len(comp)):
        if comp[v] >= 0:
            for t in succ[v]:
                if t != DEAD and comp[t] == comp[v]:
                    looped[comp[v]] = True
    out = np.full(len(comp), -1, np.int64)
    for v in range(len(comp)):
        if comp[v] >= 0 and looped[comp[v]]:
            out[v] = comp[v]
    return out


@numba.njit(cache=True, nogil=True)
def _strong_components(succ, plain):
    """Tarjan's strongly connected components of the graph ``succ`` (rows of targets, DEAD
    for none) restricted to ``plain`` nodes, iteratively. -1 for nodes that are not plain."""
    n, n_cols = succ.shape
    index = np.full(n, -1, np.int64)
    low = np.zeros(n, np.int64)
    on_stack = np.zeros(n, np.bool_)
    comp = np.full(n, -1, np.int64)
    stack = np.empty(n, np.int64)
    call_node = np.empty(n, np.int64)
    call_edge = np.empty(n, np.int64)
    sp = 0
    counter = 0
    n_comp = 0
    for root in range(n):
        if not plain[root] or index[root] >= 0:
            continue
        counter, sp = _visit(root, counter, sp, index, low, stack, on_stack)
        call_node[0] = root
        call_edge[0] = 0
        depth = 1
        while depth:
            v = call_node[depth - 1]
            e = call_edge[depth - 1]
            if e < n_cols:
                call_edge[depth - 1] = e + 1
                w = succ[v, e]
                if w == DEAD or not plain[w]:
                    continue
                if index[w] < 0:
                    counter, sp = _visit(w, counter, sp, index, low, stack, on_stack)
                    call_node[depth] = w
                    call_edge[depth] = 0
                    depth += 1
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            depth -= 1
            if depth and low[v] < low[call_node[depth - 1]]:
                low[call_node[depth - 1]] = low[v]
            if low[v] == index[v]:
                while True:
                    sp -= 1
                    w = stack[sp]
                    on_stack[w] = False
                    comp[w] = n_comp
                    if w == v:
                        break
                n_comp += 1
    return comp


@numba.njit(cache=True, nogil=True)
def _visit(v, counter, sp, index, low, stack, on_stack):
    """Tarjan's first visit of ``v``: numbered and pushed. Returns (counter, sp) after it."""
    index[v] = counter
    low[v] = counter
    stack[sp] = v
    on_stack[v] = True
    return counter + 1, sp + 1
