"""What gramc's serving-engine backends share (vLLM's structured outputs, SGLang's grammar
backend): the engines' request kinds as gramc sources, one request's grammar state, and the
per-engine compiled grammars.

Both engines send a constraint as ``(kind, text)``, compile it off their scheduling loop,
fill one packed bitmask row per step (:mod:`gramc.bitmask` layout, as wide as the model's
head), accept sampled tokens, check and roll back speculative ones, and stop at a stop token.
:class:`GrammarState` is that life cycle on a :class:`~gramc.Matcher`; the engine modules
(:mod:`gramc.integrations.vllm_backend`, :mod:`gramc.integrations.sglang_backend`) only adapt
it to each engine's classes.

Stop tokens are the request's (or the tokenizer's EOS): grammars are bound to the tokenizer's
vocabulary without EOS, and a stop token is allowed, and accepted, exactly where the output
so far is complete; accepting one terminates the request, and a rollback undoes that too.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import deque
from typing import Any

import numpy as np

from gramc.bitmask import n_words
from gramc.limits import DEFAULT_RUNTIME_LIMITS, RuntimeLimits
from gramc.runtime.cache import LRUCache

__all__ = ["EngineGrammars", "GrammarState", "grammar_format", "request_source", "JSON_OBJECT_SCHEMA"]

#: What ``JSON_OBJECT`` requests compile (any JSON object, as the engines' other backends do).
JSON_OBJECT_SCHEMA = '{"type": "object"}'

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


class EngineGrammars:
    """One engine's grammars: the tokenizer's vocabulary (read once with ``Vocab.from_hf``,
    EOS left out: stop tokens are per request), compile options, and the compiled artifacts,
    shared by requests with the same constraint (the ``runtime_limits.compiled_grammars``
    most recently used; engines compile from several threads, so the cache is locked).

    Artifacts are compiled eagerly (engines compile in a thread pool, off the scheduling
    step); ``GRAMC_VLLM_LAZY=1`` (or ``lazy=True``) binds each automaton state on first use.
    """

    def __init__(self, tokenizer: Any, *, compact_json: bool = False, max_rollback: int = 0,
                 lazy: bool | None = None, runtime_limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS):
        from gramc.compiler.pipeline import CompileOptions
        from gramc.vocab import Vocab

        self.vocab = Vocab.from_hf(tokenizer, eos_ids=())
        eos = getattr(tokenizer, "eos_token_id", None)
        self.default_stop_ids: tuple[int, ...] = (eos,) if isinstance(eos, int) else ()
        self.options = CompileOptions(json_whitespace="compact" if compact_json else "flexible")
        self.max_rollback = max_rollback
        self.lazy = os.environ.get("GRAMC_VLLM_LAZY", "") not in ("", "0") if lazy is None else lazy
        self.runtime_limits = runtime_limits
        self._artifacts = LRUCache(runtime_limits.compiled_grammars)
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
                            runtime_limits=self.runtime_limits, source_name=f"<{format} request>")
        with self._lock:
            return self._artifacts.put(key, art)

    def state(self, artifact: Any, stop_token_ids: Any = None) -> GrammarState:
        """A fresh :class:`GrammarState` of ``artifact`` with the request's stop tokens."""
        stops = tuple(sorted(int(t) for t in stop_token_ids)) if stop_token_ids else self.default_stop_ids
        return GrammarState(artifact.matcher(max_rollback=self.max_rollback), stops, self.max_rollback)

    def request(self, kind: str, spec: str, stop_token_ids: Any = None) -> GrammarState:
        """A fresh :class:`GrammarState` for one request (``kind``: see :func:`request_source`)."""
        return self.state(self.artifact(*request_source(kind, spec)), stop_token_ids)

    def clear(self) -> None:
        with self._lock:
            self._artifacts.clear()
