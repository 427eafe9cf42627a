"""Matchers of artifacts with a ``uniqueItems`` plan: the kind's matcher, its state paired
with a :class:`~gramc.runtime.unique.Tracker`.

:func:`unique_matcher_class` derives, once per matcher kind, a subclass whose primitives
step both halves and whose rows leave out what :class:`~gramc.runtime.unique.UniqueCheck`
forbids. Everything a decoder calls (rollback, fork, budgets, ...) is the base
:class:`~gramc.runtime.matcher.Matcher`'s, on the pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gramc.bitmask import unpack_row
from gramc.runtime.check import expected_bytes
from gramc.runtime.matcher import Matcher
from gramc.runtime.unique import Engine, UniqueCheck

_CLASSES: dict[type, type] = {}


def unique_matcher_class(base: type) -> type:
    """The matcher class of ``base``'s kind that enforces the artifact's plan."""
    cls = _CLASSES.get(base)
    if cls is None:
        cls = _CLASSES[base] = type(f"Unique{base.__name__}", (UniqueMixin, base), {"__slots__": ()})
    return cls


class UniqueMixin(Matcher):
    """Primitives over ``(grammar state, tracker)`` pairs (see the module doc)."""

    __slots__ = ()

    def _check(self) -> UniqueCheck:
        return self._artifact.unique_check()

    def _engine(self) -> Engine:
        return Engine(lambda s, data: super(UniqueMixin, self)._step_bytes(s, data),
                      lambda s, token: super(UniqueMixin, self)._step_token(s, token),
                      lambda s: live_bytes(self._artifact, s), lambda s: state_key(self._artifact, s))

    def _start(self) -> Any:
        return (super()._start(), self._check().initial())

    def _words(self, state: Any) -> np.ndarray:
        return self._check().filter(super()._words(state[0]), state[1], state[0], self._engine())

    def _bool_mask(self, state: Any, size: int) -> np.ndarray:
        out = unpack_row(self._words(state), size)
        out.flags.writeable = False
        return out

    def _row(self, budget: int | None) -> np.ndarray:
        if budget is None:
            return self._words(self._state)
        base, tracker = self._state
        words = self._budget().words(base, budget)
        return self._check().filter(words, tracker, base, self._engine())

    def tokens_to_finish(self) -> int | None:
        if self._ended:
            return 0
        from gramc.runtime.budget import INF

        n = self._budget().to_finish(self._state[0])
        return None if n >= INF else n

    def fill_bitmask(self, out: np.ndarray, budget: int | None = None) -> None:
        Matcher.fill_bitmask(self, out, budget)  # not the DFA matcher's fast path: the state is a pair

    def commit_token(self, token_id: int) -> bool:
        return Matcher.commit_token(self, token_id)  # nor the kinds' fast commits

    def _step_token(self, state: Any, token: int) -> Any | None:
        nxt = super()._step_token(state[0], token)
        if nxt is None:
            return None
        check = self._check()
        tracker = state[1] if token in check.special else state[1].feed(check.tokens[token])
        return None if tracker is None else (nxt, tracker)

    def _step_bytes(self, state: Any, data: bytes) -> Any | None:
        nxt = super()._step_bytes(state[0], data)
        if nxt is None:
            return None
        tracker = state[1].feed(data)
        return None if tracker is None else (nxt, tracker)

    def _complete(self, state: Any) -> bool:
        return super()._complete(state[0])

    def _forced(self, state: Any) -> list[int]:
        out = []
        for t in super()._forced(state[0]):
            nxt = self._step_token(state, t)
            if nxt is None:
                break
            out.append(t)
            state = nxt
        return out


def live_bytes(artifact: Any, state: Any) -> list[int]:
    """The bytes the grammar can read next from ``state`` (a state of ``artifact``'s kind)."""
    kind = artifact.kind
    if kind == "dfa":
        return expected_bytes(artifact.dfa, state)
    if kind == "pda":
        return artifact.token_table.parser.next_bytes(state[-1])
    cdfa = artifact.cdfa
    return [b for b in range(256) if cdfa.step_bytes(state, bytes((b,))) != 0]


def state_key(artifact: Any, state: Any) -> Any:
    """A hashable key of a grammar state: the state number, or for a PDA the parser's
    configuration id with its generation (ids are reissued in a new generation)."""
    if artifact.kind != "pda":
        return state
    parser = artifact.token_table.parser
    key = parser.key(state)
    return None if key is None else (parser.generation, key)


__all__ = ["unique_matcher_class", "UniqueMixin", "live_bytes", "state_key"]
