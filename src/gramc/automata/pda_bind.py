"""Binding a PDA to a vocabulary: per node, the tokens accepted or rejected whatever the stack.

For a node ``n`` of rule ``r``, consider what can be read from ``n`` while ``r`` stays on the
stack (*inside*): bytes of ``r`` itself and of the rules it calls, nested up to ``depth``
calls deep. Where ``r`` may return, the parse continues in a caller that only the stack
knows; here it continues *outside*, in every place that calls ``r`` (and, when those return,
every place that calls them): an over-approximation of any real stack. Both are regular, so
their DFA (the *expanded* automaton, by subset construction over (call path, node, outside)
configurations) can be walked with the token trie like any DFA. A state is *marked* where a
call would go deeper than ``depth``. Then per token:

- accepted: read to its end in a state with an inside configuration. Whatever the stack
  holds, the token is allowed.
- uncertain: read to its end only outside, or passed a marked state: only the real stack
  can tell; the runtime checks these few with the Earley parser.
- rejected: everything else. No stack can rescue it from ``n``.

A return of ``r`` before the token's first byte is left out of ``n``'s region: the Earley set
holding ``n`` also holds, by completion, the caller items that return leads to, so their rows
account for those tokens (with the real stack). Node rows are therefore meant to be OR-ed
over a whole Earley set, which is what the runtime does.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from gramc.automata.bind import STATE_CHUNK
from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD
from gramc.automata.trie import TokenTrie
from gramc.bitmask import WordRows, n_words, pack_dense
from gramc.limits import DEFAULT_LIMITS, Deadline, Limits

#: Calls expanded inside a node's region (deeper calls make tokens uncertain).
DEFAULT_DEPTH = 2
#: The same for nodes bound lazily, on first use (see ``PDAArtifact.bound``).
LAZY_DEPTH = 1
#: The shallowest expansion, below depth 0: no call is expanded and the rule's returns do
#: not go on outside either; a token read past them is uncertain. Its regions are the node's
#: own rule, so only a huge regular rule does not fit.
OWN_RULE = -1

Config = tuple[tuple[int, ...], int, bool]  # (return nodes of calls taken, node, outside)


@dataclass(frozen=True, eq=False)
class ExpandedDFA:
    """The expanded automaton: ``delta`` over the PDA's byte and token columns, ``marker`` and
    ``inside`` per state, and ``start[n]`` the state of node ``n`` (state 0 is dead)."""

    delta: np.ndarray
    marker: np.ndarray
    inside: np.ndarray
    start: np.ndarray


#: States of the expanded automaton before a shallower expansion is tried.
MAX_EXPANDED_STATES = 50_000
#: Configurations its states hold together before a shallower expansion is tried: a state's
#: moves cost its configurations, and where every rule may return into hundreds of callers
#: a few thousand states can hold millions (a Kubernetes schema's took 40 s to expand).
MAX_EXPANDED_CONFIGS = 250_000
#: New expanded states between two checks of a deadline.
DEADLINE_EVERY = 256


def expand(table: PDATable, depth: int = DEFAULT_DEPTH, max_states: int = MAX_EXPANDED_STATES,
           deadline: Deadline | None = None, nodes=None, reach: int | None = None) -> ExpandedDFA:
    """Subset construction of the regions of ``nodes`` (every node when None; see the
    module docstring), each built ``reach`` bytes deep (:class:`Expansion`).

    When the automaton would exceed ``max_states`` (or its states together
    :data:`MAX_EXPANDED_CONFIGS` configurations), the expansion is retried with fewer
    calls expanded (down to none, then :data:`OWN_RULE`): masks stay exact, only more tokens
    become uncertain. ``deadline`` is checked as states are added.
    """
    for d in range(depth, OWN_RULE - 1, -1):
        try:
            grown = Expansion(table, d, max_states, deadline, reach)
            grown.add_nodes(range(1, table.n_nodes) if nodes is None else nodes)
            return grown.automaton()
        except TooLarge:
            continue
    raise _too_large(max_states)


def reading_order(table: PDATable) -> np.ndarray:
    """Every live node, breadth-first from the start rule's first node over reads, special
    tokens, calls (into the called rule and on to the return node): the nodes a document
    meets first come first."""
    src, dst, called = table.edges()
    calls = called >= 0
    # Edges: each transition, plus from a calling node into the called rule's first node.
    src = np.concatenate([src, src[calls]])
    dst = np.concatenate([dst, table.rule_start[called[calls]].astype(np.int64)])
    order = np.argsort(src, kind="stable")
    targets = dst[order].tolist()
    indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=table.n_nodes))]).tolist()
    start = int(table.rule_start[table.start_rule])
    seen = {DEAD, start}
    out = [start]
    for n in out:  # grows as it goes: a breadth-first queue
        for t in targets[indptr[n]:indptr[n + 1]]:
            if t not in seen:
                seen.add(t)
                out.append(t)
    return np.array(out, dtype=np.int64)


def _too_large(max_states: int):
    from gramc.errors import LimitExceededError

    return LimitExceededError("max_expanded_states", max_states, max_states,
                              "the grammar's rule regions are too large to precompute")


#: At :data:`OWN_RULE`, the configuration standing for "the rule may return here" (node 0
#: is no node: it reads nothing, calls nothing and does not accept).
_RETURNS: Config = ((), 0, True)


class TooLarge(Exception):
    """The expanded automaton would exceed its state (or configuration) budget."""


class LazyExpansion:
    """The expanded automaton grown one node region at a time, for lazy binding.

    A global :func:`expand` costs seconds on a large schema when its artifact is loaded, and
    past its budget for every node together it gives nothing. Grown per node, only the regions
    of the nodes a parse reaches are built, each at full depth where it fits; a region too
    large on its own is built one call level down (node rows computed at different depths
    are all exact: depth only moves tokens between accepted and uncertain), down to
    :data:`OWN_RULE`. A region too large even there has no automaton: :meth:`automaton_for`
    gives None, and the runtime treats every token of that node as uncertain (checked on the
    real stack).
    """

    def __init__(self, table: PDATable, depth: int = DEFAULT_DEPTH, max_states: int = MAX_EXPANDED_STATES,
                 reach: int | None = None):
        self.table, self.max_states, self.reach = table, max_states, reach
        self.current = Expansion(table, depth, max_states, reach=reach)

    def automaton_for(self, node: int) -> ExpandedDFA | None:
        """An expanded automaton whose ``start[node]`` is built, or None where the node's
        region exceeds the budget on its own even at :data:`OWN_RULE` (the expansion carries
        on for the next nodes at that depth)."""
        while True:
            try:
                self.current.add_nodes([node])
                return self.current.automaton()
            except TooLarge:
                # Full of other nodes' regions: start afresh at the same depth; too large on
                # its own: one call level less (for this node and the ones after it).
                fresh = self.current.n_started == 0
                if fresh and self.current.depth == OWN_RULE:
                    self.current = Expansion(self.table, OWN_RULE, self.max_states, reach=self.reach)
                    return None
                depth = self.current.depth - 1 if fresh else self.current.depth
                self.current = Expansion(self.table, depth, self.max_states, reach=self.reach)


class Expansion:
    """Subset construction over (call path, node, outside) configurations, grown on demand:
    :meth:`add_nodes` builds the regions of more nodes, :meth:`automaton` gives the arrays.

    With a ``reach`` (the longest token's bytes), a region is built only that far from its
    node, breadth first: no token reads further, so the states that far have no moves (a
    string's ``maxLength`` chain is walked one token deep, not to its end). A state met
    again nearer to a node is built on from there."""

    def __init__(self, table: PDATable, depth: int, max_states: int, deadline: Deadline | None = None,
                 reach: int | None = None):
        self.depth, self.max_states, self.deadline = depth, max_states, deadline
        self.configs_left = MAX_EXPANDED_CONFIGS
        self.reach = reach
        self.n_cols = table.n_byte_classes + len(table.token_ids)
        # Each node's live (column, target) pairs, listed on first use: a lazy expansion
        # needs only the rows its regions reach, and builds while a mask waits.
        self._cols = table.delta[:, : self.n_cols]
        self._live: dict[int, list[tuple[int, int]]] = {}
        self.calls, self.accept = table.calls(), table.accept.tolist()
        self.rule_start, self.node_rule = table.rule_start.tolist(), table.node_rule.tolist()
        self.returns: dict[int, list[int]] = {}
        for callees in self.calls:
            for r, ret in callees:
                self.returns.setdefault(r, []).append(ret)
        self.index: dict[frozenset[Config], int] = {frozenset(): DEAD}
        self.by_targets: dict[frozenset[Config], int] = {}  # unclosed move targets -> state
        self.marks, self.insides = [False], [False]
        self.keys: list[frozenset[Config]] = [frozenset()]  # by state
        self.dist = [0]  # by state: the fewest bytes from a node's start met so far
        self.table_rows: list[list[int] | None] = [[DEAD] * self.n_cols]  # None until add_nodes builds it
        self._rebuilt: list[int] = []  # states whose rows changed after automaton() copied them
        self.start = np.zeros(table.n_nodes, dtype=np.int64)  # 0: not built (node 0 is unused)
        self.n_started = 0  # nodes whose region was built completely
        self._built = 1  # states whose rows are in the arrays below (capacity doubles)
        self._delta = np.zeros((1, self.n_cols), dtype=np.int32)
        self._marker = np.zeros(1, dtype=bool)
        self._inside = np.zeros(1, dtype=bool)

    def _live_of(self, node: int) -> list[tuple[int, int]]:
        """The (column, target) pairs of ``node``'s live byte and special-token columns."""
        live = self._live.get(node)
        if live is None:
            row = self._cols[node]
            cols = np.flatnonzero(row != DEAD)
            live = self._live[node] = list(zip(cols.tolist(), row[cols].tolist()))
        return live

    def _close(self, configs: set[Config], root: bool = False) -> tuple[frozenset[Config], bool]:
        """The closure of ``configs`` under calls and returns, and whether it is marked.

        At a node's ``root`` (no byte read yet) the node's own rule does not return: the
        Earley set holding the node also holds, by completion, the callers' items that such a
        return reaches, and their rows cover those tokens with the real stack. Going outside
        there would make every token of an accepting node uncertain."""
        out: set[Config] = set()
        marked, work = False, list(configs)
        while work:
            cfg = work.pop()
            if cfg in out:
                continue
            out.add(cfg)
            path, n, outside = cfg
            for r, ret in self.calls[n]:
                if len(path) < self.depth and not outside:
                    work.append((path + (ret,), self.rule_start[r], outside))
                else:  # too deep, or outside (kept shallow: it only filters uncertain tokens)
                    marked = True
            if self.accept[n]:
                if path:
                    work.append((path[:-1], path[-1], outside))
                elif not root and self.depth == OWN_RULE:
                    # What follows the return is not expanded: uncertain. The stand-in keeps
                    # this set apart from the same set closed at a root, which is not marked.
                    marked = True
                    out.add(_RETURNS)
                elif not root:
                    work.extend(((), ret, True) for ret in self.returns.get(self.node_rule[n], ()))
        return frozenset(out), marked

    def _state_of(self, configs: set[Config], work: deque[int], dist: int, root: bool = False) -> int:
        """The state of ``configs`` closed, made (and queued) if new, queued again if met
        nearer than before, within the reach."""
        targets = frozenset(configs)
        # Many moves reach the same configurations: close them once.
        state = None if root else self.by_targets.get(targets)
        if state is None:
            key, marked = self._close(configs, root)
            state = self.index.get(key)
            if state is None:
                self.configs_left -= len(key)
                if len(self.index) >= self.max_states or self.configs_left < 0:
                    raise TooLarge
                state = self.index[key] = len(self.marks)
                if self.deadline is not None and state % DEADLINE_EVERY == 0:
                    self.deadline.check()
                self.marks.append(marked)
                self.insides.append(any(not outside for _, _, outside in key))
                self.keys.append(key)
                self.dist.append(dist)
                self.table_rows.append(None)
                work.append(state)
            if not root:
                self.by_targets[targets] = state
        if dist < self.dist[state]:
            self.dist[state] = dist
            if self.reach is None or dist < self.reach:
                work.append(state)  # its moves, and theirs, come nearer too
        return state

    def add_nodes(self, nodes) -> None:
        """Build the regions of ``nodes`` (those not built yet); :class:`TooLarge` past the budget."""
        work: deque[int] = deque()
        for n in nodes:
            if not self.start[n]:
                self.start[n] = self._state_of({((), n, False)}, work, 0, root=True)
        while work:
            state = work.popleft()
            d = self.dist[state]
            if self.reach is not None and d >= self.reach:
                if self.table_rows[state] is None:
                    self.table_rows[state] = [DEAD] * self.n_cols  # no token reads on from here
                continue
            moves: dict[int, set[Config]] = {}
            for path, n, outside in self.keys[state]:
                for c, t in self._live_of(n):
                    moves.setdefault(c, set()).add((path, t, outside))
            row = [DEAD] * self.n_cols
            for c, targets in moves.items():
                row[c] = self._state_of(targets, work, d + 1)
            if state < self._built and row != self.table_rows[state]:
                self._rebuilt.append(state)
            self.table_rows[state] = row
        self.n_started = int(np.count_nonzero(self.start))

    def automaton(self) -> ExpandedDFA:
        """The arrays of every state built so far (grown in place, capacity doubling)."""
        n = len(self.marks)
        if n > self._built:
            if n > len(self._delta):
                cap = max(n, 2 * len(self._delta))
                self._delta = np.concatenate([self._delta, np.zeros((cap - len(self._delta), self.n_cols), np.int32)])
                self._marker = np.concatenate([self._marker, np.zeros(cap - len(self._marker), bool)])
                self._inside = np.concatenate([self._inside, np.zeros(cap - len(self._inside), bool)])
            self._delta[self._built:n] = np.array(self.table_rows[self._built:n], dtype=np.int32).reshape(-1, self.n_cols)
            self._marker[self._built:n] = self.marks[self._built:n]
            self._inside[self._built:n] = self.insides[self._built:n]
            self._built = n
        for state in self._rebuilt:  # cut at the reach before, met nearer since
            row = self.table_rows[state]
            assert row is not None  # rebuilt rows are built
            self._delta[state] = row
        self._rebuilt.clear()
        return ExpandedDFA(self._delta[:n], self._marker[:n], self._inside[:n], self.start.copy())


@dataclass(frozen=True, eq=False)
class NodeTokens:
    """Per PDA node: packed bitmask rows of accepted tokens, CSR rows of uncertain ids.

    Where ``row_of`` is given, ``accepted`` holds distinct rows and node row ``i`` is
    ``accepted[row_of[i]]`` (as an artifact stores them: most nodes share their row), or,
    where ``row_of[i]`` is -1, was not computed (its uncertain row is then empty)."""

    accepted: np.ndarray | WordRows  # uint32 [N, W], or [K, W] distinct rows
    unc_indptr: np.ndarray  # int64 [N + 1]
    unc_ids: np.ndarray  # int32, ascending within each row
    row_of: np.ndarray | None = None  # int32 [N]: each node's row of ``accepted``

    def accepted_row(self, i: int) -> np.ndarray:
        """The packed accepted row of node row ``i``."""
        return self.accepted[i if self.row_of is None else self.row_of[i]]

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, row_of)``: the distinct accepted rows (in byte order, so the same rows
        give the same arrays) and each node's index among them (-1 where it has none)."""
        row_of = np.arange(len(self.accepted), dtype=np.int64) if self.row_of is None else self.row_of
        has = row_of >= 0
        used = np.unique(row_of[has])
        if not len(used):
            return np.zeros((0, self.accepted.shape[1]), dtype=np.uint32), np.full(len(row_of), -1, np.int32)
        rows, inverse = np.unique(self.accepted[used], axis=0, return_inverse=True)
        remap = np.full(len(self.accepted), -1, dtype=np.int64)
        remap[used] = inverse.reshape(-1)
        out = np.full(len(row_of), -1, dtype=np.int32)
        out[has] = remap[row_of[has]]
        return rows, out


def bind_nodes(table: PDATable, trie: TokenTrie, nodes: np.ndarray, depth: int = DEFAULT_DEPTH,
               expanded: ExpandedDFA | None = None, limits: Limits = DEFAULT_LIMITS,
               deadline: Deadline | None = None) -> NodeTokens:
    """Accepted and uncertain tokens of each of ``nodes`` (see the module docstring).

    The packed accepted rows' size is known from the shapes and checked against
    ``limits.max_memory`` before anything is walked; the uncertain ids, known only as they
    are walked, are checked after each chunk of nodes, and ``deadline`` between chunks."""
    from gramc.automata.walk import walk_tokens  # numba: imported only where tokens are walked

    V = trie.vocab_size
    fixed = len(nodes) * n_words(V) * 4 + 2 * STATE_CHUNK * V  # packed rows + one chunk's bool rows
    limits.check_memory(fixed, f"the token masks of {len(nodes):,} PDA nodes")
    x = expanded or expand(table, depth, deadline=deadline, reach=trie.max_len)
    nbc = table.n_byte_classes
    acc_parts: list[np.ndarray] = []
    unc_parts: list[np.ndarray | None] = []  # per chunk, its nodes' uncertain ids one after another
    counts: list[int] = []
    held = 0
    for lo in range(0, len(nodes), STATE_CHUNK):
        if deadline is not None:
            deadline.check()
        chunk = np.asarray(nodes[lo : lo + STATE_CHUNK], dtype=np.int64)
        states = x.start[chunk]
        w = walk_tokens(x.delta, table.byte_class, trie, states, x.marker)
        accepted = np.zeros((len(chunk), V), dtype=bool)
        unc = _ranges_to_mask(w.hit_row, w.hit_lo, w.hit_hi, len(chunk), trie)
        srows, scols = np.nonzero(x.delta[states][:, nbc:] != DEAD)
        ends = [(w.row, w.token, w.next_state),
                (srows, table.token_ids[scols], x.delta[states[srows], nbc + scols])]
        for rows, tokens, end in ends:
            inside = x.inside[end]
            accepted[rows[inside], tokens[inside]] = True
            unc[rows[~inside], tokens[~inside]] = True
        root = x.marker[states]
        if len(table.token_ids):
            unc[np.ix_(root, table.token_ids)] = True
        unc &= ~accepted
        acc_parts.append(pack_dense(accepted))
        unc_rows, unc_ids = np.nonzero(unc)  # row-major: each node's ids ascending, node after node
        unc_parts.append(unc_ids.astype(np.int32))
        counts.extend(np.bincount(unc_rows, minlength=len(chunk)).tolist())
        held += 4 * len(unc_ids)
        del unc_rows, unc_ids
        if fixed + 2 * held > limits.max_memory:
            done = lo + len(chunk)
            limits.check_memory(fixed + 2 * held * len(nodes) // done,
                                f"the uncertain tokens of {len(nodes):,} PDA nodes, projected from the first {done:,}")
    accepted = np.concatenate(acc_parts) if acc_parts else np.zeros((0, n_words(V)), dtype=np.uint32)
    return NodeTokens(
        accepted=accepted,
        unc_indptr=np.concatenate([[0], np.cumsum(np.array(counts, dtype=np.int64))]).astype(np.int64),
        unc_ids=_join_dropping(unc_parts, held // 4),
    )


def _join_dropping(parts: list[np.ndarray | None], total: int) -> np.ndarray:
    """The concatenation of ``parts`` (int32), each dropped once copied: the result's pages
    are touched as it fills while the parts' are released, so a large node table's uncertain
    ids (hundreds of MB on a big schema) are not held twice at the end of a binding."""
    out = np.empty(total, dtype=np.int32)
    at = 0
    for i, part in enumerate(parts):
        assert part is not None
        out[at : at + len(part)] = part
        at += len(part)
        parts[i] = None
    return out


def _ranges_to_mask(rows, lo, hi, n_rows: int, trie: TokenTrie) -> np.ndarray:
    """Bool [n_rows, V]: tokens at the sorted positions ``lo[i]..hi[i]`` of ``rows[i]`` (ranges
    expanded one position each: their total is far below n_rows * V)."""
    out = np.zeros((n_rows, trie.vocab_size), dtype=bool)
    lengths = (hi - lo).astype(np.int64)
    total = int(lengths.sum())
    if total:
        starts = np.repeat(lo.astype(np.int64) - np.cumsum(lengths) + lengths, lengths)
        out[np.repeat(rows, lengths), trie.sorted_ids[starts + np.arange(total)]] = True
    return out
