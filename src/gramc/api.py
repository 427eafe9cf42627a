"""``gramc.compile``: source text to a ready artifact, in memory, with an optional cache.

This is the glue between the compiler and the runtime; the runtime itself never imports
the compiler.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Protocol

from gramc import __version__
from gramc.compiler.pipeline import CompileOptions, compile_lowered, compile_source
from gramc.grammar import Part, schema_text
from gramc.limits import DEFAULT_LIMITS, DEFAULT_RUNTIME_LIMITS, Deadline, Limits, RuntimeLimits
from gramc.runtime.artifact import ARTIFACT_VERSION, Artifact
from gramc.runtime.counted import CountedArtifact
from gramc.runtime.dfa_artifact import DFAArtifact
from gramc.runtime.pda_artifact import PDAArtifact
from gramc.runtime.reader import SUPPORTED_ARTIFACT_VERSIONS, load
from gramc.vocab import Vocab, load_vocab


class _ArtifactKind(Protocol):
    """An artifact class as :func:`compile` uses it; ``automaton`` is of the type that
    ``Compiled.kind`` names (each kind's class narrows it)."""

    def __call__(self, automaton: Any, meta: dict, /) -> Artifact: ...

    def bound(self, automaton: Any, meta: dict, vocab: Vocab, /, *, lazy: bool, limits: Limits,
              deadline: Deadline | None, runtime_limits: RuntimeLimits) -> Artifact: ...


def compile(
    source: str | dict | Part | Any,
    format: str | None = None,
    vocab: Vocab | str | None = None,
    *,
    lazy: bool = False,
    bind: bool = True,
    cache_dir: str | os.PathLike | None = None,
    options: CompileOptions | None = None,
    limits: Limits = DEFAULT_LIMITS,
    runtime_limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS,
    source_name: str = "<input>",
    progress: Callable[[str], None] | None = None,
) -> Artifact:
    """Compile ``source`` into an artifact bound to ``vocab`` (unbound when None).

    Args:
        source: the source text; a JSON Schema as a ``dict`` or a pydantic model (anything
            with ``model_json_schema()``), compiled from its canonical JSON text (compact,
            key order kept); or a :mod:`gramc.grammar` part.
        format: the language of a text source (default ``"regex"``). A dict or a model is
            ``"json_schema"`` and a part ``"grammar"``: another format is a TypeError.
        vocab: a :class:`~gramc.vocab.Vocab`, a bundled name such as ``"gpt2"``, a tokenizer
            file path, or None for an unbound artifact (bind later with ``.bind(vocab)``).
        lazy: bind each automaton state on first use instead of all up front: compiles in
            milliseconds, gives identical masks.
        bind: False gives the unbound artifact even with ``vocab``, which then only resolves
            special-token names (``<|eot_id|>``); what ``gramc compile --lazy`` writes.
        cache_dir: a directory of content-addressed ``.gmask`` files; an eager compile whose
            key (source, format, options, vocabulary fingerprint, compiler version) is there
            is loaded instead of rebuilt, and a fresh one is stored.
        options: language-changing options (see :class:`CompileOptions`).
        limits: resource limits (see :class:`gramc.limits.Limits`): they bound every
            frontend, the automaton's construction and, for an eager compile, the binding
            (``max_compile_seconds`` covers all of it; ``max_memory`` is checked before the
            large arrays are allocated).
        runtime_limits: bounds of what the artifact caches while it serves masks (see
            :class:`gramc.limits.RuntimeLimits`).
        source_name: how error messages name the source (e.g. its file name).
        progress: called with the name of each stage as it starts (the CLI shows them).

    >>> import gramc
    >>> m = gramc.compile(r"[0-9]{3}", vocab=gramc.Vocab.from_list([b"1", b"23", b"x"])).matcher()
    >>> m.allowed_tokens().tolist()
    [0, 1]
    """
    source, format, part = _source(source, format)
    if not isinstance(limits, Limits):
        raise TypeError(f"limits is a gramc.limits.Limits, got {type(limits).__name__}")
    deadline = Deadline(limits.max_compile_seconds)
    options = options or CompileOptions()
    vocab_obj = load_vocab(vocab) if vocab is not None else None
    cached = _cache_path(cache_dir, source, format, options, vocab_obj) if cache_dir and bind and not lazy else None
    if cached is not None and cached.exists():
        return load(cached, vocab_obj, runtime_limits=runtime_limits)
    report = progress or (lambda stage: None)
    special = vocab_obj.special_names if vocab_obj is not None else None
    if part is None:
        compiled = compile_source(source, format, options, limits, source_name, report, special, deadline)
    else:
        report("parsing")
        lowered = part.lower(options.to_meta(), source_name, limits)
        compiled = compile_lowered(lowered, source, format, options, limits, report, special, deadline)
    kinds: dict[str, _ArtifactKind] = {"dfa": DFAArtifact, "counted": CountedArtifact, "pda": PDAArtifact}
    cls = kinds[compiled.kind]
    if vocab_obj is None or not bind:
        artifact = cls(compiled.automaton, compiled.meta)
    else:
        stage = f"binding the {compiled.kind.upper()} to {vocab_obj.size} tokens"
        report(stage)
        artifact = cls.bound(compiled.automaton, compiled.meta, vocab_obj, lazy=lazy, limits=limits,
                             deadline=deadline.during(stage), runtime_limits=runtime_limits)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        artifact.save(cached)
    return artifact


def _source(source: Any, format: str | None) -> tuple[str, str, Part | None]:
    """The source text, its format, and the builder part it comes from (None for text)."""
    if isinstance(source, str):
        return source, format or "regex", None
    if isinstance(source, Part):
        if format not in (None, "grammar"):
            raise TypeError(f"format={format!r} does not apply to a gramc.grammar part: leave format out")
        return source.source(), "grammar", source
    if isinstance(source, dict) or (callable(getattr(source, "model_json_schema", None))
                                    and not isinstance(source, (bytes, bytearray))):
        if format not in (None, "json_schema"):
            raise TypeError(f"format={format!r} does not apply to a JSON Schema given as a "
                            f"{'dict' if isinstance(source, dict) else 'pydantic model'}: leave format out")
        return schema_text(source), "json_schema", None
    raise TypeError(f"source is text (str), a JSON Schema (a dict or a pydantic model) or a gramc.grammar "
                    f"part, got {type(source).__name__}" +
                    (": decode it first" if isinstance(source, (bytes, bytearray)) else ""))


def cache_key(source: str, format: str, options: CompileOptions, vocab: Vocab | None) -> str:
    """The content address of a compile: everything that can change the artifact's bytes."""
    key = {
        "source": hashlib.sha256(source.encode("utf-8")).hexdigest(),
        "format": format,
        "options": options.to_meta(),
        "vocab": vocab.fingerprint if vocab is not None else None,
        "compiler": __version__,
        "artifact": ARTIFACT_VERSION,
        # the newest layout: a cache filled by a writer of older layouts is not reused
        "layouts": max(SUPPORTED_ARTIFACT_VERSIONS),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _cache_path(cache_dir, source, format, options, vocab) -> Path:
    key = cache_key(source, format, options, vocab)
    return Path(cache_dir) / key[:2] / f"{key}.gmask"
