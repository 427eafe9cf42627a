"""The one error hierarchy of gramc.

Every error gramc raises on bad input is a :class:`GramcError`. Invalid input and
unsupported input are different classes, so callers can tell "you wrote it wrong" from
"gramc cannot do that (yet)". Positions are attributes, not only text in the message.

    GramcError (ValueError)
    ├── GrammarSyntaxError        malformed regex / grammar text (has a Span)
    ├── UnsupportedFeatureError   well-formed but not supported (has a Span)
    ├── SchemaError               bad JSON Schema (has a JSON pointer)
    ├── LimitExceededError        a resource limit was hit (names the limit)
    ├── VocabularyError           bad vocabulary, or artifact/vocabulary mismatch
    ├── ArtifactFormatError       corrupt, truncated or hostile .gmask data
    │   └── ArtifactVersionError  a .gmask from an unsupported format version
    └── BackendUnavailableError   an optional backend (CUDA, an integration, a compile extra) is missing

The CLI maps these classes to exit codes (see :data:`EXIT_CODES`).
"""

from __future__ import annotations

from dataclasses import dataclass


class GramcError(ValueError):
    """Base class of every error gramc raises on bad input."""


@dataclass(frozen=True, slots=True)
class Span:
    """A position in a source text: 0-based character offset, 1-based line and column."""

    offset: int
    line: int
    col: int
    source_name: str = "<input>"

    @classmethod
    def at(cls, text: str, offset: int, source_name: str = "<input>") -> "Span":
        """The span of character ``offset`` in ``text``."""
        offset = max(0, min(offset, len(text)))
        line = text.count("\n", 0, offset) + 1
        col = offset - (text.rfind("\n", 0, offset) + 1) + 1
        return cls(offset, line, col, source_name)

    def __str__(self) -> str:
        return f"{self.source_name}:{self.line}:{self.col}"


class _SourceError(GramcError):
    """An error at a position of a source text."""

    def __init__(self, reason: str, span: Span | None = None):
        self.reason = reason
        self.span = span
        super().__init__(f"{span}: {reason}" if span else reason)

    def render(self, text: str) -> str:
        """The message with the offending source line and a caret under the position."""
        if self.span is None:
            return str(self)
        lines = text.splitlines() or [""]
        line = lines[min(self.span.line, len(lines)) - 1]
        return f"{self}\n  {line}\n  {' ' * (self.span.col - 1)}^"


class GrammarSyntaxError(_SourceError):
    """The source text is malformed (a regex or grammar that does not parse)."""


class UnsupportedFeatureError(_SourceError):
    """The source is well-formed but uses a feature gramc does not support."""

    def __init__(self, feature: str, span: Span | None = None, reason: str | None = None):
        self.feature = feature
        super().__init__(reason or f"unsupported: {feature}", span)


class SchemaError(GramcError):
    """A JSON Schema that is invalid or cannot be compiled; ``pointer`` locates it, and
    ``span`` the source text position where the compile knows it."""

    span: Span | None = None

    def __init__(self, reason: str, pointer: str = ""):
        self.reason = reason
        self.pointer = pointer
        super().__init__(f"{pointer or '#'}: {reason}")


class LimitExceededError(GramcError):
    """A resource limit (see :class:`gramc.limits.Limits`) was exceeded.

    Attributes: ``limit`` (its name), ``value`` (what the source needed, or an estimate),
    ``maximum``, ``where`` (the place: a source position or a compiler phase) and ``span``
    (the source position, when known). The message says all of it and, for the limits of
    :class:`~gramc.limits.Limits`, how to raise the limit.
    """

    #: Names of the limits a caller can raise (the fields of :class:`gramc.limits.Limits`,
    #: which sets this: the error hierarchy imports nothing of gramc).
    raisable: frozenset[str] = frozenset()

    def __init__(self, limit: str, value: int | float, maximum: int | float, where: str = "",
                 span: Span | None = None):
        self.limit = limit
        self.value = value
        self.maximum = maximum
        self.where = where
        self.span = span
        unit = _format_bytes if limit == "max_memory" else str
        msg = f"limit {limit} exceeded: {unit(value)} > {unit(maximum)}"
        if where:
            msg += f" ({where})"
        if span:
            msg = f"{span}: {msg}"
        if limit in self.raisable:
            msg += f"; to allow more, raise it: Limits({limit}=...)"
        super().__init__(msg)


def _format_bytes(n: int | float) -> str:
    """``n`` bytes with a binary unit (``4.0 GiB``)."""
    value, unit = float(n), "bytes"
    for bigger in ("KiB", "MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{int(n):,} bytes" if unit == "bytes" else f"{value:.1f} {unit}"


class VocabularyError(GramcError):
    """A vocabulary that cannot be loaded, or that does not match an artifact."""


class ArtifactFormatError(GramcError):
    """A .gmask file that is corrupt, truncated, hostile or otherwise unreadable."""


class ArtifactVersionError(ArtifactFormatError):
    """A .gmask file written by an unsupported format version."""

    def __init__(self, found: tuple[int, int], supported: str):
        self.found = found
        self.supported = supported
        super().__init__(
            f"unsupported .gmask format version {found[0]}.{found[1]} (this gramc reads {supported})"
        )


class BackendUnavailableError(GramcError, RuntimeError):
    """An optional backend (CUDA, an integration, the packages of the ``compile`` extra) is not
    installed or has no device."""


class GramcWarning(UserWarning):
    """Something in the source that compiles but is probably a mistake (an unused rule, a
    keyword compiled as an over-approximation). Issued with :func:`warnings.warn`."""


#: Exit status of the ``gramc`` CLI for each error class (most specific first).
EXIT_CODES: tuple[tuple[type[GramcError], int], ...] = (
    (GrammarSyntaxError, 3),
    (UnsupportedFeatureError, 3),
    (SchemaError, 3),
    (LimitExceededError, 4),
    (ArtifactFormatError, 5),
    (VocabularyError, 6),
    (BackendUnavailableError, 7),
    (GramcError, 1),
)
