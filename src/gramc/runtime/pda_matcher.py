"""The matcher of PDA artifacts: its state is an Earley chart (a view of sets that never change)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gramc.runtime.budget import budget_of
from gramc.runtime.earley import ChartView
from gramc.runtime.matcher import Matcher


class PDAMatcher(Matcher):
    """A matcher over a context-free grammar; masks come from :class:`PDATokenTable`."""

    __slots__ = ("_tokens", "_parser")

    def __init__(self, artifact: Any, max_rollback: int = 16):
        self._tokens = artifact.token_table
        self._parser = self._tokens.parser
        super().__init__(artifact, max_rollback)

    def _fork_extra(self, other: PDAMatcher) -> None:
        self._tokens, self._parser = other._tokens, other._parser
        if isinstance(other._state, ChartView):  # its own list: forks may step in other threads
            self._state = other._state.copy()

    def commit_token(self, token_id: int) -> bool:
        # Fast path for the common call: a plain int naming a token with bytes, which the
        # parser takes (special tokens, EOS, refusals and the checks stay on the general path).
        if type(token_id) is int and not self._ended and 0 <= token_id < self.vocab_size \
                and token_id not in self._tokens.special:
            data = self._tokens.token_bytes[token_id]
            nxt = self._tokens.step(self._state, token_id, data) if data else None
            if nxt is not None:
                if self.max_rollback:
                    self._history.append((self._state, False))
                self._state = nxt
                return True
        return super().commit_token(token_id)

    def fill_bitmask(self, out: np.ndarray, budget: int | None = None) -> None:
        # Fast path for the common call (as DFAMatcher's): an exact-width int32/uint32 row.
        if budget is None and not self._ended and getattr(out, "shape", None) == self._shape \
                and out.dtype.char in "iI":
            out[...] = self._tokens.words(self._state).view(out.dtype)
            return
        super().fill_bitmask(out, budget)

    def _start(self) -> ChartView:
        return self._tokens.initial()

    def _words(self, chart: ChartView) -> np.ndarray:
        return self._tokens.words(chart)

    def _bool_mask(self, chart: ChartView, size: int) -> np.ndarray:
        return self._tokens.mask(chart, size)

    def _step_token(self, chart: ChartView, token: int) -> ChartView | None:
        if token in self._tokens.special:
            s = self._parser.scan_token(chart, token)
            return None if s is None else chart.extended(s)
        data = self._tokens.token_bytes[token]
        return self._tokens.step(chart, token, data) if data else None

    def _step_bytes(self, chart: ChartView, data: bytes) -> ChartView | None:
        return self._parser.feed(chart, data)

    def _complete(self, chart: ChartView) -> bool:
        return self._parser.is_complete(chart[-1])

    def _forced(self, chart: ChartView) -> list[int]:
        return self._tokens.forced(chart)

    def _budget(self) -> Any:
        return budget_of(self._tokens)
