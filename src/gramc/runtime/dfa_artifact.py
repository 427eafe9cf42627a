"""DFA artifacts: compiled regular grammars, bound to a vocabulary or not.

A bound DFA artifact carries, per state, the allowed tokens and their next states (CSR rows,
see :class:`~gramc.runtime.token_table.TokenTable`); packed mask rows are derived from them
when the table is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramc.automata.bind import bind_states
from gramc.automata.tables import DFATable
from gramc.automata.trie import trie_for
from gramc.bitmask import n_words
from gramc.errors import VocabularyError
from gramc.limits import DEFAULT_LIMITS, DEFAULT_RUNTIME_LIMITS, Deadline, Limits, RuntimeLimits
from gramc.runtime.artifact import Artifact, VocabInfo
from gramc.runtime.token_table import TokenTable
from gramc.vocab import Vocab


@dataclass(eq=False)
class DFAArtifact(Artifact):
    """A compiled regular grammar (a DFA), bound to a vocabulary or not.

    Attributes:
        dfa: the automaton (see :class:`~gramc.automata.tables.DFATable`).
        meta: source format, source hash, options, IR text and compiler version.
        vocab: what the artifact is bound to, or None for an unbound artifact.
    """

    dfa: DFATable
    meta: dict[str, Any]
    vocab: VocabInfo | None = None
    _table: TokenTable | None = field(default=None, repr=False)
    _tokens: Vocab | None = field(default=None, repr=False)  # kept where a uniqueItems plan needs them

    kind = "dfa"

    # ------------------------------------------------------------ binding

    @classmethod
    def bound(cls, dfa: DFATable, meta: dict, vocab: Vocab, *, lazy: bool = False,
              limits: Limits = DEFAULT_LIMITS, deadline: Deadline | None = None,
              runtime_limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS) -> "DFAArtifact":
        """Bind ``dfa`` to ``vocab``: every state now (eager) or on first use (lazy).

        An eager binding checks ``limits.max_memory`` before its large arrays (the packed
        masks from their shape, the token rows as they are walked) and ``deadline`` between
        batches of states; the table's caches are bounded by ``runtime_limits``."""
        trie = trie_for(vocab)
        info = VocabInfo.of(vocab)
        if lazy:
            table = TokenTable.lazy(dfa, trie, info.eos_ids, runtime_limits)
        else:
            limits.check_memory(dfa.n_states * n_words(vocab.size) * 4,
                                f"the packed token masks of {dfa.n_states:,} DFA states")
            rows = bind_states(dfa, trie, np.arange(dfa.n_states), limits=limits, deadline=deadline)
            table = TokenTable.eager(dfa, rows, vocab.size, info.eos_ids, runtime_limits)
        return cls(dfa, meta, info, table, vocab if "unique" in meta else None)

    def _unbound_copy_args(self) -> tuple[Any, dict]:
        return (self.dfa, self.meta)

    def _matcher_class(self):
        from gramc.runtime.matcher import DFAMatcher

        return DFAMatcher

    # ------------------------------------------------------------ serialisation

    def to_arrays(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The container metadata and arrays of this artifact (lazy tables are completed)."""
        meta = self._header({"start": int(self.dfa.start)})
        arrays = {f"dfa.{k}": v for k, v in self.dfa.arrays().items()}
        if self._table is not None:
            arrays.update(self._table.all_rows().stored())
        return meta, arrays

    def token_vocab(self) -> Vocab:
        """The token bytes a ``uniqueItems`` plan reads (stored with such an artifact only)."""
        if self._tokens is None:
            _ = self.token_table  # raises for an unbound artifact, or one that awaits its vocabulary
            raise VocabularyError("this DFA artifact keeps no token bytes (it has no uniqueItems plan)")
        return self._tokens

    def describe(self) -> dict[str, Any]:
        """A summary for ``gramc inspect``."""
        out = self._describe()
        out.update(states=self.dfa.n_states, byte_classes=self.dfa.n_byte_classes,
                   special_token_columns=len(self.dfa.token_ids))
        if self._table is not None and not self._table.is_lazy:
            rows = self._table.all_rows()
            out["token_transitions"] = int(rows.indptr[-1])
        return out


__all__ = ["DFAArtifact"]
