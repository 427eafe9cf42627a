"""The artifact interface: what ``gramc.compile`` returns and ``gramc.load`` reads back.

:class:`Artifact` is the abstract base of every artifact kind (a DFA in
:mod:`gramc.runtime.dfa_artifact`, a PDA in :mod:`gramc.runtime.pda_artifact`): binding,
matchers, metadata and serialisation to a ``.gmask`` container (see docs/format/gmask-v1.md,
"Artifact sections"). Reading a file back, with every array checked, is
:mod:`gramc.runtime.reader`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from gramc.errors import VocabularyError
from gramc.formats import container
from gramc.limits import DEFAULT_LIMITS, DEFAULT_RUNTIME_LIMITS, Deadline, Limits, RuntimeLimits
from gramc.vocab import Vocab, load_vocab

#: Version of the artifact layout inside the container (the sections and their meaning).
ARTIFACT_VERSION = 1
#: The layout of an artifact of any kind that carries a ``uniqueItems`` plan
#: (``source.unique``, enforced by the matcher: :mod:`gramc.runtime.unique`); a reader that
#: does not know it refuses the file rather than serve masks that allow duplicates.
UNIQUE_ARTIFACT_VERSION = 4
#: The layout of a bound artifact whose masks read token bytes (``pda``, ``counted``, and
#: ``dfa`` with a ``uniqueItems`` plan): the vocabulary is bound by fingerprint only, its bytes
#: are not stored (a decoder holding hundreds of artifacts of one model reads them once), and
#: a ``pda`` artifact stores its node rows sparse (docs/format/gmask-v1.md, 11.8).
FINGERPRINT_ARTIFACT_VERSION = 5
#: Layout 5 plus a plan that also checks the members of some objects (a node's ``o``:
#: declared names at most once, required ones before ``}``; docs/format/gmask-v1.md, 11.9),
#: bound or not; older readers refuse it rather than serve masks that allow a repeated or
#: missing member.
MEMBERS_ARTIFACT_VERSION = 6
#: Layout 7: a plan that routes member names by pattern (docs/format/gmask-v1.md, 11.10).
PATTERNS_ARTIFACT_VERSION = 7
#: Layout 8: every ``pda`` artifact, bound or not, with or without a plan: its calls are
#: sparse arrays instead of a column per rule (docs/format/gmask-v1.md, 11.11).
SPARSE_CALLS_ARTIFACT_VERSION = 8
#: Layout 9: every ``pda`` artifact; a bound one also stores the masks of the configurations
#: a compile-time exploration reaches (docs/format/gmask-v1.md, 11.12).
STORED_CONFIGS_ARTIFACT_VERSION = 9
#: Layout 10: every ``pda`` artifact; a bound one stores its configuration masks as their
#: words instead of their token ids (docs/format/gmask-v1.md, 11.13).
WORD_ROWS_ARTIFACT_VERSION = 10


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


class Artifact(ABC):
    """A compiled grammar, bound to a vocabulary or not: what every artifact kind shares.

    ``gramc.compile`` and ``gramc.load`` return one of its kinds:
    :class:`~gramc.runtime.dfa_artifact.DFAArtifact` (``kind == "dfa"``, a regular grammar)
    or :class:`~gramc.runtime.pda_artifact.PDAArtifact` (``kind == "pda"``, a context-free
    one). Both have this interface; only their automaton attribute differs (``dfa``, ``pda``).

    Attributes:
        kind: the artifact kind, as written in the file.
        meta: source format, source hash, options, IR text and compiler version.
        vocab: what the artifact is bound to, or None for an unbound artifact.
    """

    kind: ClassVar[str]
    #: The layout version of this kind's own sections, before layouts 4 and 5.
    layout: ClassVar[int] = ARTIFACT_VERSION
    #: Do this kind's masks read the vocabulary's token bytes (then a bound one is layout 5)?
    reads_token_bytes: ClassVar[bool] = False
    meta: dict[str, Any]
    vocab: VocabInfo | None
    _table: Any

    # ------------------------------------------------------------ what each kind supplies

    @classmethod
    @abstractmethod
    def bound(cls, automaton: Any, meta: dict, vocab: Vocab, *, lazy: bool = False,
              limits: Limits = DEFAULT_LIMITS, deadline: Deadline | None = None,
              runtime_limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS) -> "Artifact":
        """``automaton`` bound to ``vocab``: every state now (eager) or on first use (lazy),
        within ``limits.max_memory`` and ``deadline``; the table's caches are bounded by
        ``runtime_limits``. A kind may take more keyword options (see ``_bind_options``)."""

    @abstractmethod
    def _unbound_copy_args(self) -> tuple[Any, dict]:
        """The positional arguments of ``bound()`` that describe the automaton."""

    def _bind_options(self) -> dict:
        """Keyword arguments of ``bound()`` that must survive re-binding."""
        return {}

    @abstractmethod
    def _matcher_class(self) -> type:
        """The :class:`~gramc.runtime.matcher.Matcher` subclass of this kind."""

    @abstractmethod
    def to_arrays(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The container metadata and arrays of this artifact (lazy tables are completed)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """A summary for ``gramc inspect``."""

    # ------------------------------------------------------------ binding and matching

    def bind(self, vocab: "Vocab | str", *, lazy: bool = False,
             runtime_limits: RuntimeLimits | None = None) -> "Artifact":
        """This artifact bound to ``vocab`` (a bound artifact must match its fingerprint, and
        is returned as it is, its caches bounded by ``runtime_limits`` when given)."""
        vocab = load_vocab(vocab)
        if self.vocab is not None:
            check_vocab(self.vocab, vocab)
            attach = self.__dict__.pop("_attach", None)
            if attach is not None:
                attach(vocab, runtime_limits or DEFAULT_RUNTIME_LIMITS)
            if runtime_limits is not None:
                self._table.set_limits(runtime_limits)
            return self
        return type(self).bound(*self._unbound_copy_args(), vocab, lazy=lazy,
                                runtime_limits=runtime_limits or DEFAULT_RUNTIME_LIMITS, **self._bind_options())

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """What the token table caches now: per cache, its entries, its bound (see
        :class:`~gramc.limits.RuntimeLimits`) and its evictions (or fresh starts) so far;
        the token-budget caches once a budget was asked for."""
        from gramc.runtime.budget import budget_stats

        return {**self.token_table.cache_stats(), **budget_stats(self.token_table)}

    def _await_vocab(self, attach: Callable[[Vocab, RuntimeLimits], None]) -> None:
        """Leave this loaded artifact waiting for the vocabulary it binds by fingerprint (its
        file does not store the token bytes, and none was given or known): ``attach(vocab,
        runtime_limits)`` completes it in :meth:`bind`; until then it can be described, not
        matched."""
        self.__dict__["_attach"] = attach

    @property
    def awaits_vocab(self) -> bool:
        """Was this artifact loaded without the token bytes its masks read (see :meth:`bind`)?"""
        return "_attach" in self.__dict__

    def _vocab_needed(self) -> VocabularyError:
        assert self.vocab is not None
        return VocabularyError(
            f"this artifact binds the vocabulary {self.vocab.name!r} ({self.vocab.size} tokens, "
            f"fingerprint {self.vocab.fingerprint[:16]}…) by fingerprint and does not store its "
            f"token bytes: pass that vocabulary, gramc.load(path, vocab=...) or artifact.bind(vocab)"
        )

    @property
    def is_bound(self) -> bool:
        return self._table is not None and not self.awaits_vocab

    @property
    def is_lazy(self) -> bool:
        return self._table is not None and self._table.is_lazy

    @property
    def token_table(self):
        """The per-state (DFA) or per-node (PDA) token tables; raises when unbound."""
        if self.awaits_vocab:
            raise self._vocab_needed()
        if self._table is None:
            raise VocabularyError(
                "this artifact is not bound to a vocabulary: call artifact.bind(vocab) "
                "or gramc.load(path, vocab=...)"
            )
        return self._table

    def matcher(self, max_rollback: int = 16):
        """A fresh matcher (see :mod:`gramc.runtime.matcher`) at the start of the grammar
        (one that also enforces ``uniqueItems`` when the artifact has a plan)."""
        _ = self.token_table  # raises for an unbound artifact
        cls = self._matcher_class()
        if self.has_unique:
            from gramc.runtime.unique_matcher import unique_matcher_class

            cls = unique_matcher_class(cls)
        if "captures" in self.meta:  # only these matchers keep the committed text
            from gramc.runtime.captures import capturing_class

            cls = capturing_class(cls)
        return cls(self, max_rollback=max_rollback)

    def _capture_grammar(self):
        """The parser of ``meta["captures"]`` (:mod:`gramc.runtime.captures`), made once."""
        from gramc.runtime.captures import CaptureGrammar

        grammar = self.__dict__.get("_captures_parser")
        if grammar is None:
            grammar = self.__dict__["_captures_parser"] = CaptureGrammar(self.meta["captures"])
        return grammar

    @property
    def has_unique(self) -> bool:
        """Does the matcher enforce a ``uniqueItems`` plan (``meta["unique"]``)?"""
        return "unique" in self.meta

    def token_vocab(self) -> Vocab:
        """The bound vocabulary's token bytes (kinds that keep them)."""
        return self.token_table.vocab

    def unique_check(self) -> Any:
        """The :class:`~gramc.runtime.unique.UniqueCheck` of this artifact's plan (made once)."""
        check = self.__dict__.get("_unique_check")
        if check is None:
            from gramc.runtime.unique import Plan, UniqueCheck, vocab_rows

            check = self.__dict__["_unique_check"] = UniqueCheck(Plan(self.meta["unique"]),
                                                                 vocab_rows(self.token_vocab()))
        return check

    def _layout(self) -> int:
        """The layout version this artifact is written in (docs/format/gmask-v1.md, 11)."""
        if has_patterns(self.meta.get("unique")):
            return PATTERNS_ARTIFACT_VERSION
        if has_members(self.meta.get("unique")):
            return MEMBERS_ARTIFACT_VERSION
        if self.vocab is not None and (self.reads_token_bytes or self.has_unique):
            return FINGERPRINT_ARTIFACT_VERSION
        return UNIQUE_ARTIFACT_VERSION if self.has_unique else self.layout

    def _header(self, automaton: dict) -> dict:
        return {
            "artifact_version": self._layout(),
            "kind": self.kind,
            "source": dict(self.meta),  # a compile's SourceMeta writes its IR text out here
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


def check_vocab(info: VocabInfo, vocab: Vocab) -> None:
    """Raise VocabularyError unless ``vocab`` is the vocabulary the artifact was bound to."""
    if vocab.fingerprint != info.fingerprint:
        raise VocabularyError(
            f"vocabulary mismatch: the artifact was bound to {info.name!r} "
            f"({info.size} tokens, fingerprint {info.fingerprint[:16]}…), "
            f"the given vocabulary is {vocab.name!r} ({vocab.size} tokens, "
            f"fingerprint {vocab.fingerprint[:16]}…)"
        )


def has_members(plan: Any) -> bool:
    """Does this runtime plan (None: none) check the members of some object (layout 6)?"""
    return plan is not None and any("o" in node for node in plan["nodes"])


def has_patterns(plan: Any) -> bool:
    """Does this runtime plan (None: none) route member names by pattern (layout 7)?"""
    return plan is not None and "patterns" in plan


__all__ = ["Artifact", "VocabInfo", "check_vocab", "has_members", "has_patterns", "ARTIFACT_VERSION",
           "UNIQUE_ARTIFACT_VERSION", "FINGERPRINT_ARTIFACT_VERSION", "MEMBERS_ARTIFACT_VERSION",
           "PATTERNS_ARTIFACT_VERSION", "SPARSE_CALLS_ARTIFACT_VERSION", "STORED_CONFIGS_ARTIFACT_VERSION",
           "WORD_ROWS_ARTIFACT_VERSION"]
