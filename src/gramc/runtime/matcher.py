"""The per-sequence matcher a decoder drives: masks, commits, rollback, fork.

A :class:`Matcher` is a DFA state plus a bounded history. Every query is a table lookup in
the artifact's :class:`~gramc.runtime.token_table.TokenTable`, so ``mask()``,
``fill_bitmask()`` and ``commit_token()`` cost O(1) (plus a copy of one mask row).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Iterable

import numpy as np

from gramc.automata.tables import DEAD
from gramc.errors import GramcError

if TYPE_CHECKING:
    from gramc.runtime.artifact import Artifact


class Matcher:
    """Which tokens may come next, for one generated sequence.

    Invalid commits are refused (they return False and leave the state as it was).
    End-of-sequence tokens are allowed exactly when the output so far is complete; committing
    one terminates the matcher.
    """

    __slots__ = ("_artifact", "_table", "_state", "_ended", "_history", "max_rollback")

    def __init__(self, artifact: "Artifact", max_rollback: int = 16):
        if max_rollback < 0:
            raise ValueError("max_rollback must be >= 0")
        self._artifact = artifact
        self._table = artifact.token_table
        self.max_rollback = max_rollback
        self._history: deque[tuple[int, bool]] = deque(maxlen=max_rollback)
        self._state = artifact.dfa.start
        self._ended = False

    # ------------------------------------------------------------ masks

    @property
    def vocab_size(self) -> int:
        return self._table.vocab_size

    def mask(self, size: int | None = None) -> np.ndarray:
        """Bool mask of allowed token ids, of length ``size`` (default: the vocabulary size).

        Ids at or past the vocabulary size are never allowed, so ``size`` may be the width of
        a model's logits. The array is cached and read-only; copy it to modify it.
        """
        size = self.vocab_size if size is None else size
        if self._ended:
            return np.zeros(size, dtype=bool)
        return self._table.mask(self._state, size)

    def fill_bitmask(self, out: np.ndarray) -> None:
        """Write the packed mask (see :mod:`gramc.runtime.bitmask`) into a uint32/int32 row."""
        n = self._table.n_words
        if out.ndim != 1 or out.shape[0] < n or out.dtype.itemsize != 4:
            raise ValueError(f"need a 1-d 32-bit array of at least {n} words, got {out.dtype}{out.shape}")
        if self._ended:
            out.fill(0)
            return
        np.copyto(out[:n], self._table.words(self._state).view(out.dtype))
        if out.shape[0] > n:
            out[n:] = 0

    def allowed_tokens(self) -> np.ndarray:
        """Ids allowed now (ascending), EOS included where the output is complete."""
        return np.flatnonzero(self.mask())

    # ------------------------------------------------------------ state queries

    def is_complete(self) -> bool:
        """Could generation stop here (the output so far is in the language)?"""
        return self._ended or bool(self._artifact.dfa.accept[self._state])

    def is_finished(self) -> bool:
        """True once EOS was committed, or when no token at all is allowed now."""
        return self._ended or not self._table.words(self._state).any()

    def is_failed(self) -> bool:
        """True when the output can never be completed with this vocabulary."""
        return not self.is_complete() and self.is_finished()

    @property
    def state(self) -> int:
        """The current automaton state (for debugging and batching)."""
        return self._state

    # ------------------------------------------------------------ commits

    def _push(self) -> None:
        if self.max_rollback:
            self._history.append((self._state, self._ended))

    def commit_token(self, token_id: int) -> bool:
        """Advance by one token. Returns False (state unchanged) if it is not allowed."""
        nxt = self._next(self._state, self._ended, int(token_id))
        if nxt is None:
            return False
        self._push()
        self._state, self._ended = nxt
        return True

    def _next(self, state: int, ended: bool, token: int) -> tuple[int, bool] | None:
        if ended or not 0 <= token < self.vocab_size:
            return None
        nxt = self._table.next_state(state, token)
        if nxt != DEAD:
            return nxt, False
        if token in self._table.eos_ids and self._artifact.dfa.accept[state]:
            return state, True
        return None

    def commit_tokens(self, token_ids: Iterable[int]) -> int:
        """Commit tokens in order, stopping at the first refused one; returns how many took."""
        n = 0
        for t in token_ids:
            if not self.commit_token(t):
                break
            n += 1
        return n

    def commit_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (e.g. text the decoder inserted). All or nothing.

        Counts as one step for :meth:`rollback`.
        """
        if self._ended:
            return False
        nxt = self._artifact.dfa.step_bytes(self._state, data)
        if nxt == DEAD:
            return False
        self._push()
        self._state = nxt
        return True

    def validate_tokens(self, token_ids: Iterable[int]) -> int:
        """Length of the longest prefix of ``token_ids`` that would be accepted (no change)."""
        state, ended, n = self._state, self._ended, 0
        for t in token_ids:
            nxt = self._next(state, ended, int(t))
            if nxt is None:
                break
            state, ended = nxt
            n += 1
        return n

    def forced_tokens(self) -> list[int]:
        """Tokens the grammar forces from here (jump-forward), without committing them.

        The grammar forces a byte string when each of its bytes is the only one allowed and
        the output is not yet complete; this returns the longest-first tokenisation of that
        string into allowed tokens (greedy, so it may differ from the tokenizer's own split).
        """
        if self._ended:
            return []
        out, state = [], self._state
        while (token := self._table.forced(state)) >= 0:
            out.append(token)
            state = self._table.next_state(state, token)
        return out

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` commits (at most ``max_rollback`` are remembered)."""
        if n < 0 or n > len(self._history):
            raise GramcError(
                f"cannot roll back {n} step(s): {len(self._history)} remembered "
                f"(max_rollback={self.max_rollback})"
            )
        for _ in range(n):
            self._state, self._ended = self._history.pop()

    def reset(self) -> None:
        """Back to the start of the grammar, history cleared."""
        self._history.clear()
        self._state = self._artifact.dfa.start
        self._ended = False

    def fork(self) -> "Matcher":
        """An independent copy sharing the artifact (cheap: for beam search)."""
        m = Matcher.__new__(Matcher)
        m._artifact, m._table, m.max_rollback = self._artifact, self._table, self.max_rollback
        m._history = self._history.copy()
        m._state, m._ended = self._state, self._ended
        return m

    def __repr__(self) -> str:
        flags = "ended" if self._ended else ("complete" if self.is_complete() else "open")
        return f"<Matcher state={self._state} {flags}>"
