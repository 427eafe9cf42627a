"""Exact checks of a PDA's uncertain tokens, all at once: a DFA over real stacks, grown on use.

An Earley set with the continuation of each item (what its rule's return leads to, interned
by :meth:`EarleyParser.key`) is a set of *configurations* ``(node, continuation)``, and it says
exactly what the PDA can still read. Stepped by one byte and closed under calls (a new
continuation: "return to this node, then continue as before") and returns (the continuation's
entries), a configuration set gives the next one. These sets are the states of a DFA that
reads the PDA's language from the real stack. It is infinite, but only the states that tokens
actually reach are built, and they are kept across masks: the candidate tokens run through
the built transitions in compiled code (:func:`gramc.automata.walk.run_tokens`), stopping
only where a transition is still missing, instead of an Earley step in Python per byte and
token.

A grammar with left recursion (a rule that can call itself before reading a byte) would grow
continuations without end: its tables never use a stack DFA (see
:class:`~gramc.runtime.pda_tokens.PDATokenTable`), and its tokens are checked by the Earley
parser instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD
from gramc.limits import DEFAULT_RUNTIME_LIMITS, RuntimeLimits
from gramc.runtime.earley import TOP, EarleyParser
from gramc.runtime.vocab_bytes import token_layout
from gramc.vocab import Vocab

if TYPE_CHECKING:  # both need numba: imported at run time on the first walk
    from gramc.runtime.pda_counted import CountedItems
    from gramc.runtime.pda_slices import NodeSlices

#: Configurations in one state before giving up on it (the caller falls back to Earley).
MAX_CONFIGS = 100_000


class TooLarge(Exception):
    """A state would hold more than :data:`MAX_CONFIGS` configurations."""


class StackDFA:
    """The configuration-set DFA of one PDA table, with the token bytes of one vocabulary."""

    def __init__(self, table: PDATable, parser: EarleyParser, vocab: Vocab,
                 limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS):
        """``limits``: its ``stack_dfa_states`` is the states kept before the DFA is dropped
        and grown afresh; its slice bounds are passed on to the node and counted slices."""
        self.parser = parser
        self.limits = limits
        self.resets = 0  # fresh starts past the state bound (or on a new parser generation)
        self.n_classes = table.n_byte_classes
        self._byte_next = parser.byte_next
        self._calls, self._accept, self._rule_start = parser.calls, parser.accept, parser.rule_start
        # A call returning to a node that can only return further (accepting, reads nothing,
        # calls nothing) is a tail call: it keeps the caller's continuation instead of pushing
        # one, so right-recursive rules (a string body made of `chars ::= char chars`) do not
        # grow a new stack, and new states, per byte.
        live = table.delta[:, : table.n_byte_classes] != DEAD  # per node and byte class
        reads = live.any(axis=1).tolist()
        self._tail = [a and not r and not c for a, r, c in zip(self._accept, reads, self._calls)]
        # Nodes that neither call nor return: a configuration of one closes to itself.
        self._inert = [not a and not c for a, c in zip(self._accept, self._calls)]
        self._vocab = vocab
        self._byte_class = table.byte_class.astype(np.int64)
        # Per node, the byte classes it reads (bit c), packed; made into ints on first use.
        # A new state's classes that none of its nodes reads are DEAD from the start, so the
        # walks never stop to ask for them (two thirds of the transitions asked for were).
        self._reads_packed = np.packbits(live, axis=1, bitorder="little")
        self._reads_bits: dict[int, int] = {}
        self._rows: dict[int, np.ndarray] = {}  # a new state's first row, by the classes read
        self._table = table
        self._slices: NodeSlices | None = None
        self._counted: CountedItems | None = None
        self._reset()

    def set_limits(self, limits: RuntimeLimits) -> None:
        """New bounds (for the states, checked at the next walk; for the slices, now)."""
        self.limits = limits
        for made in (self._slices, self._counted):
            if made is not None:
                made.set_limits(limits)

    def clear(self) -> None:
        """Forget every state: they hold continuation ids of the parser's old generation."""
        self._reset()
        self.resets += 1

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """The states (and fresh starts), and the slices' caches."""
        out = {"stack_dfa_states": {"entries": len(self._states), "max_entries": self.limits.stack_dfa_states,
                                    "resets": self.resets}}
        for made in (self._slices, self._counted):
            if made is not None:
                out.update(made.cache_stats())
        return out

    def _reset_if_full(self) -> None:
        """Start afresh once past the state bound (between walks: no state id is held)."""
        if len(self._states) > self.limits.stack_dfa_states:
            self.clear()

    def _reset(self) -> None:
        self._rows.clear()
        self._index: dict[frozenset, int] = {frozenset(): DEAD}
        self._states: list[frozenset] = [frozenset()]
        self._trans = np.full((1024, self.n_classes), -1, dtype=np.int32)  # < 0: not built yet
        self._trans[DEAD] = DEAD
        self._entries: dict[tuple[int, int], int] = {}
        self._stepped: dict[frozenset, int] = {}  # the state of several configurations stepped to

    def _entry(self, node: int, k: int) -> int:
        """The state of the configuration ``(node, k)`` alone (memoised: exits of the node
        slices enter the same ones again and again)."""
        s = self._entries.get((node, k))
        if s is None:
            s = self._entries[(node, k)] = self._state(self._close([(node, k)]))
        return s

    def accepts(self, key: int, token_ids: np.ndarray) -> np.ndarray:
        """Bool per token of ``token_ids`` (byte tokens): can the PDA read all its bytes from
        the Earley set whose :meth:`EarleyParser.key` is ``key``?

        Raises :class:`TooLarge` when a state would be too large to build (then nothing is
        cached about it and the caller checks these tokens another way)."""
        return self.end_states(key, token_ids) != DEAD

    def end_states(self, key: int, token_ids: np.ndarray) -> np.ndarray:
        """The state each token of ``token_ids`` (byte tokens) leads to from the Earley set
        whose key is ``key`` (DEAD where the PDA cannot read it), valid until the next walk
        (see :meth:`configs`). Raises :class:`TooLarge` as :meth:`accepts` does."""
        from gramc.automata.walk import run_tokens  # numba: imported on the first check

        self._reset_if_full()
        blob, offsets, lengths = token_layout(self._vocab)
        ids = np.asarray(token_ids, dtype=np.int64)
        state = np.full(len(ids), self._state(self.parser.interned(key)), dtype=np.int64)
        read = np.zeros(len(ids), dtype=np.int64)
        todo = np.arange(len(ids))
        missing = np.empty((len(ids), 2), dtype=np.int64)
        while len(todo):
            # Run the tokens as far as built transitions go, then build the ones they stopped at.
            t, s, r = ids[todo], state[todo], read[todo]
            n = run_tokens(self._trans, self._byte_class, blob, offsets, lengths, t, s, r, missing)
            state[todo], read[todo] = s, r
            todo = todo[(s != DEAD) & (r < lengths[t])]
            self._build_all(missing[:n].tolist())
        return state

    def configs(self, state: int) -> frozenset:
        """The configurations ``(node, continuation)`` of ``state`` (an id of this DFA's
        current start: it starts afresh past its bound, counted in :attr:`resets`)."""
        return self._states[state]

    def allowed(self, key: int, trie, out: np.ndarray) -> None:
        """Set in the packed row ``out`` the byte tokens of ``trie`` the PDA can read from the
        Earley set whose key is ``key``. Per configuration of the set, the tokens its node reads
        without touching the stack come precomputed (:mod:`gramc.runtime.pda_slices`), or by
        count inside the item of a counted repetition (:mod:`gramc.runtime.pda_counted`); the
        rest are walked through this DFA, its missing states built on the way. Raises
        :class:`TooLarge` as :meth:`accepts` does."""
        from gramc.automata.walk import shared_buffers  # numba: imported on the first walk
        from gramc.runtime.pda_slices import NodeSlices

        self._reset_if_full()
        n_tok = len(trie.sorted_ids)
        if self._slices is None or self._slices.trie is not trie:
            self._slices = NodeSlices(self._table, trie, limits=self.limits)
        buf = shared_buffers(n_tok)
        # Each configuration's stack-free tokens, then its tokens that read on past an exit,
        # walked from where they left (the exit node on this configuration's stack), in
        # batches that cannot overflow the buffers (at most n_tok tokens end per batch).
        # Configurations whose node is not worth slicing are walked together, every token.
        batches: list[list[np.ndarray]] = [[]]
        size = 0

        def add(rows: np.ndarray, n: int) -> None:
            nonlocal size
            if size + n > n_tok:
                batches.append([])
                size = 0
            batches[-1].append(rows)
            size += n

        whole = []
        slices, counted, interned = self._slices, self._counted_items(trie), self.parser.interned
        for node, k in interned(key):
            if not slices.reads(node):
                continue
            parts = counted.parts(node, k, interned) if counted.rets else None
            if parts is not None:  # in an item of a counted repetition
                priced = counted.slice_for(node, trie, buf)
                item = counted.item_of[node]
                for y, k2 in parts:
                    left = counted.left(y, item)
                    out |= priced.words(left)
                    n_rows = int(priced.exit_le[min(left, priced.max_u)])
                    if n_rows:
                        ahead = counted.ahead(y, item)
                        entered = np.zeros(len(ahead), dtype=np.int64)
                        for u in priced.exit_us:
                            if u >= len(ahead):
                                break
                            entered[u] = self._entry(ahead[u], k2)
                        rows = priced.exits[:n_rows].copy()
                        rows[:, 3] = entered[rows[:, 3]]
                        add(rows, int(priced.exit_tokens[n_rows]))
                continue
            found = slices.slice_for(node)
            if found is None:
                whole.append((node, k))
                continue
            out |= found.words
            if found.exit_tokens:
                rows = found.exits.copy()
                entered = np.array([self._entry(t, k) for t in found.exit_nodes], dtype=np.int64)
                rows[:, 3] = entered[found.exit_at]
                add(rows, found.exit_tokens)
        if whole:
            batches.append([np.array([[0, n_tok, 0, self._state(frozenset(whole))]], dtype=np.int64)])
        for batch in batches:
            if batch:
                self._walk_ranges(np.concatenate(batch), trie, buf, out)

    def _counted_items(self, trie):
        """The table's :class:`~gramc.runtime.pda_counted.CountedItems` for ``trie``'s longest
        token (made on the first walk)."""
        from gramc.runtime.pda_counted import CountedItems

        if self._counted is None or self._counted.max_u != trie.max_len:
            self._counted = CountedItems(self._table, trie.max_len, self.limits)
        return self._counted

    def _walk_ranges(self, rows: np.ndarray, trie, buf, out: np.ndarray) -> None:
        """Walk the ranges ``rows`` (lo, hi, depth, state: see :func:`walk`) through this DFA,
        building missing states between rounds, and set the tokens read alive in ``out``."""
        from gramc.automata.walk import set_walked, walk

        ranges, pending = buf.ranges, buf.pending
        n_ranges = len(rows)
        ranges[:n_ranges] = rows
        ne = 0
        no_marker = np.zeros(0, dtype=np.bool_)
        while n_ranges:
            ne, _, n_pending, n_missing = walk(
                self._trans, self._byte_class, trie.blob, trie.offsets, trie.lengths, trie.lcp,
                trie.skip, trie.max_len, ranges, n_ranges, no_marker, False, buf.pos, buf.next, ne,
                buf.hits, pending, buf.missing)
            self._build_all(buf.missing[:n_missing].tolist())
            ranges, pending = pending, ranges
            n_ranges = n_pending
        set_walked(out, trie.sorted_ids, buf.pos, ne)

    def _build_all(self, pairs: list) -> None:
        """Build the requested (-2) transitions ``pairs`` (state, byte class): the
        configurations the state's nodes step to, closed, a single one taking its memoised
        entry state (most steps); on :class:`TooLarge`, mark the ones not built as unbuilt
        (-1) again before raising."""
        nxt, states, entries, stepped = self._byte_next, self._states, self._entries, self._stepped
        try:
            for q, c in pairs:  # most of a first-seen walk's Python: kept to one loop
                seeds = [(t, k) for n, k in states[q] if (t := nxt[n][c]) != DEAD]
                if len(seeds) == 1:
                    target = entries.get(seeds[0])
                    self._trans[q, c] = self._entry(*seeds[0]) if target is None else target
                elif seeds:
                    # Different states often step to the same configurations: their closure
                    # is memoised too.
                    key = frozenset(seeds)
                    target = stepped.get(key)
                    if target is None:
                        target = stepped[key] = self._state(self._close(seeds))
                    self._trans[q, c] = target
                else:
                    self._trans[q, c] = DEAD
        except TooLarge:
            for q, c in pairs:
                if self._trans[q, c] == -2:
                    self._trans[q, c] = -1
            raise

    def _state(self, configs: frozenset) -> int:
        s = self._index.get(configs)
        if s is None:
            s = self._index[configs] = len(self._states)
            self._states.append(configs)
            if s >= len(self._trans):
                grown = np.full((2 * len(self._trans), self.n_classes), -1, dtype=np.int32)
                grown[: len(self._trans)] = self._trans
                self._trans = grown
            self._trans[s] = self._first_row(configs)
        return s

    def _first_row(self, configs: frozenset) -> np.ndarray:
        """The row of a new state of ``configs``: DEAD on the classes none of its nodes reads,
        not built (-1) on the others."""
        bits = 0
        cached = self._reads_bits
        for n, _ in configs:
            b = cached.get(n)
            if b is None:
                b = cached[n] = int.from_bytes(self._reads_packed[n].tobytes(), "little")
            bits |= b
        row = self._rows.get(bits)
        if row is None:
            live = np.unpackbits(np.frombuffer(bits.to_bytes(self._reads_packed.shape[1], "little"), np.uint8),
                                 count=self.n_classes, bitorder="little").astype(bool)
            row = self._rows[bits] = np.where(live, -1, DEAD).astype(np.int32)
        return row

    def _close(self, seeds: list[tuple[int, int]]) -> frozenset:
        """``seeds`` closed under calls and returns."""
        inert = self._inert
        if all(inert[n] for n, _ in seeds):
            return frozenset(seeds)  # most steps inside a string or number
        calls, accept, rule_start, tail = self._calls, self._accept, self._rule_start, self._tail
        intern, interned = self.parser.intern, self.parser.interned
        out: set[tuple[int, int]] = set()
        work = list(seeds)
        while work:
            cfg = work.pop()
            if cfg in out:
                continue
            out.add(cfg)
            if len(out) > MAX_CONFIGS:
                raise TooLarge
            n, k = cfg
            for r, ret in calls[n]:
                work.append((rule_start[r], k if tail[ret] else intern(frozenset(((ret, k),)))))
            if accept[n]:
                work.extend(w for w in interned(k) if w != TOP)
        return frozenset(out)
