"""Per-state token tables of a bound DFA: what a matcher looks up at every step.

For each DFA state: the allowed token ids (ascending) with the state each leads to, the
packed bitmask row (with the end-of-sequence ids set where the state accepts), a cached bool
mask, and the forced (jump-forward) token. An eager table is filled from an artifact's arrays;
a lazy one binds each state the first time it is asked, with the same code, so both give
identical answers.

A lazy table's mask row needs no binding: it is the state's node slice
(:mod:`gramc.runtime.pda_slices`, the DFA read as a PDA without calls), whose exits are walked
on through the DFA. A string body's states are a loop whose slice every such loop shares, so
only the tokens that leave it (those with a ``"``) are walked per state, where binding walks
the whole vocabulary. A commit from a state whose row is not bound walks
the token's own bytes.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

import numpy as np

from gramc.automata.bind import TokenRows, bind_state, forced_lengths
from gramc.automata.pda_table import PDATable, no_calls
from gramc.automata.tables import DEAD, DFATable
from gramc.automata.trie import TokenTrie
from gramc.bitmask import csr_subset, distinct_rows, n_words, pack_rows, set_bits, unpack_row
from gramc.limits import DEFAULT_RUNTIME_LIMITS, RuntimeLimits
from gramc.runtime.cache import LRUCache

if TYPE_CHECKING:
    from gramc.runtime.pda_slices import NodeSlices  # numba: imported at run time on first use

#: A DFA's loops, for sharing node slices, are made of the transitions on cycles of at most
#: this many bytes: a string body's (an escaped surrogate pair is 12), not the document's.
SHORT_LOOP_BYTES = 12


def dense_after(row_length: int) -> int:
    """The commit from a state with ``row_length`` allowed tokens on which it gets a dense
    next-state row: a commit that searches the row costs about 1.3 µs (a dense one 0.2), building
    a row about 7 µs plus 3.3 ns per token (Llama 3), so by then the searches have cost about
    what the row does (rent, then buy)."""
    return 5 + row_length // 400


class TokenTable:
    """Allowed tokens per DFA state, eager (all states bound) or lazy (bound on first use)."""

    def __init__(self, dfa: DFATable, vocab_size: int, eos_ids: tuple[int, ...],
                 limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS):
        self.dfa = dfa
        self.vocab_size = vocab_size
        self.eos_ids = tuple(eos_ids)
        self._eos = np.array(self.eos_ids, dtype=np.int64)
        n = dfa.n_states
        self._ids: list[np.ndarray | None] = [None] * n
        self._next: list[np.ndarray | None] = [None] * n
        self._forced = np.full(n, -2, dtype=np.int32)  # -2: not bound yet
        self._words: np.ndarray | None = None  # eager: the distinct rows; lazy: the _word_rows cache
        self._row_of = np.zeros(0, dtype=np.int64)  # eager: each state's row in _words
        self._views: dict[str, list[np.ndarray]] = {}
        self._trie: TokenTrie | None = None
        self._slices: NodeSlices | None = None  # lazy: the DFA's node slices, made on the first mask
        self._exit_walk: tuple[np.ndarray, np.ndarray] | None = None  # (delta, marks) for walk_rows
        self._forced_len: np.ndarray | None = None
        self.set_limits(limits)

    def set_limits(self, limits: RuntimeLimits) -> None:
        """Bound the caches by ``limits`` (they start empty)."""
        self.limits = limits
        n = self.dfa.n_states
        self._word_rows = LRUCache(limits.dfa_rows)  # lazy: packed rows by state
        self._masks = LRUCache(limits.bool_masks)  # bool masks by (state, size)
        # A lazy table's bound rows of ids and next states are a cache too (an eager one's
        # are its data); forgetting one sends its commits back to the token's bytes.
        self._bound = LRUCache(limits.dfa_rows, self._forget_row)
        if self._slices is not None:
            self._slices.set_limits(limits)
        if self._trie is not None:
            for q in range(n):
                self._ids[q] = self._next[q] = None
        # Dense next-state rows (int32[V]) per state, while their bytes fit
        # ``dense_row_bytes``: a commit is then one array index, elsewhere a search of the
        # sorted row. A row is built once the state's searches have cost about what building
        # it does (:func:`dense_after`), so a state committed from a few times (most of a
        # short document's) never pays hundreds of searches' worth for one, and the states
        # decoding keeps returning to get theirs.
        self._dense: list[np.ndarray | None] = [None] * n
        self._dense_left = limits.dense_row_bytes // (4 * max(self.vocab_size, 1))
        self._commits = [0] * n  # per state, the commits searched so far
        # Per state, its row as memoryviews: bisect on them returns Python ints, half the
        # cost of a numpy search and its scalars.
        self._search: list[tuple[memoryview, memoryview] | None] = [None] * n

    def _forget_row(self, q: int, _) -> None:
        self._ids[q] = self._next[q] = self._search[q] = None

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """Per cache: entries now, its bound, and evictions so far."""
        out = {"bool_masks": self._masks.stats()}
        if self._trie is not None:
            out.update(dfa_rows=self._word_rows.stats(), dfa_bound_rows=self._bound.stats())
        return out

    # ------------------------------------------------------------ construction

    @classmethod
    def eager(cls, dfa: DFATable, rows: TokenRows, vocab_size: int, eos_ids,
              limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS,
              distinct: tuple[np.ndarray, np.ndarray] | None = None) -> "TokenTable":
        """A table with every state bound, from rows covering states ``0..S-1`` in order.

        States with equal rows share one packed row (``distinct``: their
        :func:`distinct_token_rows`, when the caller has them already).
        """
        table = cls(dfa, vocab_size, eos_ids, limits)
        table._install(rows)
        row_of, reps = distinct or distinct_token_rows(dfa, rows)
        indptr, ids = csr_subset(rows.indptr, rows.token_ids, reps)
        table._words = pack_rows(*table._with_eos(indptr, ids, dfa.accept[rows.states[reps]]), vocab_size)
        table._row_of = row_of
        return table

    @classmethod
    def lazy(cls, dfa: DFATable, trie: TokenTrie, eos_ids,
             limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS) -> "TokenTable":
        """A table that binds each state against ``trie`` the first time it is used."""
        table = cls(dfa, trie.vocab_size, eos_ids, limits)
        table._trie = trie
        table._forced_len = forced_lengths(dfa)
        return table

    def _install(self, rows: TokenRows) -> None:
        for k, q in enumerate(rows.states.tolist()):
            a, b = rows.indptr[k], rows.indptr[k + 1]
            self._ids[q] = rows.token_ids[a:b]
            self._next[q] = rows.next_state[a:b]
            self._forced[q] = rows.forced_token[k]

    def _with_eos(self, indptr: np.ndarray, ids: np.ndarray, accepting: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """CSR rows (ids grouped by row, not sorted) with EOS added to the ``accepting`` rows:
        the EOS ids are inserted at the end of those rows (no per-token temporaries, which on
        a large table cost several times the rows themselves)."""
        at = np.repeat(indptr[1:][accepting], len(self._eos))
        ids = np.insert(ids, at, np.tile(self._eos, int(accepting.sum())))
        added = np.concatenate([[0], np.cumsum(accepting * len(self._eos))])
        return indptr + added, ids

    def _bind(self, q: int) -> None:
        if self._trie is None or self._forced_len is None:
            raise AssertionError("eager token tables are fully bound")
        from gramc.automata.walk import shared_buffers  # numba: imported on the first bind

        buf = shared_buffers(len(self._trie.sorted_ids))
        rows, words, dense = bind_state(self.dfa, self._trie, q, self._forced_len, buf)
        self._install(rows)
        if dense is not None and self._dense[q] is None and self._dense_left > 0:
            self._dense_left -= 1
            self._dense[q] = dense
        if self.dfa.accept[q]:
            set_bits(words, self._eos)
        self._word_rows.put(q, words)
        self._bound.put(q, None)

    # ------------------------------------------------------------ lookups

    @property
    def is_lazy(self) -> bool:
        return self._trie is not None

    def row(self, q: int) -> tuple[np.ndarray, np.ndarray]:
        """Allowed token ids of state ``q`` (ascending, without EOS) and their next states."""
        if self._ids[q] is None:
            self._bind(q)
        ids, nxt = self._ids[q], self._next[q]
        assert ids is not None and nxt is not None  # bound just now (the newest row stays)
        return ids, nxt

    def row_views(self, dtype: np.dtype) -> list[np.ndarray] | None:
        """Per-state bitmask rows viewed as ``dtype`` (int32 or uint32), or None when lazy.

        A list of ready views makes ``fill_bitmask`` one ``np.copyto`` (no per-call indexing
        or re-viewing), which is most of its cost at ~50k-250k tokens.
        """
        if self._words is None:
            return None
        key = np.dtype(dtype).str
        views = self._views.get(key)
        if views is None:
            distinct = list(self._words.view(dtype))
            views = self._views[key] = [distinct[r] for r in self._row_of.tolist()]
        return views

    def words(self, q: int) -> np.ndarray:
        """The packed bitmask row of state ``q`` (EOS included where ``q`` accepts)."""
        if self._words is not None:
            return self._words[self._row_of[q]]
        row = self._word_rows.get(q)
        if row is None:
            row = self._word_rows.put(q, self._sliced_words(q))
        return row

    def _sliced_words(self, q: int) -> np.ndarray:
        """The packed row of state ``q`` of a lazy table from its node slice, its exits walked
        on through the DFA (see the module doc); the row of ids is not bound."""
        from gramc.runtime.pda_slices import NodeSlices  # numba: imported on first use

        if self._slices is None:
            assert self._trie is not None  # a table without packed rows is lazy
            as_pda = _without_calls(self.dfa)
            self._slices = NodeSlices(as_pda, self._trie, short_loops=SHORT_LOOP_BYTES, limits=self.limits)
            self._exit_walk = (as_pda.delta, np.zeros(len(as_pda.delta), dtype=np.bool_))  # (table, no marks)
        dfa = self.dfa
        found = self._slices.slice_for(q) if self._slices.reads(q) else None
        words = np.zeros(self.n_words, dtype=np.uint32) if found is None else found.words.copy()
        if found is not None and len(found.exits):
            assert self._exit_walk is not None  # made with the slices
            self._slices.walk_rows(*self._exit_walk, found.exits, into=words)
        set_bits(words, dfa.token_ids[dfa.delta[q, dfa.n_byte_classes :] != DEAD])
        if dfa.accept[q]:
            set_bits(words, self._eos)
        return words

    def mask(self, q: int, size: int) -> np.ndarray:
        """A read-only bool mask of length ``size`` for state ``q`` (cached)."""
        key = (q, size)
        mask = self._masks.get(key)
        if mask is None:
            mask = unpack_row(self.words(q), size)
            mask.flags.writeable = False
            self._masks.put(key, mask)
        return mask

    def next_state(self, q: int, token: int) -> int:
        """The state after ``token`` from ``q``, or DEAD when the token is not allowed.

        ``token`` must be in ``range(vocab_size)``.
        """
        row = self._dense[q]
        if row is not None:
            return int(row[token])
        found = self._search[q]
        if found is None:
            if self._ids[q] is None and self._trie is not None:
                return self._step(q, token)  # a lazy state not bound: a row would walk every token
            ids_a, nxt_a = self.row(q)
            found = self._search[q] = (ids_a.data, nxt_a.data)
        ids, nxt = found
        self._commits[q] += 1
        if self._commits[q] >= dense_after(len(ids)) and self._dense_left > 0:
            self._dense_left -= 1
            row = self._dense[q] = np.zeros(self.vocab_size, dtype=np.int32)
            ids_a, nxt_a = self.row(q)
            row[ids_a] = nxt_a
            return int(row[token])
        i = bisect_left(ids, token)
        return nxt[i] if i < len(ids) and ids[i] == token else DEAD

    def _step(self, q: int, token: int) -> int:
        """The state after ``token`` from ``q``, by its own bytes (DEAD where the mask says
        no: a token of no bytes, or a special token without a column)."""
        assert self._trie is not None  # called for lazy tables only
        data = self._trie.token_bytes(token)
        if data is None:
            return self.dfa.step_token(q, token)
        return self.dfa.step_bytes(q, data)

    def forced(self, q: int) -> int:
        """The forced (jump-forward) token of state ``q``, or -1."""
        if self._forced[q] == -2:
            self._bind(q)
        return int(self._forced[q])

    def all_rows(self) -> TokenRows:
        """Rows of every state (binding the rest first when lazy), for writing an artifact."""
        rows = [self.row(q) for q in range(self.dfa.n_states)]  # a lazy table's may be evicted since
        counts = np.array([len(i) for i, _ in rows], dtype=np.int64)
        empty = np.zeros(0, dtype=np.int32)
        return TokenRows(
            states=np.arange(self.dfa.n_states),
            indptr=np.concatenate([[0], np.cumsum(counts)]),
            token_ids=np.concatenate([i for i, _ in rows]) if rows else empty,
            next_state=np.concatenate([n for _, n in rows]) if rows else empty,
            forced_token=self._forced.copy(),
        )

    @property
    def n_words(self) -> int:
        return n_words(self.vocab_size)

    # ------------------------------------------------------------ whole tables (batching, GPU)

    def packed_words(self) -> np.ndarray:
        """Every state's packed mask row, uint32 ``[S, n_words]`` (binds every state if lazy;
        an eager table's shared rows are copied out per state). Treat it as read-only."""
        if self._words is not None:
            return self._words if len(self._words) == len(self._row_of) else self._words[self._row_of]
        rows = self.all_rows()
        return pack_rows(*self._with_eos(rows.indptr, rows.token_ids, self.dfa.accept), self.vocab_size)

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every state's row as CSR: ``indptr`` int64 ``[S+1]``, token ids int32 (ascending
        within a row, EOS not added) and next states int32 (binds every state if lazy)."""
        rows = self.all_rows()
        return (rows.indptr.astype(np.int64), rows.token_ids.astype(np.int32),
                rows.next_state.astype(np.int32))


def distinct_token_rows(dfa: DFATable, rows: TokenRows) -> tuple[np.ndarray, np.ndarray]:
    """``(row_of, reps)`` of :func:`~gramc.bitmask.distinct_rows` for a DFA's token rows:
    two states share a mask row when they allow the same tokens and both accept or neither."""
    return distinct_rows(rows.indptr, rows.token_ids, dfa.accept[rows.states].astype(np.int64))


def _without_calls(dfa: DFATable) -> PDATable:
    """``dfa`` as a PDA table of no rules and no accepting nodes: every node is *plain* (reads
    without touching a stack), so a node slice's exits are only the nodes out of its loop."""
    n = dfa.n_states
    # walk() may write a table (requests for unbuilt entries: a DFA has none), so a table read
    # from a file is copied to a writeable one, as walk_tokens does.
    return PDATable(delta=np.require(dfa.delta, np.int32, ["C", "W"]), byte_class=dfa.byte_class,
                    token_ids=dfa.token_ids, accept=np.zeros(n, dtype=bool), node_rule=np.zeros(n, dtype=np.int32),
                    rule_start=np.zeros(0, dtype=np.int32), start_rule=0, rule_names=(), **no_calls(n))
