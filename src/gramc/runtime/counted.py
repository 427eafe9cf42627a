"""Counted DFA artifacts: regular grammars whose large bounded repetitions are counters.

A :class:`~gramc.automata.counted.CountedDFA` numbers outer states and counter states
``(site, count, item state)`` in one space; a matcher keeps one number, as for a DFA.

Outer states are bound like a DFA's, by the token walk over the counted DFA read as a plain
DFA for a token's length (:meth:`~gramc.automata.counted.CountedDFA.expanded`): their rows are
stored in the artifact. Counter states are never bound one by one (a string with
``maxLength`` 100,000 has millions). A token read from an item state starts the same number
of *further* iterations at every count, and the item cannot be read ambiguously, so per item
state the vocabulary is walked once through the item looped on itself, counted
(:func:`~gramc.runtime.pda_counted.counted_slice`, as for a PDA's counted chains): a state with
``r`` iterations left and ``need`` more needed takes the tokens that start at most ``r``, and
of the tokens that leave the repetition (an exit byte at an iteration's end), those that leave
after at least ``need`` and at most ``r``, walked on from the return state. A mask therefore
depends on the count only through ``min(r, L)`` and ``min(need, L + 1)`` (``L`` the longest
token), which keys a bounded cache of rows. Commits from a counter state read the token's own
bytes.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramc.automata.bind import TokenRows, bind_states, forced_lengths
from gramc.automata.counted import CountedDFA
from gramc.automata.tables import DEAD
from gramc.automata.trie import TokenTrie, trie_for
from gramc.limits import DEFAULT_LIMITS, DEFAULT_RUNTIME_LIMITS, Deadline, Limits, RuntimeLimits
from gramc.runtime.cache import LRUCache
from gramc.runtime.artifact import Artifact, VocabInfo
from gramc.bitmask import n_words, set_bits, unpack_row
from gramc.runtime.matcher import DFAMatcher
from gramc.vocab import Vocab

#: Artifact layout version of unbound counted artifacts (layout 1 plus the ``counted`` kind;
#: bound ones are layout 5).
COUNTED_ARTIFACT_VERSION = 2


class CountedTokenTable:
    """Masks and next states of a :class:`CountedDFA` bound to a vocabulary (module doc).

    ``rows`` are the outer states' token rows (next states as counted-DFA ids); without them
    the outer states are bound now, or each on first use when ``lazy``. The token trie and
    the walk table are made on first use: a loaded artifact's outer masks and every commit
    need neither."""

    def __init__(self, cdfa: CountedDFA, vocab: Vocab, rows: TokenRows | None = None, lazy: bool = False,
                 limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS):
        self.cdfa, self.vocab = cdfa, vocab
        self.token_bytes, self.special = vocab.tokens, frozenset(vocab.special_ids)
        self.vocab_size = vocab.size
        self.eos_ids = tuple(vocab.eos_ids)
        self._eos = np.array(self.eos_ids, dtype=np.int64)
        #: The longest byte-matched token (the trie's ``max_len``): no token starts more
        #: further iterations, or reads further.
        self.max_len = max((len(t) for i, t in enumerate(vocab.tokens) if i not in self.special), default=0)
        self._trie: TokenTrie | None = None
        self._walk: tuple | None = None
        self._forced_len: np.ndarray | None = None
        n = cdfa.n_outer
        self._ids: list[Any] = [None] * n  # an outer state's allowed ids once bound
        self._next: list[Any] = [None] * n
        self._forced = np.full(n, -2, dtype=np.int32)  # -2: not bound yet
        self._outer_words: dict[int, np.ndarray] = {}
        self._shapes: LRUCache | None = None
        self.set_limits(limits)
        self.is_lazy = rows is None and lazy
        if rows is not None:
            self._install(rows)
        elif not lazy:
            self.all_rows()

    # ------------------------------------------------------------ outer states

    @property
    def trie(self) -> TokenTrie:
        if self._trie is None:
            self._trie = trie_for(self.vocab)
        return self._trie

    def _walk_table(self) -> tuple:
        """(the walk table, the counted-DFA id of each of its states, its delta and byte
        classes as the walk kernel takes them)."""
        if self._walk is None:
            table, ids = self.cdfa.expanded(self.max_len)
            self._walk = (table, ids, np.require(table.delta, np.int32, ["C", "W"]),
                          np.ascontiguousarray(table.byte_class, dtype=np.int64))
        return self._walk

    def _bind(self, states: np.ndarray) -> TokenRows:
        """Rows of outer ``states`` by the token walk, next states as counted-DFA ids."""
        table, ids, _, _ = self._walk_table()
        if self._forced_len is None:
            self._forced_len = forced_lengths(table)
        rows = bind_states(table, self.trie, states, self._forced_len)
        nxt = ids[rows.next_state].astype(np.int32)
        return TokenRows(rows.states, rows.indptr, rows.token_ids, nxt, rows.forced_token)

    def _install(self, rows: TokenRows) -> None:
        for k, q in enumerate(rows.states.tolist()):
            a, b = rows.indptr[k], rows.indptr[k + 1]
            self._ids[q], self._next[q] = rows.token_ids[a:b], rows.next_state[a:b]
            self._forced[q] = rows.forced_token[k]

    def _row(self, q: int) -> tuple[np.ndarray, np.ndarray]:
        if self._ids[q] is None:
            self._install(self._bind(np.array([q], dtype=np.int64)))
        return self._ids[q], self._next[q]

    def all_rows(self) -> TokenRows:
        """Rows of every outer state (binding those not bound yet), for writing an artifact."""
        missing = [q for q, ids in enumerate(self._ids) if ids is None]
        if missing:
            self._install(self._bind(np.array(missing, dtype=np.int64)))
        counts = np.array([len(i) for i in self._ids], dtype=np.int64)
        return TokenRows(states=np.arange(self.cdfa.n_outer), indptr=np.concatenate([[0], np.cumsum(counts)]),
                         token_ids=np.concatenate(self._ids).astype(np.int32),
                         next_state=np.concatenate(self._next).astype(np.int32), forced_token=self._forced.copy())

    # ------------------------------------------------------------ masks

    @property
    def n_words(self) -> int:
        return n_words(self.vocab_size)

    def row_views(self, dtype) -> None:
        """No per-state row list (counter states are not enumerable): masks go by :meth:`words`."""
        return None

    def words(self, q: int) -> np.ndarray:
        """The packed mask row of state ``q`` (EOS included where ``q`` accepts); read-only."""
        if q < self.cdfa.n_outer:
            row = self._outer_words.get(q)
            if row is None:
                ids, _ = self._row(q)
                row = np.zeros(self.n_words, dtype=np.uint32)
                set_bits(row, ids)
                if self.cdfa.outer.accept[q]:
                    set_bits(row, self._eos)
                row.flags.writeable = False
                self._outer_words[q] = row
            return row
        key = self._counter_key(q)
        row = self._rows.get(key)
        if row is None:
            row = self._rows.put(key, self._counter_words(*key, self.cdfa.accepts(q)))
        return row

    def set_limits(self, limits: RuntimeLimits) -> None:
        """Bound the caches by ``limits`` (they start empty): counter-state rows as
        ``mask_rows``, bool masks as ``bool_masks``, counted slices as ``node_slices``; the
        slices' shapes are shared process-wide (``counted_shapes``)."""
        self._limits = limits
        self._rows = LRUCache(limits.mask_rows)
        self._masks = LRUCache(limits.bool_masks)
        self._slices = LRUCache(limits.node_slices)

    @property
    def limits(self) -> RuntimeLimits:
        """The runtime limits the caches are bounded by."""
        return self._limits

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """Per cache: entries now, its bound, and evictions so far."""
        return {"mask_rows": self._rows.stats(), "bool_masks": self._masks.stats(),
                "node_slices": self._slices.stats()}

    def _counter_words(self, j: int, i: int, left: int, need: int, accepting: bool) -> np.ndarray:
        """The row of item state ``i`` of site ``j`` with ``left`` further iterations allowed
        and ``need`` needed before the repetition may be left (both capped: module doc)."""
        from gramc.automata.walk import set_walked, walk  # numba: imported on first use

        found = self._slice(j, i)
        row = found.words(left).copy()
        exits = found.exits
        a = int(np.searchsorted(exits[:, 3], need, side="left"))
        b = int(found.exit_le[min(left, found.max_u)])
        if b > a:
            ret = self.cdfa.site_info(j)[3]
            trie, buf = self.trie, self._walk_buffers()
            _, _, delta, byte_class = self._walk_table()
            buf.ranges[: b - a] = exits[a:b]
            buf.ranges[: b - a, 3] = ret  # an outer state: the same id in the walk table
            ne, _, _, _ = walk(delta, byte_class, trie.blob, trie.offsets, trie.lengths, trie.lcp,
                               trie.skip, trie.max_len, buf.ranges, b - a, np.zeros(0, dtype=np.bool_), False,
                               buf.pos, buf.next, 0, buf.hits, buf.pending, buf.missing)
            set_walked(row, trie.sorted_ids, buf.pos, ne)
        if accepting:
            set_bits(row, self._eos)
        row.flags.writeable = False
        return row

    def _slice(self, j: int, i: int):
        """The counted slice of item state ``i`` at site ``j`` (its exit bytes are what the
        site's return state reads)."""
        from gramc.runtime.pda_counted import counted_slice, shared_shapes  # numba: imported on first use

        found = self._slices.get((j, i))
        if found is None:
            k, _, _, ret = self.cdfa.site_info(j)
            item = self.cdfa.items[k]
            targets = item.delta[1:][:, item.byte_class].astype(np.int64)
            rows = targets - 1  # local ids 0..w-1, -1 dead
            exit_bytes = self.cdfa.outer_live_bytes(ret)
            self._shapes = shared_shapes(self.trie, self._limits.counted_shapes, self._shapes)
            found = self._slices.put((j, i), counted_slice(
                rows, item.accept[1:].astype(bool), exit_bytes, item.start - 1, i - 1, self.max_len, self.trie,
                self._walk_buffers(), self._shapes))
        return found

    def _walk_buffers(self):
        from gramc.automata.walk import shared_buffers

        return shared_buffers(len(self.trie.sorted_ids))

    def mask(self, q: int, size: int) -> np.ndarray:
        """A read-only bool mask of length ``size`` for state ``q`` (cached)."""
        key = (self._mask_key(q), size)
        mask = self._masks.get(key)
        if mask is None:
            mask = unpack_row(self.words(q), size)
            mask.flags.writeable = False
            self._masks.put(key, mask)
        return mask

    def _mask_key(self, q: int) -> int | tuple[int, int, int, int]:
        """What a state's mask depends on: an outer state's number, or a counter state's key."""
        return q if q < self.cdfa.n_outer else self._counter_key(q)

    def _counter_key(self, q: int) -> tuple[int, int, int, int]:
        """A counter state's site and item state with its iterations left and still needed,
        capped (module doc)."""
        j, c, i = self.cdfa.decode(q)
        _, lo, hi, _ = self.cdfa.site_info(j)
        max_u = self.max_len
        return (j, i, min(hi - c, max_u), min(max(lo - c, 0), max_u + 1))

    # ------------------------------------------------------------ commits

    def next_state(self, q: int, token: int) -> int:
        """The state after ``token`` from ``q``, or DEAD when it is not allowed."""
        if q < self.cdfa.n_outer:
            ids, nxt = self._row(q)
            # The key in the row's own dtype: a Python int makes numpy search an int64 copy
            # of the whole row (a Llama 3 free-text row: ~60 µs, and the cache flushed).
            i = int(ids.searchsorted(ids.dtype.type(token)))
            return int(nxt[i]) if i < len(ids) and ids[i] == token else DEAD
        data = self.token_bytes[token]
        return DEAD if token in self.special or not data else self.cdfa.step_bytes(q, data)

    def forced(self, q: int) -> int:
        """The forced (jump-forward) token of ``q``: the longest (then lowest-id) token that
        lies within the bytes the language forces from there, or -1."""
        if q < self.cdfa.n_outer:
            self._row(q)
            return int(self._forced[q])
        forced = self.cdfa.forced_bytes(q, self.max_len)
        for n in range(len(forced), 0, -1):
            token = self._token_of(forced[:n])
            if token >= 0:
                return token
        return -1

    def _token_of(self, data: bytes) -> int:
        """The lowest token id spelled exactly ``data``, or -1 (the trie is sorted by bytes,
        then id)."""
        trie = self.trie
        blob, offsets, lengths = trie.blob, trie.offsets, trie.lengths

        def spelled(p: int) -> bytes:
            return blob[offsets[p] : offsets[p] + lengths[p]].tobytes()

        p = bisect_left(range(len(trie.sorted_ids)), data, key=spelled)
        return int(trie.sorted_ids[p]) if p < len(trie.sorted_ids) and spelled(p) == data else -1


