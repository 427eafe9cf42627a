"""Token masks of a PDA bound to a vocabulary: one engine, an ordered list of strategies.

The mask of an Earley configuration is memoised by its configuration key
(:meth:`EarleyParser.key`), so JSON output, which revisits the same configurations
constantly, gets most masks from a dictionary. A first-seen configuration is served by the
first strategy of :class:`PDATokenTable` that can: precomputed node rows where they leave few
tokens to check on the stack, a walk of every token through the :class:`StackDFA` (a DFA over
real stacks, grown on use and kept), or node rows with every uncertain token checked on the
stack DFA or, for left-recursive grammars, by the Earley parser in byte order so tokens
sharing a prefix share the work. Every cache is bounded by the table's
:class:`~gramc.limits.RuntimeLimits` (see :meth:`PDATokenTable.cache_stats`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence, cast

import numpy as np

from gramc.automata.pda_bind import LAZY_DEPTH, LazyExpansion, NodeTokens, bind_nodes
from gramc.automata.pda_table import PDATable
from gramc.automata.trie import TokenTrie, trie_for
from gramc.bitmask import n_words, set_bits, unpack_row
from gramc.limits import DEFAULT_RUNTIME_LIMITS, RuntimeLimits
from gramc.runtime.cache import LRUCache, RowPool
from gramc.runtime.earley import ChartSet, ChartView, EarleyParser
from gramc.runtime.pda_configs import Encoder, StoredConfigs
from gramc.runtime.pda_stack_dfa import StackDFA, TooLarge
from gramc.vocab import Vocab

if TYPE_CHECKING:
    from gramc.runtime.pda_horizon import Horizon  # numba: imported at run time on the first walk

#: Uncertain tokens above which a configuration's stored node rows give way to the walk.
MAX_STORED_UNCERTAIN = 256

#: Longest forced byte string followed by ``forced_tokens`` (a guard, not a semantic limit).
MAX_FORCED_BYTES = 4096


class _Overlay:
    """A chart viewed as ``base + ext`` without copying ``base``."""

    __slots__ = ("base", "ext", "n")

    def __init__(self, base: Sequence[ChartSet], ext: list[ChartSet]):
        self.base, self.ext, self.n = base, ext, len(base)

    def __getitem__(self, j: int) -> ChartSet:
        if j < 0:
            j += self.n + len(self.ext)
        return self.base[j] if j < self.n else self.ext[j - self.n]

    def __len__(self) -> int:
        return self.n + len(self.ext)


class PDATokenTable:
    """The masks of a PDA bound to a vocabulary, by an explicit, ordered list of strategies.

    A configuration's mask is memoised by its key; a first-seen one is computed by the
    first strategy of :attr:`strategies` that can serve it:

    ``"stored_configs"``
        (only where the masks of the configurations a compile-time exploration reached are
        stored, as a written artifact stores them) a lookup of the configuration's encoding
        (:mod:`gramc.runtime.pda_configs`).
    ``"stored_rows"``
        (only where node rows were precomputed, as a written artifact stores them, for every
        node of the configuration) the OR of the nodes' accepted rows, when they leave at
        most :data:`MAX_STORED_UNCERTAIN` uncertain tokens to check on the stack: a few row
        operations.
    ``"walk"``
        (not for left-recursive grammars) every token walked through the stack DFA from the
        configuration's state, node slices taking the stack-free parts; it declines a
        configuration whose stack-DFA states exceed their budget.
    ``"rows"``
        the nodes' rows (bound now if not stored) OR-ed, and every uncertain token checked
        on the stack DFA or, for left-recursive grammars, by the Earley parser: serves every
        configuration.

    An in-memory compile (``lazy=True``) and a loaded ``.gmask`` run this same engine; they
    differ only in what is precomputed (``nodes``, ``configs``), so their masks are identical.
    """

    def __init__(self, table: PDATable, vocab: Vocab, nodes: NodeTokens | None = None,
                 depth: int = 2, limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS,
                 configs: StoredConfigs | None = None):
        self.table = table
        self.parser = EarleyParser(table)
        self.vocab = vocab
        self.token_bytes = vocab.tokens
        self.vocab_size = vocab.size
        self.special = vocab.special_ids
        self.eos_ids = vocab.eos_ids
        self.n_words = n_words(self.vocab_size)
        # Rows bound at run time (a table without stored rows), by node.
        self._acc: list[np.ndarray | None] = [None] * table.n_nodes
        self._unc: list[np.ndarray | None] = [None] * table.n_nodes
        #: The precomputed node rows (None: none), possibly for some nodes only.
        self.stored = nodes
        self._has_row = np.zeros(table.n_nodes, dtype=bool)  # a stored row, by node
        self._n_unc = np.zeros(table.n_nodes, dtype=np.int64)
        if nodes is not None:
            self._has_row[1:] = True if nodes.row_of is None else nodes.row_of >= 0
            self._n_unc[1:] = np.diff(nodes.unc_indptr)
        self._all_stored = bool(self._has_row[1:].all())
        self._depth = depth
        self.is_lazy = nodes is None
        self._expansion: LazyExpansion | None = None
        self._every_id: np.ndarray | None = None  # every id a node row can hold (see _bind_unbounded)
        self._by_bytes: dict[bytes, int] | None = None
        self._stack: StackDFA | None = None
        self._horizon: Horizon | None = None  # made on the first walk
        self._initial: ChartView | None = None
        self._special_ids = np.array(sorted(self.special), dtype=np.int64)
        # A left-recursive grammar would grow continuations without end on the stack DFA.
        self._stack_usable = not table.left_recursive()
        #: The stored masks of explored configurations (None: none).
        self.configs = configs
        self._encoder = None if configs is None else Encoder(self.parser, configs.depth)
        #: The strategy names, in the order they are tried (see the class doc).
        self.strategies: tuple[str, ...] = (("stored_configs",) if configs is not None and len(configs) else ()) + \
            (("stored_rows",) if nodes is not None else ()) + \
            (("walk",) if self._stack_usable else ()) + ("rows",)
        self._strategies = tuple(getattr(self, "_by_" + name) for name in self.strategies)
        #: First-seen configurations served, by strategy name.
        self.served = dict.fromkeys(self.strategies, 0)
        self.set_limits(limits)

    def restrict_strategies(self, names: Sequence[str]) -> None:
        """Serve first-seen configurations with only ``names`` of :attr:`strategies`, in
        their order (for differential tests and benchmarks: every strategy alone gives the
        same masks). ``"rows"`` must stay, last: it is the one that serves every
        configuration. Masks already memoised are dropped."""
        names = tuple(names)
        places = [self.strategies.index(n) if n in self.strategies else -1 for n in names]
        if not names or names[-1] != "rows" or min(places) < 0 or places != sorted(set(places)):
            raise ValueError(f"strategies {names!r}: a subsequence of {self.strategies!r} ending in 'rows'")
        self.strategies = names
        self._strategies = tuple(getattr(self, "_by_" + name) for name in names)
        self._memo.clear()
        self._masks.clear()

    def set_limits(self, limits: RuntimeLimits) -> None:
        """Bound the caches by ``limits`` (they start empty; interned ids stay valid)."""
        self.limits = limits
        self._memo = LRUCache(limits.mask_rows)  # packed rows by configuration key
        self._masks = LRUCache(limits.bool_masks)  # bool masks by (key, size)
        self._walks = LRUCache(limits.walk_rows)  # by canonical key: see _by_walk
        self._pool = RowPool()  # the memoised masks' distinct rows (see _words)
        self._steps = LRUCache(limits.commit_steps)  # by (configuration key, token): see step
        self.parser.max_paths = limits.commit_paths
        # Node rows bound at run time are a cache too (stored ones are the artifact's data).
        self._bound_nodes = None if self._all_stored else LRUCache(limits.node_rows, self._forget_node)
        if self._stack is not None:
            self._stack.set_limits(limits)

    def _forget_node(self, node: int, _) -> None:
        self._acc[node] = self._unc[node] = None

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """Per cache: entries now, its bound, and evictions (or, for the interned sets and
        the stack DFA, fresh starts) so far."""
        out = {"mask_rows": self._memo.stats(), "bool_masks": self._masks.stats(),
               "walk_rows": self._walks.stats(), "commit_steps": self._steps.stats(),
               "interned_sets": {"entries": self.parser.n_interned, "max_entries": self.limits.interned_sets,
                                 "resets": self.parser.generation},
               "commit_paths": {"entries": self.parser.n_paths, "max_entries": self.limits.commit_paths,
                                "resets": self.parser.path_resets}}
        if self._bound_nodes is not None:
            out["node_rows"] = self._bound_nodes.stats()
        if self._stack is not None:
            out.update(self._stack.cache_stats())
        return out

    @property
    def trie(self) -> TokenTrie:
        """The vocabulary's token trie (shared by every table of the vocabulary; built on
        first use, as a loaded artifact's stored rows serve many masks without it)."""
        return trie_for(self.vocab)

    def node_row(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """(accepted bitmask row, uncertain ids) of ``node``, binding it first if not stored."""
        if self.stored is not None and self._has_row[node]:
            return _row(self.stored, node - 1)
        if self._acc[node] is None:
            self._bind_many([node])
        acc, unc = self._acc[node], self._unc[node]
        assert acc is not None and unc is not None  # bound just now (the newest row stays)
        return acc, unc

    def _bind_many(self, nodes) -> None:
        """Bind the unbound ones of ``nodes`` in batches: one trie walk for many nodes costs
        a fraction of one walk per node. Run-time binding expands at most
        :data:`~gramc.automata.pda_bind.LAZY_DEPTH` calls (fewer states to build while a mask
        waits; the extra uncertain tokens cost little on the stack DFA)."""
        if self._expansion is None:
            self._expansion = LazyExpansion(self.table, min(self._depth, LAZY_DEPTH), reach=self.trie.max_len)
        batch: list[int] = []
        x = None
        for n in dict.fromkeys(nodes):
            if self._has_row[n] or self._acc[n] is not None:
                continue
            before = self._expansion.current
            nxt = self._expansion.automaton_for(n)
            if self._expansion.current is not before and batch:
                self._bind_batch(batch, x)  # restarted: the batch's states are in the old one
                batch = []
            if nxt is None:
                self._bind_unbounded(n)
                continue
            batch.append(n)
            x = nxt
        if batch:
            self._bind_batch(batch, x)

    def _bind_unbounded(self, node: int) -> None:
        """The row of a node whose region is too large to expand even without calls: no
        token is accepted whatever the stack, every one is uncertain (checked on the real
        parse, so the masks stay exact; only slower where that node is live)."""
        assert self._bound_nodes is not None
        if self._every_id is None:
            every = np.ones(self.vocab_size, dtype=bool)
            every[self._special_ids] = False
            every[self.table.token_ids] = True
            self._every_id = np.flatnonzero(every)
            self._every_id.flags.writeable = False
        self._acc[node] = np.zeros(self.n_words, np.uint32)
        self._unc[node] = self._every_id
        self._bound_nodes.put(node, None)

    def _bind_batch(self, nodes: list[int], x) -> None:
        assert self._bound_nodes is not None  # rows are bound at run time: not all are stored
        bound = bind_nodes(self.table, self.trie, np.array(nodes), min(self._depth, LAZY_DEPTH), x)
        for row, n in enumerate(nodes):
            # Copied out of the batch's arrays (a view would keep the whole batch alive after
            # its other rows are evicted), and counted against the node-row bound.
            acc, unc = _row(bound, row)
            self._acc[n], self._unc[n] = acc.copy(), unc.copy()
            self._bound_nodes.put(n, None)

    # ------------------------------------------------------------ masks

    def initial(self) -> ChartView:
        """The chart before any input: one shared view (its first set's key is made once)."""
        if self._initial is None:
            self._initial = ChartView(self.parser.initial().sets, 1, shared=True)
        return self._initial

    def step(self, chart: ChartView, token: int, data: bytes) -> ChartView | None:
        """``chart`` after ``token`` (whose bytes are ``data``), or None if the parse dies.

        Charts with the same configuration key have the same future, so the chart one token
        leads to from a key serves every later chart of that key: once the key is known (a
        mask was filled), a step taken before is a lookup, and the chart it returns has its
        key, so the next mask is a memo hit too."""
        last = chart.sets[chart.n - 1]
        parser = self.parser
        key = last.key if last.gen == parser.generation else None
        if key is not None and key is not False:
            hit = self._steps.get((key, token))
            if hit is not None:
                return hit
            nxt = parser.feed_token(chart, token, data)
            if nxt is not None:
                self._steps.put((key, token), ChartView(nxt.sets, nxt.n, shared=True))
            return nxt
        return parser.feed_token(chart, token, data)

    def words(self, chart: ChartView) -> np.ndarray:
        """The packed mask of the configuration ``chart`` (memoised by its key)."""
        last = chart.sets[chart.n - 1]
        if last.gen == self.parser.generation and last.key is not False and last.key is not None:
            hit = self._memo.get(last.key)  # the common call: a key made before, a mask memoised
            if hit is not None:
                return hit
        sets = cast(Sequence[ChartSet], chart)  # a view reads as the sequence of its sets
        return self._words(sets, self._key(sets))

    def mask(self, chart: Sequence[ChartSet], size: int) -> np.ndarray:
        """A read-only bool mask of length ``size`` (cached by configuration key)."""
        key = self._key(chart)
        cached = self._masks.get((key, size)) if key is not None else None
        if cached is None:
            cached = unpack_row(self._words(chart, key), size)
            cached.flags.writeable = False
            if key is not None:
                self._masks.put((key, size), cached)
        return cached

    def _key(self, chart: Sequence[ChartSet]) -> int | None:
        """The configuration key of ``chart``; first, past the interned-set bound, a new
        parser generation (the only point where one starts: no id is held between masks
        but in charts, which re-derive theirs)."""
        if self.parser.n_interned > self.limits.interned_sets:
            self._new_generation()
        return self.parser.key(chart)

    def _new_generation(self) -> None:
        """Drop the interned sets and everything keyed by them."""
        self.parser.new_generation()
        self._memo.clear()
        self._masks.clear()
        self._walks.clear()
        self._steps.clear()
        if self._horizon is not None:
            self._horizon.clear()
        if self._stack is not None:
            self._stack.clear()

    def _words(self, chart: Sequence[ChartSet], key: int | None) -> np.ndarray:
        """The memoised mask of ``key``, else a computed one; configurations with equal masks
        share one row (a few distinct rows serve a document's hundreds of configurations)."""
        if key is not None:
            hit = self._memo.get(key)
            if hit is not None:
                return hit
        name, out = self._compute(chart, key)
        out.flags.writeable = False
        if key is not None:  # a stored mask is one array already (pooling it would cost a hash)
            out = self._memo.put(key, out if name == "stored_configs" else self._pool.shared(out))
        return out

    def _compute(self, chart: Sequence[ChartSet], key: int | None) -> tuple[str, np.ndarray]:
        """The mask from the first strategy that serves the configuration (the last serves
        every one), and that strategy's name."""
        for name, strategy in zip(self.strategies, self._strategies):
            out = strategy(chart, key)
            if out is not None:
                self.served[name] += 1
                return name, out
        raise AssertionError("the 'rows' strategy serves every configuration")

    def _by_stored_configs(self, chart: Sequence[ChartSet], key: int | None) -> np.ndarray | None:
        if key is None:
            return None
        assert self.configs is not None and self._encoder is not None  # the strategy is listed
        encoding = self._encoder.encode(key)
        return None if encoding is None else self.configs.lookup(encoding)

    def _by_stored_rows(self, chart: Sequence[ChartSet], key: int | None) -> np.ndarray | None:
        nodes = sorted({n for n, _ in chart[-1].items})
        has_row, n_unc = self._has_row, self._n_unc
        if not all(has_row[n] for n in nodes) or sum(int(n_unc[n]) for n in nodes) > MAX_STORED_UNCERTAIN:
            return None  # (a few nodes: scalar reads cost less than an index array)
        return self._by_rows(chart, key, nodes)

    def _by_rows(self, chart: Sequence[ChartSet], key: int | None, nodes: list[int] | None = None) -> np.ndarray:
        if nodes is None:
            nodes = sorted({n for n, _ in chart[-1].items})
            if not self._all_stored:
                self._bind_many(nodes)
        rows = [self.node_row(n) for n in nodes]
        out = _accepted_union(rows, self.n_words)
        cands = self._uncertain(out, [u for _, u in rows if len(u)])
        if len(cands):
            set_bits(out, self._accepted(chart, key, cands))
        if self.eos_ids and self.parser.is_complete(chart[-1]):
            set_bits(out, self.eos_ids)
        return out

    def _by_walk(self, chart: Sequence[ChartSet], key: int | None) -> np.ndarray | None:
        """The mask from the stack DFA alone: every token walked from the configuration's
        state (None where its states exceed the budget). The walk is memoised by the
        canonical key (:mod:`gramc.runtime.pda_horizon`), so configurations no token can
        tell apart are walked once."""
        if key is None:
            return None
        stack = self._stack_dfa()
        trie = self.trie
        if self._horizon is None:
            from gramc.runtime.pda_horizon import Horizon  # numba: imported on the first walk

            self._horizon = Horizon(self.table, self.parser, trie.max_len)
        canonical = self._horizon.key(key)
        walked = self._walks.get(canonical)
        if walked is None:
            walked = np.zeros(self.n_words, np.uint32)
            try:
                stack.allowed(canonical, trie, walked)
            except TooLarge:
                return None
            walked.flags.writeable = False
            self._walks.put(canonical, walked)
        specials = [t for t in self.table.token_ids.tolist() if self.parser.scan_token(chart, t) is not None]
        complete = self.eos_ids and self.parser.is_complete(chart[-1])
        if not specials and not complete:
            return walked
        out = walked.copy()
        set_bits(out, specials)
        if complete:
            set_bits(out, self.eos_ids)
        return out

    def _uncertain(self, accepted: np.ndarray, rows: list[np.ndarray]) -> np.ndarray:
        """The ids of ``rows`` (ascending uncertain ids of the set's nodes) whose bit is not
        set in the packed ``accepted`` words, ascending and distinct."""
        if not rows:
            return np.zeros(0, dtype=np.int64)
        if sum(map(len, rows)) > 4096:
            # Rows of up to a vocabulary's size: a scatter over the vocabulary, not a sort.
            flags = np.zeros(self.n_words * 32, dtype=bool)
            for u in rows:
                flags[u] = True
            flags &= ~np.unpackbits(accepted.view(np.uint8), bitorder="little").view(bool)
            return np.flatnonzero(flags)
        ids = rows[0] if len(rows) == 1 else np.unique(np.concatenate(rows))
        ids = ids.astype(np.int64)
        return ids[((accepted[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1) == 0]

    def _accepted(self, chart: Sequence[ChartSet], key: int | None, cands: np.ndarray) -> np.ndarray:
        """The candidate tokens the real parse accepts."""
        if key is not None and self._stack_usable:
            special = np.isin(cands, self._special_ids)
            byte_ids = cands[~special]
            try:
                ok = byte_ids[self._stack_dfa().accepts(key, byte_ids)]
            except TooLarge:
                return self._check(chart, cands)
            return np.concatenate([ok, self._check(chart, cands[special])])
        return self._check(chart, cands)

    def _stack_dfa(self) -> StackDFA:
        """The table's stack DFA, made on first use (it is grown and kept across masks)."""
        if self._stack is None:
            self._stack = StackDFA(self.table, self.parser, self.vocab, self.limits)
        return self._stack

    def _check(self, chart: Sequence[ChartSet], cands: np.ndarray) -> np.ndarray:
        """The candidate tokens the Earley parser accepts (prefixes shared in byte order)."""
        ok: list[int] = []
        parser = self.parser
        ext: list[ChartSet] = []
        prefix = b""
        dead_at = -1  # ext is a dead end from this prefix length on
        for t in self._by_rank(cands):
            if t in self.special:
                if parser.scan_token(chart, t) is not None:
                    ok.append(t)
                continue
            tb = self.token_bytes[t]
            shared = _common_prefix(prefix, tb)
            if 0 <= dead_at <= shared:
                continue  # shares the prefix that already died
            common = min(shared, len(ext))
            del ext[common:]
            dead_at = -1
            view = _Overlay(chart, ext)
            for b in tb[common:]:
                s = parser.scan_byte(view, b)
                if s is None:
                    dead_at = len(ext) + 1
                    break
                ext.append(s)
            prefix = tb
            if dead_at < 0:
                ok.append(t)
        return np.array(ok, dtype=np.int64)

    def _by_rank(self, ids: np.ndarray) -> list[int]:
        """``ids`` in the byte order of their tokens (specials, which have no bytes, first)."""
        rank = self.trie.positions  # -1 for specials
        return ids[np.argsort(rank[ids], kind="stable")].tolist()

    # ------------------------------------------------------------ jump-forward

    def forced(self, chart: Sequence[ChartSet]) -> list[int]:
        """The longest-first tokens of the byte string the grammar forces from ``chart``."""
        data = self._forced_bytes(chart)
        if self._by_bytes is None:
            self._by_bytes = {}
            for i, tb in enumerate(self.token_bytes):
                if tb and i not in self.special:
                    self._by_bytes.setdefault(tb, i)
        out, pos = [], 0
        longest = max(map(len, self._by_bytes), default=0)
        while pos < len(data):
            for end in range(min(len(data), pos + longest), pos, -1):
                t = self._by_bytes.get(data[pos:end])
                if t is not None:
                    out.append(t)
                    pos = end
                    break
            else:
                break
        return out

    def _forced_bytes(self, chart: Sequence[ChartSet]) -> bytes:
        parser = self.parser
        ext: list[ChartSet] = []
        out = bytearray()
        while len(out) < MAX_FORCED_BYTES:
            view = _Overlay(chart, ext)
            last = view[-1]
            if parser.is_complete(last) or any(parser.token_rows[n][c] for n, _ in last.items
                                               for c in parser.token_col.values()):
                break
            members = parser.next_bytes(last)
            if len(members) != 1:
                break
            s = parser.scan_byte(view, members[0])
            assert s is not None  # the byte is live in the last set
            ext.append(s)
            out.append(members[0])
        return bytes(out)


def _accepted_union(rows: list[tuple[np.ndarray, np.ndarray]], n_words: int) -> np.ndarray:
    """The OR of the accepted rows of ``rows`` (a new array); a stored row shared by several
    nodes (the same array) is OR-ed once."""
    distinct = list({id(a): a for a, _ in rows}.values())
    if not distinct:
        return np.zeros(n_words, np.uint32)
    out = distinct[0].copy()
    for a in distinct[1:]:
        np.bitwise_or(out, a, out=out)
    return out


def _row(nodes: NodeTokens, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(accepted row, uncertain ids) of row ``i`` of ``nodes``."""
    return nodes.accepted_row(i), nodes.unc_ids[nodes.unc_indptr[i] : nodes.unc_indptr[i + 1]]


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
