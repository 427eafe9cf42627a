"""Reading artifacts: :func:`load` and :func:`from_bytes`, above every artifact kind.

A ``.gmask`` file is read by the container layer (:mod:`gramc.formats.container`: framing,
hash, dtypes), then here: the header (layout version, kind, source, vocabulary) is checked,
and the payload is handed to its kind's reader (:mod:`gramc.runtime.dfa_reader`,
:mod:`gramc.runtime.pda_reader`), which checks every array before any of it is used, so a
bad index can never reach a matcher or a kernel.
"""

from __future__ import annotations

import os
from importlib import import_module

from gramc.errors import ArtifactFormatError, ArtifactVersionError, VocabularyError
from gramc.formats import container
from gramc.formats.limits import DEFAULT_READ_LIMITS, ReadLimits
from gramc.limits import RuntimeLimits
from gramc.runtime.artifact import Artifact, VocabInfo, has_members, has_patterns
from gramc.runtime.validate import get_field, require
from gramc.vocab import Vocab, load_vocab

#: Layout 2 adds the ``counted`` kind (docs/format/gmask-v1.md, 11.6), layout 3 stores a
#: ``pda`` artifact's distinct node rows once (11.5), layout 4 a ``uniqueItems`` plan (11.7),
#: layout 5 binds the vocabulary by fingerprint only (11.8), layout 6 is layout 5 with a plan
#: that checks object members (11.9), layout 7 layout 6 with a plan that routes member names
#: by pattern (11.10), layout 8 is every ``pda`` artifact, its calls sparse (11.11), layout 9
#: layout 8 with a bound one's stored configuration masks (11.12), layout 10 layout 9 with
#: its node rows and those masks stored as their words (11.13); ``dfa`` files without a plan are still written
#: as layout 1.
SUPPORTED_ARTIFACT_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)

#: The payload reader of each artifact kind: a module whose ``read_payload(meta, arrays,
#: source, info, limits, vocab)`` returns the artifact (``vocab``: the decoder's vocabulary,
#: which the artifact may share instead of decoding its stored token bytes). Imported when a file of that kind is read, so
#: ``import gramc`` loads neither kind's runtime.
PAYLOAD_READERS = {"dfa": "gramc.runtime.dfa_reader", "pda": "gramc.runtime.pda_reader",
                   "counted": "gramc.runtime.counted_reader"}