class CountedDFAMatcher(DFAMatcher):
    """A matcher over a counted DFA: the state is one id (outer or counter state)."""

    __slots__ = ()

    def _start(self) -> int:
        return self._artifact.cdfa.start

    def _step_bytes(self, state: int, data: bytes) -> int | None:
        nxt = self._artifact.cdfa.step_bytes(state, data)
        return None if nxt == DEAD else nxt

    def _complete(self, state: int) -> bool:
        return self._artifact.cdfa.accepts(state)


@dataclass(eq=False)
class CountedArtifact(Artifact):
    """A compiled regular grammar with counted repetitions, bound to a vocabulary or not.

    Counter-state masks are made at run time, by walking the tokens, so a bound one reads the
    vocabulary's token bytes, and binds it by fingerprint as a PDA artifact does (layout 5)."""

    cdfa: CountedDFA
    meta: dict[str, Any]
    vocab: VocabInfo | None = None
    _table: CountedTokenTable | None = field(default=None, repr=False)

    kind = "counted"
    layout = COUNTED_ARTIFACT_VERSION
    reads_token_bytes = True

    @classmethod
    def bound(cls, cdfa: CountedDFA, meta: dict, vocab: Vocab, *, lazy: bool = False,
              limits: Limits = DEFAULT_LIMITS, deadline: Deadline | None = None,
              runtime_limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS) -> "CountedArtifact":
        """Bind ``cdfa`` to ``vocab``: the outer states now (eager) or on first use (lazy).
        Only the outer states are bound (counter states never are), so ``limits.max_memory``
        is checked for their packed masks and ``deadline`` once before."""
        if not lazy:
            limits.check_memory(cdfa.n_outer * n_words(vocab.size) * 4,
                                f"the packed token masks of {cdfa.n_outer:,} outer states")
            if deadline is not None:
                deadline.check()
        table = CountedTokenTable(cdfa, vocab, lazy=lazy, limits=runtime_limits)
        return cls(cdfa, meta, VocabInfo.of(vocab), table)

    def _unbound_copy_args(self) -> tuple[Any, dict]:
        return (self.cdfa, self.meta)

    def _matcher_class(self):
        return CountedDFAMatcher

    def to_arrays(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The container metadata and arrays (a lazy table binds its outer states first)."""
        cdfa = self.cdfa
        meta = self._header({"start": int(cdfa.start), "bounds": cdfa.bounds.tolist(),
                             "item_starts": [int(item.start) for item in cdfa.items]})
        stored = cdfa.arrays()
        arrays = {(f"counted.{k}" if k in COUNTED_ARRAYS else f"dfa.{k}"): v for k, v in stored.items()}
        if self.vocab is not None:
            arrays.update(self.token_table.all_rows().stored())  # raises while it awaits its vocabulary
        return meta, arrays

    def describe(self) -> dict[str, Any]:
        """A summary for ``gramc inspect``."""
        out = self._describe()
        cdfa = self.cdfa
        out.update(states=cdfa.n_outer, byte_classes=cdfa.outer.n_byte_classes,
                   counters=[{"min": int(lo), "max": int(hi), "item_states": int(w)}
                             for (lo, hi), w in zip(cdfa.bounds.tolist(), cdfa.widths.tolist())],
                   counted_states=cdfa.n_states)
        if self._table is not None and not self._table.is_lazy:
            out["token_transitions"] = int(self._table.all_rows().indptr[-1])
        return out


#: The counted section's arrays (``counted.<name>``), dtype and dimensions.
COUNTED_ARRAYS = {
    "call_kind": (np.int32, 1),
    "call_next": (np.int32, 1),
    "item_offset": (np.int64, 1),
    "item_byte_class": (np.uint8, 2),
    "item_delta": (np.int32, 2),
    "item_accept": (np.bool_, 1),
}
