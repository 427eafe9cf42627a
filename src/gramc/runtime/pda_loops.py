"""Token sets of a PDA's byte loops (string bodies and the like), walked once per loop shape.

Inside a JSON string, the parse state is one node of the string body and the stack below it.
The node differs per property and the stack per nesting, so every string body is a new
configuration, and walking all of a vocabulary's tokens through it (most of them survive)
cost ~2-3 ms each: two thirds of the time spent on first-seen masks over MaskBench.

But a token that stays inside the body never touches the stack, and what it does there only
depends on the shape of the loop. A *loop* is a strongly connected set of plain nodes (no
calls, not accepting: reading them never pushes or pops) in the PDA's byte transitions. From
a node of a loop, every token is one of:

- read to its end inside the loop, or ending on the byte that leaves it: accepted, whatever
  the stack (from a configuration ``{(node, k)}`` the real states on the way are ``{(m, k)}``);
- dead inside the loop: rejected;
- leaving the loop at some byte: decided by the real stack, so the token's sub-tree is walked
  from the real configuration.

The first two are computed once per loop shape (the loop's transitions renumbered from the
entry node, exits folded into one state), shared by every node and stack with that shape;
only the tokens that leave (those with a ``"`` in a string body: ~1-3% of a vocabulary) are
walked per configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD
from gramc.automata.trie import TokenTrie
from gramc.automata.walk import WalkBuffers, walk
from gramc.runtime.bitmask import n_words, set_bits

#: Loops larger than this are not sliced (their signature would cost more than it saves).
MAX_LOOP_NODES = 256


@dataclass(frozen=True, eq=False)
class LoopSlice:
    """The tokens of one loop shape: ``words`` (packed) are read alive to their end; the ones at
    sorted positions ``lo[i]..hi[i]`` read on after leaving the loop (some of them are in
    ``words`` too) and must be walked on the real stack."""

    words: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


class LoopSlices:
    """The :class:`LoopSlice` of each loop node of ``table`` against ``trie``, made on use."""

    def __init__(self, table: PDATable, trie: TokenTrie):
        self.trie = trie
        self._succ = np.ascontiguousarray(table.delta[:, : table.n_byte_classes], dtype=np.int32)
        calls = table.calls()
        plain = np.array([not c for c in calls], dtype=np.bool_) & ~table.accept.astype(np.bool_)
        plain[DEAD] = False
        self._comp = _loop_components(self._succ, plain)
        self._members: dict[int, np.ndarray] = {}
        self._byte_class = table.byte_class.astype(np.int64)
        self._n_words = n_words(trie.vocab_size)
        self._by_node: dict[int, LoopSlice | None] = {}
        self._by_shape: dict[bytes, LoopSlice] = {}

    def slice_for(self, node: int) -> LoopSlice | None:
        """The slice of the loop entered at ``node``, or None if ``node`` is in no loop."""
        if node not in self._by_node:
            self._by_node[node] = self._make(node)
        return self._by_node[node]

    def _make(self, node: int) -> LoopSlice | None:
        comp = int(self._comp[node])
        if comp < 0:
            return None
        members = self._members.get(comp)
        if members is None:
            members = self._members[comp] = np.flatnonzero(self._comp == comp)
        if len(members) > MAX_LOOP_NODES:
            return None
        local = self._shape(node, set(members.tolist()))
        key = local.tobytes()
        found = self._by_shape.get(key)
        if found is None:
            found = self._by_shape[key] = self._walk(local)
        return found

    def _shape(self, node: int, members: set[int]) -> np.ndarray:
        """The loop's transitions renumbered in breadth-first order from ``node`` (local
        states 1..m; 0 is DEAD and m+1 is the exit, every way out of the loop)."""
        succ = self._succ
        order, index = [node], {node: 1}
        rows = []
        for n in order:
            row = []
            for t in succ[n].tolist():
                if t == DEAD:
                    row.append(DEAD)
                elif t in members:
                    if t not in index:
                        index[t] = len(order) + 1
                        order.append(t)
                    row.append(index[t])
                else:
                    row.append(-1)  # exit: numbered once the loop's size is known
            rows.append(row)
        local = np.array(rows, dtype=np.int32).reshape(len(rows), succ.shape[1])
        local[local < 0] = len(order) + 1
        return local

    def _walk(self, local: np.ndarray) -> LoopSlice:
        """Every token walked from local state 1 through the loop ``local``."""
        m, n_cols = local.shape
        exit_state = m + 1
        trans = np.zeros((m + 2, n_cols), dtype=np.int32)  # DEAD row and exit row: all DEAD
        trans[1 : m + 1] = local
        marker = np.zeros(m + 2, dtype=np.bool_)
        marker[exit_state] = True
        trie = self.trie
        buf = WalkBuffers(len(trie.sorted_ids))
        buf.ranges[0] = (0, len(trie.sorted_ids), 0, 1)
        ne, nh, _, _ = walk(trans, self._byte_class, trie.blob, trie.offsets, trie.lengths, trie.lcp,
                            trie.skip, int(trie.lengths.max(initial=0)), buf.ranges, 1, marker, True,
                            buf.pos, buf.next, 0, buf.hit_lo, buf.hit_hi, buf.pending, buf.missing)
        # A token ending on the exit byte is alive too: the node it leads to is a real node.
        words = np.zeros(self._n_words, dtype=np.uint32)
        set_bits(words, trie.sorted_ids[buf.pos[:ne]])
        words.flags.writeable = False
        return LoopSlice(words, buf.hit_lo[:nh].copy(), buf.hit_hi[:nh].copy())


def _loop_components(succ: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """Per node, the id of its loop (a strongly connected set of plain nodes with at least
    one transition inside it), or -1."""
    comp = _strong_components(succ, plain)
    out = np.full(len(comp), -1, dtype=np.int64)
    inside = comp >= 0
    if not inside.any():
        return out
    # A component is a loop when one of its nodes has a transition to a node of the same one.
    targets = comp[succ]
    looped = ((targets == comp[:, None]) & (succ != DEAD) & inside[:, None]).any(axis=1)
    keep = np.isin(comp, comp[looped]) & inside
    out[keep] = comp[keep]
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
        index[root] = counter
        low[root] = counter
        counter += 1
        stack[sp] = root
        sp += 1
        on_stack[root] = True
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
                    index[w] = counter
                    low[w] = counter
                    counter += 1
                    stack[sp] = w
                    sp += 1
                    on_stack[w] = True
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
