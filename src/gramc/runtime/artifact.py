"""Compiled artifacts: what ``gramc.compile`` returns and ``gramc.load`` reads back.

An :class:`Artifact` is a DFA plus, when bound to a vocabulary, its per-state token table.
On disk it is a ``.gmask`` container (see docs/format/gmask-v1.md, "Artifact sections");
every array read from an untrusted file is checked here (shapes, ranges, orderings) before
any of it is used, so a bad index can never reach a matcher or a kernel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramc.automata.bind import bind_states
from gramc.automata.tables import DFATable
from gramc.automata.trie import trie_for
from gramc.errors import ArtifactFormatError, VocabularyError
from gramc.formats import container
from gramc.limits import DEFAULT_RUNTIME_LIMITS, RuntimeLimits
from gramc.runtime.token_table import TokenTable
from gramc.vocab import Vocab, load_vocab

#: Version of the artifact layout inside the container (the sections and their meaning).
ARTIFACT_VERSION = 1


@dataclass(frozen=True)
class VocabInfo:
    """What an artifact records of the vocabulary it was bound to."""

    name: str
    fingerprint: str
    size: int
    eos_ids: tuple[int, ...]

    @classmethod
    def of(cls, vocab: Vocab) -> "VocabInfo":
        return cls(vocab.name, vocab.fingerprint, vocab.size, tuple(vocab.eos_ids))

    def to_meta(self) -> dict[str, Any]:
        return {"name": self.name, "fingerprint": self.fingerprint, "size": self.size,
                "eos_ids": list(self.eos_ids)}


class ArtifactBase:
    """What every artifact kind shares: metadata, vocabulary info, serialisation."""

    kind: str
    meta: dict[str, Any]
    vocab: VocabInfo | None
    _table: Any

    # ------------------------------------------------------------ binding and matching

    def _unbound_copy_args(self) -> tuple:
        """The positional arguments of ``bound()`` that describe the automaton."""
        raise NotImplementedError

    def _bind_options(self) -> dict:
        """Keyword arguments of ``bound()`` that must survive re-binding."""
        return {}

    def _matcher_class(self) -> type:
        raise NotImplementedError

    def bind(self, vocab: "Vocab | str", *, lazy: bool = False, runtime_limits: RuntimeLimits | None = None):
        """This artifact bound to ``vocab`` (a bound artifact must match its fingerprint, and
        is returned as it is, its caches bounded by ``runtime_limits`` when given)."""
        vocab = load_vocab(vocab)
        if self.vocab is not None:
            check_vocab(self.vocab, vocab)
            if runtime_limits is not None:
                self._table.set_limits(runtime_limits)
            return self
        return type(self).bound(*self._unbound_copy_args(), vocab, lazy=lazy,
                                runtime_limits=runtime_limits or DEFAULT_RUNTIME_LIMITS, **self._bind_options())

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """What the token table caches now: per cache, its entries, its bound (see
        :class:`~gramc.limits.RuntimeLimits`) and its evictions (or fresh starts) so far."""
        return self.token_table.cache_stats()

    @property
    def is_bound(self) -> bool:
        return self._table is not None

    @property
    def is_lazy(self) -> bool:
        return self._table is not None and self._table.is_lazy

    @property
    def token_table(self):
        """The per-state (DFA) or per-node (PDA) token tables; raises when unbound."""
        if self._table is None:
            raise VocabularyError(
                "this artifact is not bound to a vocabulary: call artifact.bind(vocab) "
                "or gramc.load(path, vocab=...)"
            )
        return self._table

    def matcher(self, max_rollback: int = 16):
        """A fresh matcher (see :mod:`gramc.runtime.matcher`) at the start of the grammar."""
        self.token_table  # raises for an unbound artifact
        return self._matcher_class()(self, max_rollback=max_rollback)

    def to_arrays(self) -> tuple[dict, dict[str, np.ndarray]]:
        raise NotImplementedError

    def _header(self, automaton: dict) -> dict:
        return {
            "artifact_version": ARTIFACT_VERSION,
            "kind": self.kind,
            "source": self.meta,
            self.kind: automaton,
            "vocab": self.vocab.to_meta() if self.vocab else None,
        }

    def to_bytes(self) -> bytes:
        """The ``.gmask`` bytes (deterministic)."""
        meta, arrays = self.to_arrays()
        return container.pack(meta, arrays)

    def save(self, path: str | os.PathLike) -> None:
        """Write the ``.gmask`` file atomically."""
        meta, arrays = self.to_arrays()
        container.write_file(path, meta, arrays)

    def _describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source_format": self.meta.get("format"),
            "source_sha256": self.meta.get("sha256"),
            "options": self.meta.get("options"),
            "compiler_version": self.meta.get("compiler_version"),
            "vocab": self.vocab.to_meta() if self.vocab else None,
        }


@dataclass(eq=False)
class Artifact(ArtifactBase):
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

    kind = "dfa"

    # ------------------------------------------------------------ binding

    @classmethod
    def bound(cls, dfa: DFATable, meta: dict, vocab: Vocab, *, lazy: bool = False,
              runtime_limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS) -> "Artifact":
        """Bind ``dfa`` to ``vocab``: every state now (eager) or on first use (lazy); the
        table's caches are bounded by ``runtime_limits``."""
        trie = trie_for(vocab)
        info = VocabInfo.of(vocab)
        if lazy:
            table = TokenTable.lazy(dfa, trie, info.eos_ids, runtime_limits)
        else:
            rows = bind_states(dfa, trie, np.arange(dfa.n_states))
            table = TokenTable.eager(dfa, rows, vocab.size, info.eos_ids, runtime_limits)
        return cls(dfa, meta, info, table)

    def _unbound_copy_args(self) -> tuple:
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
            rows = self._table.all_rows()
            arrays.update({
                "tokens.indptr": rows.indptr.astype(np.int64),
                "tokens.ids": rows.token_ids.astype(np.int32),
                "tokens.next": rows.next_state.astype(np.int32),
                "tokens.forced": rows.forced_token.astype(np.int32),
            })
        return meta, arrays

    def describe(self) -> dict[str, Any]:
        """A summary for ``gramc inspect``."""
        out = self._describe()
        out.update(states=self.dfa.n_states, byte_classes=self.dfa.n_byte_classes,
                   special_token_columns=len(self.dfa.token_ids))
        if self._table is not None and not self._table.is_lazy:
            rows = self._table.all_rows()
            out["token_transitions"] = int(rows.indptr[-1])
        return out