def from_bytes(data: bytes, vocab: Vocab | str | None = None, *, verify: bool = False,
               limits: ReadLimits = DEFAULT_READ_LIMITS, lazy: bool = False,
               runtime_limits: RuntimeLimits | None = None) -> Artifact:
    """Read an artifact from ``.gmask`` bytes (see :func:`load`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"from_bytes takes bytes (a .gmask file's contents), got {type(data).__name__}")
    meta, arrays = container.unpack(data, limits)
    return _from_container(meta, arrays, vocab, verify, limits, lazy, runtime_limits)


def load(path: str | os.PathLike, vocab: Vocab | str | None = None, *, verify: bool = False,
         limits: ReadLimits = DEFAULT_READ_LIMITS, lazy: bool = False,
         runtime_limits: RuntimeLimits | None = None) -> Artifact:
    """Load a ``.gmask`` artifact.

    Args:
        path: the file.
        vocab: the decoder's vocabulary. For a bound artifact it is checked against the
            recorded fingerprint (VocabularyError on mismatch); an unbound artifact is bound
            to it here. Optional for bound artifacts.
        verify: re-bind against ``vocab`` and compare with the stored token tables, for
            artifacts from untrusted sources (structural checks always run).
        limits: what the reader may allocate (:class:`~gramc.formats.limits.ReadLimits`):
            every size the file declares is checked against them before it is used.
        lazy: bind an unbound artifact state by state on first use instead of all now
            (ignored for a bound artifact, whose tables are in the file).
        runtime_limits: bounds of what the artifact caches while it serves masks (see
            :class:`~gramc.limits.RuntimeLimits`; the defaults when None).

    Raises:
        ArtifactFormatError: the file is corrupt, truncated, hostile, over a limit or of
            another version.
        VocabularyError: ``vocab`` does not match.
        TypeError: ``path`` is a file's contents, not a path (see :func:`from_bytes`).
    """
    if isinstance(path, (bytearray, memoryview)) or (isinstance(path, bytes) and b"\0" in path):
        raise TypeError("load() takes the path of a .gmask file; for a file's contents (bytes) use gramc.from_bytes")
    meta, arrays = container.read_file(path, limits)
    return _from_container(meta, arrays, vocab, verify, limits, lazy, runtime_limits)


def _from_container(meta: dict, arrays: dict, vocab, verify: bool, limits: ReadLimits,
                    lazy: bool, runtime_limits: RuntimeLimits | None) -> Artifact:
    vocab_obj = load_vocab(vocab) if vocab is not None else None
    art = read_artifact(meta, arrays, limits, vocab_obj)
    if art.vocab is None:
        return art.bind(vocab_obj, lazy=lazy, runtime_limits=runtime_limits) if vocab_obj is not None else art
    if vocab_obj is not None:  # checks the fingerprint; completes an artifact that awaits it
        art.bind(vocab_obj, runtime_limits=runtime_limits)
    elif runtime_limits is not None and art.is_bound:
        art.token_table.set_limits(runtime_limits)
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


def read_artifact(meta: dict, arrays: dict, limits: ReadLimits = DEFAULT_READ_LIMITS,
                  vocab: Vocab | None = None) -> Artifact:
    """Check a container's contents and decode them into an artifact of its kind (sharing
    ``vocab`` where the artifact stores that vocabulary's token bytes)."""
    version = get_field(meta, "artifact_version", int)
    if version not in SUPPORTED_ARTIFACT_VERSIONS:
        raise ArtifactVersionError((version, 0), f"artifact layout {SUPPORTED_ARTIFACT_VERSIONS}")
    kind = get_field(meta, "kind", str)
    require(kind in PAYLOAD_READERS, f"unknown artifact kind {kind!r} (this gramc reads "
            f"{' and '.join(map(repr, PAYLOAD_READERS))})")
    require(kind != "counted" or version in (2, 4, 5, 6, 7), "the 'counted' kind needs artifact layout 2 (or 4-7)")
    require(kind == "pda" or version not in (3, 8, 9, 10), f"artifact layout {version} has no {kind!r} kind")
    source = get_field(meta, "source", dict)
    if version == 5:
        require(kind != "dfa" or "unique" in source,
                "artifact layout 5 has no 'dfa' kind without a uniqueItems plan (it reads no token bytes)")
    require("unique" not in source or version in (4, 5, 6, 7, 8, 9, 10),
            "an artifact with a runtime plan (source.unique) is layout 4, 5, 6, 7, 8, 9 or 10")
    require(version != 4 or "unique" in source,
            "artifact layout 4 is exactly the layout of an artifact with a uniqueItems plan (source.unique)")
    require(version not in (6, 7) or "unique" in source,
            f"artifact layout {version} is the layout of an artifact with a runtime plan (source.unique)")
    if "unique" in source:
        _check_plan(source["unique"])
        if version < 8:  # layouts 8 to 10 hold any plan
            require(has_patterns(source["unique"]) == (version == 7),
                    "artifact layout 7 is exactly the layout of a plan that routes names by pattern ('patterns')")
            require(version == 7 or has_members(source["unique"]) == (version == 6),
                    "artifact layout 6 is exactly the layout of a plan with a members condition (a node's 'o')")
    info = _read_vocab(meta, limits)
    require(version != 5 or info is not None, "artifact layout 5 is the layout of a bound artifact (metadata.vocab)")
    return import_module(PAYLOAD_READERS[kind]).read_payload(meta, arrays, source, info, limits, vocab)


def _check_plan(raw: object) -> None:
    """The ``uniqueItems`` plan is well formed (every index in range)."""
    from gramc.runtime.unique import Plan

    Plan(raw)  # raises ArtifactFormatError


def _read_vocab(meta: dict, limits: ReadLimits) -> VocabInfo | None:
    """The ``vocab`` header (None for an unbound artifact), checked."""
    v = meta.get("vocab")
    if v is None:
        return None
    require(isinstance(v, dict), "metadata.vocab must be a map or nil")
    size = get_field(v, "size", int, "metadata.vocab")
    eos = get_field(v, "eos_ids", list, "metadata.vocab")
    require(all(isinstance(e, int) and 0 <= e < size for e in eos),
            "metadata.vocab.eos_ids must be token ids below the vocabulary size")
    require(0 < size <= limits.max_vocab_size,
            f"metadata.vocab.size {size} outside [1, max_vocab_size={limits.max_vocab_size}]")
    return VocabInfo(
        name=get_field(v, "name", str, "metadata.vocab"),
        fingerprint=get_field(v, "fingerprint", str, "metadata.vocab"),
        size=size,
        eos_ids=tuple(eos),
    )


__all__ = ["load", "from_bytes", "read_artifact", "SUPPORTED_ARTIFACT_VERSIONS"]
