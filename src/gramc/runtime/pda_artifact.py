"""PDA artifacts: compiled context-free grammars, bound to a vocabulary or not.

The runtime reads the vocabulary's token bytes (to check the few stack-dependent tokens and to
spell forced tokens), but a bound PDA artifact binds its vocabulary by fingerprint only
(layout 5): the decoder passes its vocabulary to ``gramc.load``, and hundreds of artifacts of
one model share it. Files of layouts 1 and 3 stored the bytes; they are still read. Every PDA
artifact is written as layout 10 (its calls sparse, and a bound one with the masks of the
configurations an exploration reaches: :mod:`gramc.runtime.pda_configs`); files of layouts 1
and 3-9 are still read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramc.automata.pda_bind import DEFAULT_DEPTH, NodeTokens, bind_nodes, expand, reading_order
from gramc.automata.pda_table import PDATable
from gramc.automata.trie import trie_for
from gramc.bitmask import WordRows, n_words, word_rows
from gramc.errors import LimitExceededError
from gramc.limits import DEFAULT_LIMITS, DEFAULT_RUNTIME_LIMITS, Deadline, Limits, RuntimeLimits
from gramc.runtime.artifact import FINGERPRINT_ARTIFACT_VERSION, WORD_ROWS_ARTIFACT_VERSION, Artifact, VocabInfo
from gramc.runtime.pda_configs import StoredConfigs
from gramc.runtime.pda_finish import Edges, finish_ranks
from gramc.runtime.pda_tokens import PDATokenTable
from gramc.vocab import Vocab




@dataclass(eq=False)
class PDAArtifact(Artifact):
    """A compiled context-free grammar.

    Attributes:
        pda: the recursive transition network (see :class:`~gramc.automata.pda_table.PDATable`).
        meta: source format, hash, options, IR text and compiler version.
        vocab: what the artifact is bound to, or None.
        depth: calls expanded when precomputing node token tables.
    """

    pda: PDATable
    meta: dict[str, Any]
    vocab: VocabInfo | None = None
    _table: PDATokenTable | None = field(default=None, repr=False)
    depth: int = DEFAULT_DEPTH

    kind = "pda"
    layout = WORD_ROWS_ARTIFACT_VERSION
    reads_token_bytes = True

    def _layout(self) -> int:
        return WORD_ROWS_ARTIFACT_VERSION  # whatever the binding and the plan

    @classmethod
    def bound(cls, pda: PDATable, meta: dict, vocab: Vocab, *, lazy: bool = False,
              depth: int = DEFAULT_DEPTH, limits: Limits = DEFAULT_LIMITS,
              deadline: Deadline | None = None,
              runtime_limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS) -> "PDAArtifact":
        """Bind ``pda`` to ``vocab``: the rows of its first :data:`MAX_STORED_NODES` nodes and
        the masks of the configurations an exploration reaches now (eager), or neither
        (lazy); the engine walks the stack DFA or binds the rows it lacks where it needs them.

        ``depth`` is that of the written tables. Masks are the same either way (see
        :class:`~gramc.runtime.pda_tokens.PDATokenTable`). An eager binding checks
        ``limits.max_memory`` and ``deadline`` as :func:`~gramc.automata.pda_bind.bind_nodes`
        says. The table's caches are bounded by ``runtime_limits``."""
        if lazy:
            return cls(pda, meta, VocabInfo.of(vocab), PDATokenTable(pda, vocab, None, depth, runtime_limits), depth)
        nodes = eager_rows(pda, trie_for(vocab), depth, limits, deadline)
        explorer = PDATokenTable(pda, vocab, nodes, depth, runtime_limits)
        configs = StoredConfigs.explore(explorer, deadline=deadline)
        table = PDATokenTable(pda, vocab, nodes, depth, runtime_limits, configs)
        return cls(pda, meta, VocabInfo.of(vocab), table, depth)

    def _unbound_copy_args(self) -> tuple[Any, dict]:
        return (self.pda, self.meta)

    def _bind_options(self) -> dict:
        return {"depth": self.depth} if self.vocab is not None else {}

    def _matcher_class(self):
        from gramc.runtime.pda_matcher import PDAMatcher

        return PDAMatcher

    def to_arrays(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The container metadata and arrays (a lazy artifact writes the eager tables, so the
        same source gives the same bytes either way)."""
        section: dict[str, Any] = {"start_rule": int(self.pda.start_rule),
                                   "rule_names": list(self.pda.rule_names), "depth": self.depth}
        t, configs = None, None
        if self.vocab is not None:
            t = self.token_table  # raises while it awaits its vocabulary
            configs = t.configs if t.configs is not None else StoredConfigs.explore(t)
            section["config_depth"] = configs.depth
        meta = self._header(section)
        arrays = {f"pda.{k}": v for k, v in self.pda.arrays().items()}
        pda = self.pda
        if meta["artifact_version"] >= FINGERPRINT_ARTIFACT_VERSION:  # bound, or unbound with a members plan
            arrays["pda.finish_rank"] = finish_ranks(Edges(pda), pda.accept,
                                                     pda.node_rule, pda.rule_start)
        if t is not None and configs is not None:
            nodes = eager_rows(self.pda, t.trie, self.depth) if t.stored is None else t.stored
            rows, row_of = nodes.distinct()
            indptr, word, value, complement = word_rows(rows, t.vocab_size)
            arrays.update({
                "nodes.row_indptr": indptr,
                "nodes.row_word": word,
                "nodes.row_value": value,
                "nodes.row_complement": complement,
                "nodes.row_of": np.asarray(row_of, dtype=np.int32),  # no copies: a large table's
                "nodes.unc_indptr": np.asarray(nodes.unc_indptr, dtype=np.int64),  # uncertain ids
                "nodes.unc_ids": np.asarray(nodes.unc_ids, dtype=np.int32),  # are 100s of MB
            })
            arrays.update(configs.arrays())
        return meta, arrays

    def describe(self) -> dict[str, Any]:
        """A summary for ``gramc inspect``."""
        out = self._describe()
        out.update(rules=list(self.pda.rule_names), nodes=self.pda.n_nodes,
                   byte_classes=self.pda.n_byte_classes, special_token_columns=len(self.pda.token_ids),
                   expansion_depth=self.depth)
        if self._table is not None and self._table.stored is not None:
            nodes = self._table.stored
            out["stored_node_rows"] = int(np.count_nonzero(nodes.row_of >= 0)) if nodes.row_of is not None \
                else self.pda.n_nodes - 1
            out["uncertain_tokens_max_per_node"] = int(np.diff(nodes.unc_indptr).max(initial=0))
        if self._table is not None and self._table.configs is not None:
            out["stored_configurations"] = len(self._table.configs)
            out["stored_configuration_masks"] = len(self._table.configs.row_complement)
        return out


#: Nodes whose rows an artifact precomputes, the first ones in reading order: each costs a
#: walk of the whole vocabulary, and a large schema has thousands of nodes. The
#: others are served by the stack-DFA walk or bound when first needed, with the same masks.
MAX_STORED_NODES = 1024


def eager_rows(pda: PDATable, trie, depth: int, limits: Limits = DEFAULT_LIMITS,
               deadline: Deadline | None = None) -> NodeTokens:
    """The rows of the first :data:`MAX_STORED_NODES` nodes in reading order (all of a
    smaller table), from one expansion of their regions. The chain nodes of counted items
    (a string's ``maxLength``: one node per character) are left out: the stack DFA prices
    their tokens by count, while a row of each would cost a vocabulary walk per character
    (a ``maxLength`` of 1,000 took 2.9 s of a 3.1 s compile, and all of the stored rows)."""
    from gramc.runtime.pda_counted import CountedItems

    order = reading_order(pda)
    chains = CountedItems(pda, trie.max_len).chain_nodes()
    if len(chains):
        order = order[~np.isin(order, chains)]
    whole = len(order) == pda.n_nodes - 1 <= MAX_STORED_NODES
    nodes = np.arange(1, pda.n_nodes) if whole else np.sort(order[:MAX_STORED_NODES])
    try:
        x = expand(pda, depth, deadline=deadline, nodes=None if whole else nodes, reach=trie.max_len)
    except LimitExceededError as err:
        if err.limit != "max_expanded_states":
            raise
        # Regions too large together even at the node's own rule: store no rows (the runtime
        # binds each node on first use, down to no row at all, with the same masks).
        whole, nodes, x = False, nodes[:0], None
    if whole:
        return bind_nodes(pda, trie, nodes, depth, x, limits, deadline)
    row_of = np.full(pda.n_nodes - 1, -1, dtype=np.int32)
    counts = np.zeros(pda.n_nodes - 1, dtype=np.int64)
    accepted: np.ndarray | WordRows
    if x is None:
        accepted, unc_ids = np.zeros((0, n_words(trie.vocab_size)), dtype=np.uint32), np.zeros(0, dtype=np.int32)
    else:
        bound = bind_nodes(pda, trie, nodes, depth, x, limits, deadline)
        row_of[nodes - 1] = np.arange(len(nodes))
        counts[nodes - 1] = np.diff(bound.unc_indptr)
        accepted, unc_ids = bound.accepted, bound.unc_ids
    return NodeTokens(accepted=accepted, unc_indptr=np.concatenate([[0], np.cumsum(counts)]),
                      unc_ids=unc_ids, row_of=row_of)


def pda_from_parts(pda: PDATable, source: dict, depth: int, info: VocabInfo | None,
                   nodes: NodeTokens | None, vocab: Vocab | None,
                   configs: StoredConfigs | None = None) -> PDAArtifact:
    """An artifact from checked container parts (see :mod:`gramc.runtime.pda_reader`); a
    bound one without ``vocab`` awaits it (:meth:`~gramc.runtime.artifact.Artifact.bind`)."""
    if info is None:
        return PDAArtifact(pda, source, None, None, depth)
    if vocab is not None:
        return PDAArtifact(pda, source, info, PDATokenTable(pda, vocab, nodes, depth, configs=configs), depth)
    art = PDAArtifact(pda, source, info, None, depth)

    def attach(vocab: Vocab, limits: RuntimeLimits) -> None:
        art._table = PDATokenTable(pda, vocab, nodes, depth, limits, configs)

    art._await_vocab(attach)
    return art
