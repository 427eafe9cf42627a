"""SGLang: gramc as a grammar backend (``python -m sglang.launch_server ... --grammar-backend gramc``).

SGLang 0.5 keeps a registry of grammar backends (``register_grammar_backend(name, init)``,
consulted before its built-in ones) and runs ``sglang.srt.plugins`` entry points in each of
its processes. gramc declares one (``gramc_grammar_backend``, in gramc's pyproject.toml)
whose :func:`register` adds ``"gramc"`` to the registry and to the ``--grammar-backend``
choices. Every other backend is untouched.

SGLang's request keys and what gramc compiles (:mod:`gramc.integrations.engine_grammars`):
``("json", schema)`` (``"$$ANY$$"``: any JSON value), ``("regex", pattern)``,
``("ebnf", grammar)`` (Lark or EBNF, told apart as for vLLM) and
``("structural_tag", document)``. A constraint gramc cannot compile is an
``InvalidGrammarObject`` carrying gramc's message (SGLang aborts that request). Stop tokens
are the model's EOS ids SGLang hands the backend. Bitmasks are int32 rows of
``ceil(vocab / 32)`` words, applied with one ``masked_fill`` on any device. Jump-forward is
not offered (``try_jump_forward`` returns None).

``GramcSGLangBackend`` / ``GramcSGLangGrammar`` are made from SGLang's base classes when first
looked up, so importing this module needs no SGLang.
"""

from __future__ import annotations

import logging
from typing import Any

from gramc.bitmask import n_words
from gramc.errors import GramcError
from gramc.integrations.engine_grammars import EngineGrammars, GrammarState, request_source

__all__ = ["BACKEND_NAME", "MAX_ROLLBACK", "register", "GramcSGLangBackend",  # noqa: F822 (made by __getattr__)
           "GramcSGLangGrammar"]  # noqa: F822

#: The name users pass as ``--grammar-backend``.
BACKEND_NAME = "gramc"
#: Tokens a request can roll back (speculative verification rolls back one at a time).
MAX_ROLLBACK = 200
#: SGLang's key for "any JSON value", and what gramc compiles for it.
ANY_JSON, ANY_JSON_SCHEMA = "$$ANY$$", "{}"

logger = logging.getLogger(__name__)
_classes: dict[str, type] = {}


def _build() -> None:
    """Make the grammar and backend classes from SGLang's base classes."""
    import torch
    from sglang.srt.constrained.base_grammar_backend import (
        BaseGrammarBackend,
        BaseGrammarObject,
        InvalidGrammarObject,
    )

    class GramcSGLangGrammar(BaseGrammarObject):
        """One request's gramc grammar, driven by SGLang's scheduler and sampler."""

        def __init__(self, grammars: EngineGrammars, artifact: Any, stop_ids: tuple[int, ...]):
            super().__init__()
            self._grammars, self._artifact, self._stop_ids = grammars, artifact, stop_ids
            self.state: GrammarState = grammars.state(artifact, stop_ids)

        def accept_token(self, token: int) -> None:
            if not self.state.accept([int(token)]):
                raise ValueError(f"gramc: the grammar refused token {token}")

        def rollback(self, k: int) -> None:
            self.state.rollback(k)

        def is_terminated(self) -> bool:
            return self.state.terminated

        def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
            return torch.full((batch_size, n_words(vocab_size)), -1, dtype=torch.int32)

        def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
            self.state.fill(vocab_mask[idx].numpy())

        @staticmethod
        def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
            return vocab_mask.to(device, non_blocking=True)

        @staticmethod
        def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
            shifts = torch.arange(32, device=vocab_mask.device, dtype=torch.int32)
            allowed = ((vocab_mask.unsqueeze(-1) >> shifts) & 1).bool().flatten(-2)
            width = logits.shape[-1]
            if allowed.shape[-1] < width:  # ids past the mask are never allowed
                allowed = torch.nn.functional.pad(allowed, (0, width - allowed.shape[-1]))
            logits.masked_fill_(~allowed[..., :width], float("-inf"))

        def copy(self) -> GramcSGLangGrammar:
            return GramcSGLangGrammar(self._grammars, self._artifact, self._stop_ids)

        def try_jump_forward(self, tokenizer: Any) -> None:
            return None

    class GramcSGLangBackend(BaseGrammarBackend):
        """gramc as SGLang's grammar backend (made by :func:`register`'s factory)."""

        def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None,
                     compact_json: bool = False):
            super().__init__()
            self.grammars = EngineGrammars(tokenizer, compact_json=compact_json, max_rollback=MAX_ROLLBACK)
            self.vocab_size = vocab_size
            self.stop_ids = tuple(sorted(eos_token_ids)) if eos_token_ids else self.grammars.default_stop_ids

        def _dispatch(self, kind: str, spec: str) -> Any:
            try:
                artifact = self.grammars.artifact(*request_source(kind, spec))
            except (GramcError, ValueError) as e:  # gramc's syntax and schema errors, bad JSON
                logger.error("gramc: cannot compile the %s constraint: %s", kind.lower(), e)
                return InvalidGrammarObject(str(e))
            return GramcSGLangGrammar(self.grammars, artifact, self.stop_ids)

        def dispatch_json(self, key_string: str) -> Any:
            return self._dispatch("JSON", ANY_JSON_SCHEMA if key_string == ANY_JSON else key_string)

        def dispatch_regex(self, key_string: str) -> Any:
            return self._dispatch("REGEX", key_string)

        def dispatch_ebnf(self, key_string: str) -> Any:
            return self._dispatch("GRAMMAR", key_string)

        def dispatch_structural_tag(self, key_string: str) -> Any:
            return self._dispatch("STRUCTURAL_TAG", key_string)

        def reset(self) -> None:
            super().reset()
            self.grammars.clear()

    for cls in (GramcSGLangGrammar, GramcSGLangBackend):
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
        _classes[cls.__name__] = cls


def __getattr__(name: str) -> Any:
    if name in ("GramcSGLangBackend", "GramcSGLangGrammar"):
        if not _classes:
            _build()
        return _classes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> Any:
    """The factory SGLang's registry calls: ``(server_args, tokenizer, vocab_size, eos_token_ids)``."""
    compact = bool(getattr(server_args, "constrained_json_disable_any_whitespace", False))
    return __getattr__("GramcSGLangBackend")(tokenizer, vocab_size, eos_token_ids, compact_json=compact)


def register() -> None:
    """The ``sglang.srt.plugins`` entry point: ``"gramc"`` in SGLang's grammar-backend
    registry and ``--grammar-backend`` choices. Idempotent."""
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    register_grammar_backend(BACKEND_NAME, make_backend)
    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        GRAMMAR_BACKEND_CHOICES.append(BACKEND_NAME)
