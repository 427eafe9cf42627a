"""gramc: a grammar compiler for constrained decoding.

``gramc.compile(source, vocab=...)`` builds an artifact in memory; ``gramc.load(path)``
reads a ``.gmask`` file; ``artifact.matcher()`` gives the per-sequence matcher whose
``mask()`` says which token ids may come next. Importing gramc loads only the runtime:
the compiler (and lark, jsonschema) are imported on the first ``gramc.compile`` call.
"""

__version__ = "0.1.0"

from gramc import grammar
from gramc.errors import (
    ArtifactFormatError,
    ArtifactVersionError,
    BackendUnavailableError,
    GramcError,
    GrammarSyntaxError,
    LimitExceededError,
    SchemaError,
    UnsupportedFeatureError,
    VocabularyError,
)
from gramc.limits import RuntimeLimits
from gramc.runtime import Artifact, Matcher, from_bytes, load
from gramc.vocab import Vocab, load_vocab


def compile(source, format=None, vocab=None, **kwargs) -> Artifact:
    """Compile ``source`` (text, a JSON Schema dict or pydantic model, or a
    :mod:`gramc.grammar` part) to an :class:`Artifact` (see :func:`gramc.api.compile`)."""
    from gramc.api import compile as _compile

    return _compile(source, format, vocab, **kwargs)


def generate(grammar, logits_fn, **kwargs):
    """Constrained generation over any ``logits_fn`` (see :func:`gramc.generation.generate`)."""
    from gramc.generation import generate as _generate

    return _generate(grammar, logits_fn, **kwargs)


__all__ = [
    "compile", "generate", "grammar", "load", "from_bytes", "Artifact", "Matcher", "Vocab", "load_vocab", "RuntimeLimits",
    "GramcError", "GrammarSyntaxError", "UnsupportedFeatureError", "SchemaError",
    "LimitExceededError", "VocabularyError", "ArtifactFormatError", "ArtifactVersionError",
    "BackendUnavailableError",
]
