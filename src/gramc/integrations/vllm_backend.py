"""vLLM: gramc as a structured-output backend (``--structured-outputs-config '{"backend": "gramc"}'``).

vLLM 0.33's structured outputs run in its scheduler: a ``StructuredOutputBackend`` compiles
each request's constraint (``compile_grammar(kind, spec, stop_token_ids)``) into a
``StructuredOutputGrammar`` that fills one packed bitmask row per step, accepts the sampled
tokens, checks and rolls back speculative ones, and says when the request has terminated.
This module implements both on gramc's :class:`~gramc.Matcher`:

* :class:`GramcBackendCore` / :class:`GrammarState`: the vLLM-independent logic (the request
  kinds mapped to gramc formats, the per-backend artifact cache, stop tokens, rollback,
  bitmask rows as numpy arrays);
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
                          reads XGrammar's GBNF-like EBNF, W3C and ISO EBNF (:func:`grammar_format`)
``CHOICE``                a JSON list of strings: exactly one of them
``STRUCTURAL_TAG``        ``format="structural_tag"`` (both of XGrammar's document forms)
========================  =====================================================================

Stop tokens are the request's (``stop_token_ids``: its EOS and user stop ids; the
tokenizer's EOS when vLLM passes none): the grammar is bound to the tokenizer's vocabulary
without EOS, and a stop token is allowed, and accepted, exactly where the output so far is
complete. Accepting one terminates the request; :meth:`GrammarState.rollback` undoes that
too. Artifacts are compiled eagerly (vLLM compiles in a thread pool, off the scheduler's
step); set ``GRAMC_VLLM_LAZY=1`` to bind each automaton state on first use instead.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections import deque
from typing import Any

import numpy as np

from gramc.bitmask import n_words
from gramc.limits import DEFAULT_RUNTIME_LIMITS, RuntimeLimits
from gramc.runtime.cache import LRUCache

__all__ = ["BACKEND_NAME", "GramcBackendCore", "GrammarState", "grammar_format", "request_source",
           "register", "GramcBackend", "GramcGrammar"]  # noqa: F822 (the last two: made by __getattr__)

#: The name users put in ``--structured-outputs-config '{"backend": "gramc"}'``.
BACKEND_NAME = "gramc"
#: What ``JSON_OBJECT`` requests compile (any JSON object, as vLLM's other backends do).
JSON_OBJECT_SCHEMA = '{"type": "object"}'

logger = logging.getLogger(__name__)

# A rule defined with ``::=`` (GBNF, XGrammar's EBNF, W3C EBNF), at the start of a line.
_EBNF_RULE = re.compile(r"^[ \t]*<?[A-Za-z_][\w.-]*>?[ \t]*::=", re.M)
# A Lark rule or terminal definition (``name:``, ``?name:``, ``!name:``, ``NAME.2:``,
# llguidance's ``name[lazy]:``) or a ``%`` directive, at the start of a line.
_LARK_LINE = re.compile(r"^[ \t]*(?:[?!]?[A-Za-z_]\w*(?:\.-?\d+)?[ \t]*(?:\[[^\]\n]*\])?[ \t]*:|%[a-z]+)", re.M)


def grammar_format(text: str) -> str:
    """``"lark"`` or ``"ebnf"``: how vLLM's ``grammar`` requests are read (their text does not
    say). A grammar with a ``::=`` rule is EBNF; one with Lark rule definitions or ``%``
    directives is Lark; anything else goes to the EBNF reader (ISO 14977 ``name = ... ;``),
    whose errors say what it expected.

    >>> grammar_format('root ::= "a" | "b"'), grammar_format('start: "a" | "b"')
    ('ebnf', 'lark')
    """
    if _EBNF_RULE.search(text):
        return "ebnf"
    return "lark" if _LARK_LINE.search(text) else "ebnf"


def _gbnf_string(s: str) -> str:
    """``s`` as a GBNF string literal: letters, digits and spaces as they are, every other
    code point as a ``\\U`` escape (so quotes, backslashes and newlines need no cases)."""
    return '"' + "".join(c if c.isascii() and (c.isalnum() or c == " ") else f"\\U{ord(c):08X}"
                         for c in s) + '"'


def request_source(kind: str, spec: str) -> tuple[str, str]:
    """``(format, source)`` that gramc compiles for a vLLM request of ``kind`` (the name of a
    ``StructuredOutputOptions`` member: ``"JSON"``, ``"REGEX"``, ...) with ``spec``.

    Raises:
        ValueError: an unknown kind, or a ``CHOICE`` spec that is not a non-empty list of
            strings.

    >>> request_source("CHOICE", '["yes", "no"]')
    ('gbnf', 'root ::= "yes" | "no"')
    """
    if kind == "JSON":
        return "json_schema", spec
    if kind == "JSON_OBJECT":
        return "json_schema", JSON_OBJECT_SCHEMA
    if kind == "REGEX":
        return "regex", spec
    if kind == "GRAMMAR":
        return grammar_format(spec), spec
    if kind == "STRUCTURAL_TAG":
        return "structural_tag", spec
    if kind == "CHOICE":
        choices = json.loads(spec)
        if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
            raise ValueError(f"a choice request is a non-empty JSON list of strings, got {spec!r}")
        return "gbnf", "root ::= " + " | ".join(_gbnf_string(c) for c in choices)
    raise ValueError(f"unknown structured-output request kind {kind!r}")


class GrammarState:
    """One request's grammar as vLLM drives it: a matcher over a vocabulary without EOS, the
    request's stop tokens (allowed, and accepted, where the output is complete), whether one
    was accepted, and a history of ``max_rollback`` accepted tokens for speculative decoding.
    """

    __slots__ = ("matcher", "stop_ids", "terminated", "num_processed_tokens", "_history", "_scratch")

    def __init__(self, matcher: Any, stop_ids: tuple[int, ...], max_rollback: int = 0):
        self.matcher = matcher
        self.stop_ids = stop_ids
        self.terminated = False
        self.num_processed_tokens = 0
        # one entry per accepted token: True for the stop token that terminated
        self._history: deque[bool] = deque(maxlen=max_rollback)
        self._scratch: np.ndarray | None = None

    def _is_stop(self, token: int) -> bool:
        return token in self.stop_ids and self.matcher.is_complete()

    def accept(self, tokens: list[int]) -> bool:
        """Advance by ``tokens``; False at the first one the grammar refuses (those before it
        stay accepted). Tokens after a stop token are ignored, as are calls once terminated."""
        if self.terminated:
            return True
        m = self.matcher
        for t in tokens:
            if m.commit_token(t):
                self._history.append(False)
            elif self._is_stop(t):
                self.terminated = True
                self._history.append(True)
            else:
                return False
            self.num_processed_tokens += 1
            if self.terminated:
                break
        return True

    def validate(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` that :meth:`accept` would take (state unchanged;
        a stop token ends it)."""
        if self.terminated:
            return []
        n = self.matcher.validate_tokens(tokens)
        if n < len(tokens) and tokens[n] in self.stop_ids:
            probe = self.matcher.fork()
            probe.commit_tokens(tokens[:n])
            if probe.is_complete():
                n += 1
        return list(tokens[:n])

    def rollback(self, n: int) -> None:
        """Undo the last ``n`` accepted tokens (at most ``max_rollback``)."""
        if n > len(self._history):
            raise ValueError(f"cannot roll back {n} token(s): {len(self._history)} remembered")
        commits = 0
        for _ in range(n):
            if self._history.pop():
                self.terminated = False
            else:
                commits += 1
        if commits:
            self.matcher.rollback(commits)
        self.num_processed_tokens -= n

    def fill(self, row: np.ndarray) -> None:
        """Write the packed mask of allowed tokens (:mod:`gramc.bitmask` layout) into ``row``,
        an int32/uint32 row of vLLM's bitmask: ``ceil(model vocab / 32)`` words, which may be
        wider or narrower than the tokenizer's vocabulary. Stop tokens are set where the
        output is complete; once terminated, only they are."""
        m = self.matcher
        if self.terminated:
            row.fill(0)
        elif row.shape[0] >= n_words(m.vocab_size):
            m.fill_bitmask(row)
        else:  # a model head narrower than the tokenizer: its ids past the head cannot be chosen
            if self._scratch is None:
                self._scratch = np.zeros(n_words(m.vocab_size), dtype=np.uint32)
            m.fill_bitmask(self._scratch)
            row[:] = self._scratch[: row.shape[0]].view(row.dtype)
        if self.terminated or m.is_complete():
            words = row.view(np.uint32)
            for t in self.stop_ids:
                if t < 32 * words.shape[0]:
                    words[t >> 5] |= np.uint32(1 << (t & 31))

    def reset(self) -> None:
        """Back to the grammar's start, history cleared."""
        self.matcher.reset()
        self.terminated = False
        self.num_processed_tokens = 0
        self._history.clear()


