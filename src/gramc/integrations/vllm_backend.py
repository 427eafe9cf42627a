"""vLLM: gramc as a structured-output backend (``--structured-outputs-config '{"backend": "gramc"}'``).

vLLM 0.33's structured outputs run in its scheduler: a ``StructuredOutputBackend`` compiles
each request's constraint (``compile_grammar(kind, spec, stop_token_ids)``) into a
``StructuredOutputGrammar`` that fills one packed bitmask row per step, accepts the sampled
tokens, checks and rolls back speculative ones, and says when the request has terminated.
This module adapts :mod:`gramc.integrations.engine_grammars` (the request kinds as gramc
sources, the artifact cache, :class:`~gramc.integrations.engine_grammars.GrammarState`) to
both:

* :class:`GramcBackendCore` / :class:`GrammarCore`: the vLLM methods without vLLM's bases;
* ``GramcBackend`` / ``GramcGrammar``: the same mixed with vLLM's abstract classes, made when
  first looked up (so ``import gramc.integrations.vllm_backend`` needs no vLLM);
* :func:`register`: the ``vllm.general_plugins`` entry point (declared in gramc's
  pyproject.toml) that makes ``"gramc"`` a backend name vLLM accepts. vLLM 0.33 has no
  registry for structured-output backends: its config types the name as a closed
  ``Literal``, ``SamplingParams`` validates requests per known name (an unknown one falls
  into the ``auto`` path), and ``StructuredOutputManager.grammar_init`` builds the backend
  from a fixed if-chain. ``register`` widens the ``Literal``, validates ``gramc`` requests
  itself, and builds ``GramcBackend`` when a request names it; every other backend is
  untouched.

Request kinds (``StructuredOutputOptions``) and what gramc compiles:

========================  =====================================================================
``JSON``                  the schema, ``format="json_schema"``
``JSON_OBJECT``           ``{"type": "object"}`` as a schema
``REGEX``                 ``format="regex"`` (ECMA-262 semantics, whole match)
``GRAMMAR``               ``format="lark"`` when the text looks like Lark (rules written
                          ``name: ...``, ``%`` directives), else ``format="ebnf"``, which
                          reads XGrammar's GBNF-like EBNF, W3C and ISO EBNF (``grammar_format``)
``CHOICE``                a JSON list of strings: exactly one of them
``STRUCTURAL_TAG``        ``format="structural_tag"`` (both of XGrammar's document forms)
========================  =====================================================================

Stop tokens are the request's (``stop_token_ids``: its EOS and user stop ids; the
tokenizer's EOS when vLLM passes none): the grammar is bound to the tokenizer's vocabulary
without EOS, and a stop token is allowed, and accepted, exactly where the output so far is
complete. Accepting one terminates the request; a rollback undoes that too. Artifacts are
compiled eagerly (vLLM compiles in a thread pool, off the scheduler's
step); set ``GRAMC_VLLM_LAZY=1`` to bind each automaton state on first use instead.
"""

from __future__ import annotations

import logging
from typing import Any

from gramc.bitmask import n_words
from gramc.integrations.engine_grammars import EngineGrammars, GrammarState, request_source
from gramc.limits import DEFAULT_RUNTIME_LIMITS, RuntimeLimits

__all__ = ["BACKEND_NAME", "GramcBackendCore", "GrammarCore", "check_request", "register",
           "GramcBackend", "GramcGrammar"]  # noqa: F822 (the last two: made by __getattr__)

#: The name users put in ``--structured-outputs-config '{"backend": "gramc"}'``.
BACKEND_NAME = "gramc"

logger = logging.getLogger(__name__)


class GramcBackendCore:
    """The backend without vLLM's base class: an :class:`EngineGrammars` (``grammars``) made
    from vLLM's tokenizer and config (``disable_any_whitespace``; the speculative tokens to
    roll back), and vLLM's bitmask."""

    vllm_config: Any
    tokenizer: Any
    vocab_size: int
    #: Bounds of the artifacts kept and of each one's caches (set before the engine starts).
    runtime_limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS

    def __post_init__(self) -> None:
        so_config = getattr(self.vllm_config, "structured_outputs_config", None)
        self.grammars = EngineGrammars(
            self.tokenizer, compact_json=bool(getattr(so_config, "disable_any_whitespace", False)),
            max_rollback=int(getattr(self.vllm_config, "num_speculative_tokens", 0) or 0),
            runtime_limits=self.runtime_limits)

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        """vLLM's bitmask: int32 ``[max_num_seqs, ceil(vocab_size / 32)]``, all allowed."""
        import torch

        return torch.full((max_num_seqs, n_words(self.vocab_size)), -1, dtype=torch.int32)

    def destroy(self) -> None:
        self.grammars.clear()


class GrammarCore:
    """vLLM's ``StructuredOutputGrammar`` methods over a :class:`GrammarState` (``state``)."""

    state: GrammarState

    def __init__(self, state: GrammarState):
        self.state = state

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        ok = self.state.accept(tokens)
        if not ok:
            logger.error("gramc: request %s: the grammar refused a token of %s", request_id, tokens)
        return ok

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        return self.state.validate(tokens)

    def rollback(self, num_tokens: int) -> None:
        self.state.rollback(num_tokens)

    def fill_bitmask(self, bitmask: Any, batch_index: int) -> None:
        self.state.fill(bitmask[batch_index].numpy())

    def is_terminated(self) -> bool:
        return self.state.terminated

    def reset(self) -> None:
        self.state.reset()

    @property
    def num_processed_tokens(self) -> int:
        return self.state.num_processed_tokens