def check_vocab(info: VocabInfo, vocab: Vocab) -> None:
    """Raise VocabularyError unless ``vocab`` is the vocabulary the artifact was bound to."""
    if vocab.fingerprint != info.fingerprint:
        raise VocabularyError(
            f"vocabulary mismatch: the artifact was bound to {info.name!r} "
            f"({info.size} tokens, fingerprint {info.fingerprint[:16]}…), "
            f"the given vocabulary is {vocab.name!r} ({vocab.size} tokens, "
            f"fingerprint {vocab.fingerprint[:16]}…)"
        )


# ---------------------------------------------------------------- reading


def from_bytes(data: bytes, vocab: Vocab | str | None = None, *, verify: bool = False,
               runtime_limits: RuntimeLimits | None = None) -> Artifact:
    """Read an artifact from ``.gmask`` bytes (see :func:`load`)."""
    meta, arrays = container.unpack(data)
    return _from_container(meta, arrays, vocab, verify, runtime_limits)


def load(path: str | os.PathLike, vocab: Vocab | str | None = None, *, verify: bool = False,
         runtime_limits: RuntimeLimits | None = None) -> Artifact:
    """Load a ``.gmask`` artifact.

    Args:
        path: the file.
        vocab: the decoder's vocabulary. For a bound artifact it is checked against the
            recorded fingerprint (VocabularyError on mismatch); an unbound artifact is bound
            to it here. Optional for bound artifacts.
        verify: re-bind against ``vocab`` and compare with the stored token tables, for
            artifacts from untrusted sources (structural checks always run).
        runtime_limits: bounds of what the artifact caches while it serves masks (see
            :class:`~gramc.limits.RuntimeLimits`; the defaults when None).

    Raises:
        ArtifactFormatError: the file is corrupt, truncated, hostile or of another version.
        VocabularyError: ``vocab`` does not match.
    """
    meta, arrays = container.read_file(path)
    return _from_container(meta, arrays, vocab, verify, runtime_limits)


def _from_container(meta: dict, arrays: dict, vocab, verify: bool, runtime_limits: RuntimeLimits | None):
    from gramc.runtime.validate import read_artifact

    art = read_artifact(meta, arrays)
    vocab_obj = load_vocab(vocab) if vocab is not None else None
    if art.vocab is None:
        return art.bind(vocab_obj, runtime_limits=runtime_limits) if vocab_obj is not None else art
    if runtime_limits is not None:
        art._table.set_limits(runtime_limits)
    if vocab_obj is not None:
        check_vocab(art.vocab, vocab_obj)
    if verify:
        if vocab_obj is None:
            raise VocabularyError("verify=True needs the vocabulary the artifact was bound to")
        fresh = type(art).bound(*art._unbound_copy_args(), vocab_obj, **art._bind_options())
        if fresh.to_bytes() != art.to_bytes():
            raise ArtifactFormatError(
                "the token table does not match the vocabulary: the file was altered "
                "or written by an incompatible compiler"
            )
    return art


__all__ = ["Artifact", "ArtifactBase", "VocabInfo", "load", "from_bytes", "check_vocab", "ARTIFACT_VERSION"]