class GramcBackendCore:
    """The backend without vLLM: the tokenizer's vocabulary (read once, EOS left out: stop
    tokens are per request), compile options from vLLM's config, and the compiled artifacts,
    shared by requests with the same constraint (the ``runtime_limits.compiled_grammars``
    most recently used; vLLM compiles from several threads, so the cache is locked)."""

    vllm_config: Any
    tokenizer: Any
    vocab_size: int
    #: Bounds of the artifacts kept and of each one's caches (set before the engine starts).
    runtime_limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS

    def __post_init__(self) -> None:
        from gramc.compiler.pipeline import CompileOptions
        from gramc.vocab import Vocab

        self.vocab = Vocab.from_hf(self.tokenizer, eos_ids=())
        eos = getattr(self.tokenizer, "eos_token_id", None)
        self.default_stop_ids: tuple[int, ...] = (eos,) if isinstance(eos, int) else ()
        so_config = getattr(self.vllm_config, "structured_outputs_config", None)
        compact = bool(getattr(so_config, "disable_any_whitespace", False))
        self.options = CompileOptions(json_whitespace="compact" if compact else "flexible")
        self.max_rollback = int(getattr(self.vllm_config, "num_speculative_tokens", 0) or 0)
        self.lazy = os.environ.get("GRAMC_VLLM_LAZY", "") not in ("", "0")
        self._artifacts = LRUCache(self.runtime_limits.compiled_grammars)
        self._lock = threading.Lock()

    def artifact(self, format: str, source: str) -> Any:
        """The artifact of ``source`` bound to the vocabulary (compiled on first request)."""
        import gramc

        key = (format, source)
        with self._lock:
            hit = self._artifacts.get(key)
        if hit is not None:
            return hit
        art = gramc.compile(source, format=format, vocab=self.vocab, lazy=self.lazy, options=self.options,
                            runtime_limits=self.runtime_limits, source_name=f"<vLLM {format} request>")
        with self._lock:
            return self._artifacts.put(key, art)

    def grammar_state(self, kind: str, spec: str, stop_token_ids: Any = None) -> GrammarState:
        """A fresh :class:`GrammarState` for one request (``kind``: see :func:`request_source`)."""
        art = self.artifact(*request_source(kind, spec))
        stops = tuple(sorted(int(t) for t in stop_token_ids)) if stop_token_ids else self.default_stop_ids
        return GrammarState(art.matcher(max_rollback=self.max_rollback), stops, self.max_rollback)

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        """vLLM's bitmask: int32 ``[max_num_seqs, ceil(vocab_size / 32)]``, all allowed."""
        import torch

        return torch.full((max_num_seqs, n_words(self.vocab_size)), -1, dtype=torch.int32)

    def destroy(self) -> None:
        with self._lock:
            self._artifacts.clear()


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
            return GramcGrammar(self.grammar_state(request_type.name, grammar_spec, stop_token_ids))

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
