"""Per PDA node, the tokens it reads without touching the stack: walked once, reused per stack.

A lazy table's mask of a configuration set ``F`` is the union, over its configurations
``(node, k)``, of the tokens that configuration reads (a stack-DFA state is a set, and a token
lives in a set exactly when it lives from one of its members). A token read from a node
through *plain* nodes only (no calls, not accepting: nothing is pushed or popped) lives or
dies whatever the stack ``k`` is, since the real states on the way are ``{(m, k)}``. So per
node, the vocabulary is walked once through the PDA's own byte transitions, every way into a
non-plain node folded into one *exit* state:

- tokens read alive to their end, or ending on the exit byte (the node reached is real), are
  accepted whatever the stack: one packed row;
- tokens that die before the exit are rejected;
- the sub-trees that read on past the exit depend on the stack, and are the only tokens
  walked per configuration, through the stack DFA from ``{(node, k)}``.

Inside a JSON string body, that is the tokens with a ``"`` (1-3% of a vocabulary) instead of
all of them: the whole-vocabulary walk of each new string body cost ~2-3 ms, two thirds of the
time spent on first-seen masks over MaskBench. String bodies are also *loops* (strongly
connected plain nodes) that recur under many nodes (one per property): a node of a loop is
walked with the loop's other exits folded in as well, and the result is shared by every loop
of the same shape (its transitions renumbered from the entry node).
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

#: Loops larger than this are walked per node (their shape would cost more than it saves).
MAX_LOOP_NODES = 256
#: A node whose first byte leaves the plain nodes for more than this share of the tokens is
#: not sliced: nearly all its tokens would be walked on the stack again anyway.
MAX_FIRST_EXIT_SHARE = 0.25


@dataclass(frozen=True, eq=False)
class Slice:
    """The tokens of one node: ``words`` (packed) are read alive whatever the stack; the ones
    at sorted positions ``lo[i]..hi[i]`` read on past an exit (some of them are in ``words``
    too) and must be walked on the real stack."""

    words: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


class NodeSlices:
    """The :class:`Slice` of each node of ``table`` against ``trie``, made on first use."""

    def __init__(self, table: PDATable, trie: TokenTrie):
        self.trie = trie
        self._succ = np.ascontiguousarray(table.delta[:, : table.n_byte_classes], dtype=np.int32)
        calls = table.calls()
        plain = np.array([not c for c in calls], dtype=np.bool_) & ~table.accept.astype(np.bool_)
        plain[DEAD] = False
        self._comp = _loop_components(self._succ, plain)
        self._members: dict[int, np.ndarray] = {}
        # The plain walk: the byte transitions with every target that is not plain sent to
        # one exit state (the last row, all DEAD), which is the walk's only marked state.
        exit_state = len(self._succ)
        plain_trans = np.where(plain[self._succ] | (self._succ == DEAD), self._succ, exit_state)
        self._plain = np.vstack([plain_trans, np.zeros((1, plain_trans.shape[1]), np.int32)]).astype(np.int32)
        self._plain_marker = np.zeros(exit_state + 1, dtype=np.bool_)
        self._plain_marker[exit_state] = True
        self._byte_class = table.byte_class.astype(np.int64)
        self._n_words = n_words(trie.vocab_size)
        # Tokens per byte class of their first byte, to price a node's first-byte exits.
        first = np.bincount(trie.blob[trie.offsets[trie.lengths > 0]], minlength=256)
        self._first_share = np.bincount(self._byte_class, weights=first, minlength=self._succ.shape[1]) / max(
            1, len(trie.sorted_ids))
        self._buffers = WalkBuffers(len(trie.sorted_ids))
        self._by_node: dict[int, Slice | None] = {}
        self._by_shape: dict[bytes, Slice] = {}

    def reads(self, node: int) -> bool:
        """Does ``node`` read any byte itself?"""
        return bool(self._succ[node].any())

    def slice_for(self, node: int) -> Slice | None:
        """The slice of ``node`` (which reads some byte), or None where slicing does not pay:
        then its configurations are walked on the stack whole."""
        found = self._by_node.get(node, False)
        if found is False:
            found = self._by_node[node] = self._make(node)
        return found

    def _make(self, node: int) -> Slice | None:
        exits = self._plain[node] == len(self._succ)
        if self._first_share[: len(exits)][exits].sum() > MAX_FIRST_EXIT_SHARE:
            return None
        comp = int(self._comp[node])
        if comp >= 0:
            members = self._members.get(comp)
            if members is None:
                members = self._members[comp] = np.flatnonzero(self._comp == comp)
            if len(members) <= MAX_LOOP_NODES:
                local = self._shape(node, set(members.tolist()))
                key = local.tobytes()
                found = self._by_shape.get(key)
                if found is None:
                    found = self._by_shape[key] = self._loop_walk(local)
                return found
        return self._walk(self._plain, self._plain_marker, node)

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

    def _loop_walk(self, local: np.ndarray) -> Slice:
        """Every token walked from local state 1 through the loop ``local``."""
        m, n_cols = local.shape
        trans = np.zeros((m + 2, n_cols), dtype=np.int32)  # DEAD row and exit row: all DEAD
        trans[1 : m + 1] = local
        marker = np.zeros(m + 2, dtype=np.bool_)
        marker[m + 1] = True
        return self._walk(trans, marker, 1)

    def _walk(self, trans: np.ndarray, marker: np.ndarray, start: int) -> Slice:
        """Every token walked from ``start`` through ``trans``, whose marked state is the exit."""
        trie, buf = self.trie, self._buffers
        buf.ranges[0] = (0, len(trie.sorted_ids), 0, start)
        ne, nh, _, _ = walk(trans, self._byte_class, trie.blob, trie.offsets, trie.lengths, trie.lcp,
                            trie.skip, int(trie.lengths.max(initial=0)), buf.ranges, 1, marker, True,
                            buf.pos, buf.next, 0, buf.hit_lo, buf.hit_hi, buf.pending, buf.missing)
        # A token ending on the exit byte is alive too: the node it leads to is a real node.
        words = np.zeros(self._n_words, dtype=np.uint32)
        set_bits(words, trie.sorted_ids[buf.pos[:ne]])
        words.flags.writeable = False
        return Slice(words, buf.hit_lo[:nh].copy(), buf.hit_hi[:nh].copy())


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