_classes: dict[str, type] = {}


def _build() -> None:
    """Mix the cores with vLLM's abstract classes (and the backend's dataclass fields)."""
    from dataclasses import dataclass

    from vllm.utils.mistral import is_mistral_tokenizer
    from vllm.v1.structured_output.backend_types import StructuredOutputBackend, StructuredOutputGrammar

    class GramcGrammar(GrammarCore, StructuredOutputGrammar):
        """A request's gramc grammar, driven by vLLM's StructuredOutputManager."""

    @dataclass
    class GramcBackend(GramcBackendCore, StructuredOutputBackend):
        """gramc as vLLM's structured-output backend (fields: vllm_config, tokenizer, vocab_size)."""

        def __post_init__(self) -> None:
            if is_mistral_tokenizer(self.tokenizer):
                raise ValueError("the gramc structured-output backend reads Hugging Face tokenizers; "
                                 "start vLLM with --tokenizer-mode hf for Mistral models")
            super().__post_init__()

        def compile_grammar(self, request_type: Any, grammar_spec: str,
                            stop_token_ids: set[int] | None = None) -> Any:
            return GramcGrammar(self.grammars.request(request_type.name, grammar_spec, stop_token_ids))

    for cls in (GramcGrammar, GramcBackend):
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
        _classes[cls.__name__] = cls


def __getattr__(name: str) -> Any:
    if name in ("GramcBackend", "GramcGrammar"):
        if not _classes:
            _build()
        return _classes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------- registration with vLLM


def register() -> None:
    """Make ``"gramc"`` a structured-output backend of vLLM (module doc). Idempotent: vLLM
    calls general plugins once per process, and tests may call it again."""
    _allow_backend_name()
    _validate_gramc_requests()
    _build_backend_on_demand()


def _allow_backend_name() -> None:
    from typing import Literal, get_args

    from pydantic.dataclasses import rebuild_dataclass
    from vllm.config import structured_outputs as so

    cls = so.StructuredOutputsConfig
    field = cls.__dataclass_fields__["backend"]
    names = get_args(field.type)
    if BACKEND_NAME in names:
        return
    widened = Literal[names + (BACKEND_NAME,)]  # type: ignore[valid-type]
    field.type = cls.__annotations__["backend"] = so.StructuredOutputsBackend = widened
    rebuild_dataclass(cls, force=True)


def check_request(structured_outputs: Any) -> None:
    """Reject a malformed gramc request at admission (vLLM answers HTTP 400): the request's
    constraint is parsed by gramc's frontend (not bound to the vocabulary: that is
    ``compile_grammar``'s work, in the engine)."""
    from gramc.compiler.pipeline import lower
    from vllm.v1.structured_output.request import get_structured_output_key

    so = structured_outputs
    if isinstance(so.choice, list) and not so.choice:
        raise ValueError("structured_outputs.choice cannot be an empty list")
    if so.json_object is False:
        raise ValueError("structured_outputs.json_object must be True if set")
    for name in ("grammar", "json", "structural_tag"):
        value = getattr(so, name)
        if isinstance(value, str) and not value.strip():
            raise ValueError(f"structured_outputs.{name} cannot be an empty string")
    kind, spec = get_structured_output_key(so)
    format, source = request_source(kind.name, spec)
    lower(source, format, source_name=f"<{kind.name.lower()}>")


def _validate_gramc_requests() -> None:
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import SamplingParams

    original = SamplingParams._validate_structured_outputs
    if getattr(original, "_gramc", False):
        return

    def validate(self: Any, model_config: Any, structured_outputs_config: Any, tokenizer: Any) -> None:
        if (structured_outputs_config is None or self.structured_outputs is None
                or structured_outputs_config.backend != BACKEND_NAME):
            return original(self, model_config, structured_outputs_config, tokenizer)
        if tokenizer is None:
            raise VLLMValidationError("structured outputs need a tokenizer (not skip_tokenizer_init)")
        so = self.structured_outputs
        if so._backend not in (None, BACKEND_NAME):
            raise VLLMValidationError(f"vLLM was started with the {BACKEND_NAME!r} structured-output backend; "
                                      f"the request names {so._backend!r}")
        try:
            check_request(so)
        except Exception as e:  # gramc's syntax errors, bad JSON, bad choices
            raise VLLMValidationError(f"gramc: {e}") from e
        so._backend = BACKEND_NAME

    validate._gramc = True  # type: ignore[attr-defined]
    SamplingParams._validate_structured_outputs = validate


def _build_backend_on_demand() -> None:
    from vllm.v1.structured_output import StructuredOutputManager

    original = StructuredOutputManager.grammar_init
    if getattr(original, "_gramc", False):
        return

    def grammar_init(self: Any, request: Any) -> None:
        params = request.sampling_params
        so = getattr(params, "structured_outputs", None) if request.structured_output_request else None
        if self.backend is None and so is not None and so._backend == BACKEND_NAME:
            self.backend = __getattr__("GramcBackend")(
                self.vllm_config, tokenizer=self.tokenizer,
                vocab_size=self.vllm_config.model_config.get_vocab_size())
            self.backend_name = BACKEND_NAME
        return original(self, request)

    grammar_init._gramc = True  # type: ignore[attr-defined]
    StructuredOutputManager.grammar_init = grammar_init
