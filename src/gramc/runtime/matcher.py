"""The per-sequence matcher a decoder drives: masks, commits, rollback, fork.

:class:`Matcher` holds a parse state and a bounded history of earlier states; everything a
decoder calls is defined here once, on top of a few primitives that each automaton kind
supplies: :class:`DFAMatcher` (a state number: every query is a table lookup) and
``PDAMatcher`` in :mod:`gramc.runtime.pda_matcher` (an Earley chart).
"""

from __future__ import annotations

import operator
from collections import deque
from typing import Any, Iterable, TypeVar

import numpy as np

from gramc.automata.tables import DEAD
from gramc.errors import GramcError
from gramc.bitmask import n_words, unpack_row
from gramc.formats.limits import DEFAULT_READ_LIMITS
from gramc.runtime.budget import INF, budget_of, check_budget

#: The widest mask a matcher gives: the largest vocabulary an artifact may be bound to.
MAX_MASK_SIZE = DEFAULT_READ_LIMITS.max_vocab_size


_M = TypeVar("_M", bound="Matcher")


class Matcher:
    """Which tokens may come next, for one generated sequence.

    Invalid commits are refused (they return False and leave the state as it was).
    End-of-sequence tokens are allowed exactly when the output so far is complete; committing
    one ends the matcher.

    A *budget* (``mask(budget=n)``, ``fill_bitmask(out, budget=n)``) is the number of tokens
    that may still be committed, end-of-sequence included: only tokens after which the output
    can still be completed within ``n - 1`` more are allowed (exactly for DFA and counted DFA
    artifacts; by a sound bound for PDA artifacts, see :mod:`gramc.runtime.budget`).

    Subclasses provide the parse-state primitives: ``_start()``, ``_words(state)``,
    ``_step_token(state, t)``, ``_step_bytes(state, data)``, ``_complete(state)``,
    ``_forced(state)`` and ``_budget()`` (the :mod:`gramc.runtime.budget` object of the
    table); states are immutable values.
    """

    __slots__ = ("_artifact", "_state", "_ended", "_history", "max_rollback", "vocab_size",
                 "_eos", "_shape", "__weakref__")

    def __init__(self, artifact: Any, max_rollback: int = 16):
        if max_rollback < 0:
            raise ValueError("max_rollback must be >= 0")
        self._artifact = artifact
        self.max_rollback = max_rollback
        self.vocab_size: int = artifact.vocab.size
        self._shape = (n_words(self.vocab_size),)
        self._eos = frozenset(artifact.vocab.eos_ids)
        self._history: deque[tuple[Any, bool]] = deque(maxlen=max_rollback)
        self._state = self._start()
        self._ended = False

    # ------------------------------------------------------------ primitives

    def _start(self) -> Any:
        raise NotImplementedError

    def _words(self, state: Any) -> np.ndarray:
        raise NotImplementedError

    def _step_token(self, state: Any, token: int) -> Any | None:
        raise NotImplementedError

    def _step_bytes(self, state: Any, data: bytes) -> Any | None:
        raise NotImplementedError

    def _complete(self, state: Any) -> bool:
        raise NotImplementedError

    def _forced(self, state: Any) -> list[int]:
        raise NotImplementedError

    def _bool_mask(self, state: Any, size: int) -> np.ndarray:
        return unpack_row(self._words(state), size)

    def _budget(self) -> Any:
        raise NotImplementedError

    def _row(self, budget: int | None) -> np.ndarray:
        """The packed row now: plain, or cut to ``budget`` tokens left (already checked)."""
        if budget is None:
            return self._words(self._state)
        return self._budget().words(self._state, budget)

    # ------------------------------------------------------------ masks

    def mask(self, size: int | None = None, *, budget: int | None = None) -> np.ndarray:
        """Bool mask of allowed token ids, of length ``size`` (default: the vocabulary size).

        Ids at or past the vocabulary size are never allowed, so ``size`` may be the width of
        a model's logits. The array may be cached and shared: it is read-only.

        ``budget``: the tokens that may still be committed, EOS included; only tokens after
        which the output can still be completed within ``budget - 1`` are allowed (class doc).

        Raises:
            ValueError: ``size`` is smaller than the vocabulary (the mask would lose ids; for
                a model head narrower than its tokenizer use :meth:`logits_mask`), or
                ``budget`` is negative.
            TypeError: ``budget`` is not an int.
        """
        n = None if budget is None else check_budget(budget)
        size = self.vocab_size if size is None else _mask_size(size, self.vocab_size)
        if self._ended:
            return np.zeros(size, dtype=bool)
        if n is None:
            return self._bool_mask(self._state, size)
        out = unpack_row(self._row(n), size)
        out.flags.writeable = False
        return out

    def logits_mask(self, width: int, *, budget: int | None = None) -> np.ndarray:
        """:meth:`mask` for a model's logits of ``width`` columns, whatever the vocabulary's
        size: a head narrower than its tokenizer (added tokens the model never scores) cannot
        choose the ids past ``width``, so they are cut off here, deliberately."""
        width = _mask_size(width, 0)
        return self.mask(max(width, self.vocab_size), budget=budget)[:width]

    def tokens_to_finish(self) -> int | None:
        """The fewest tokens that complete the output from here, EOS included where the
        vocabulary has one: exact for a (counted) DFA artifact, the bound budget masks use for a PDA
        artifact (:mod:`gramc.runtime.budget`); 0 once ended; None where none is known."""
        if self._ended:
            return 0
        n = self._budget().to_finish(self._state)
        return None if n >= INF else n

    def fill_bitmask(self, out: np.ndarray, budget: int | None = None) -> None:
        """Write the packed mask (see :mod:`gramc.bitmask`) into a uint32/int32 row
        (``budget``: as for :meth:`mask`)."""
        if (budget is None and getattr(out, "shape", None) == self._shape and out.dtype.char in "iI"
                and not self._ended):
            out[...] = self._words(self._state).view(out.dtype)  # the common call (see DFAMatcher's)
            return
        n = None if budget is None else check_budget(budget)
        w = self._shape[0]
        if not isinstance(out, np.ndarray):
            raise TypeError(f"need a numpy int32/uint32 array of at least {w} words, got {type(out).__name__}")
        if out.ndim != 1 or out.shape[0] < w or out.dtype.itemsize != 4 or out.dtype.kind not in "iu":
            raise ValueError(f"need a 1-d int32/uint32 array of at least {w} words, got {out.dtype}{out.shape}")
        if self._ended:
            out.fill(0)
            return
        np.copyto(out[:w], self._row(n).view(out.dtype))
        if out.shape[0] > w:
            out[w:] = 0

    def captures(self, *, final: bool | None = None, vocab: Any = None) -> list[tuple[str, int, int, bytes]]:
        """The captures settled so far (see :mod:`gramc.runtime.captures`): none here, the
        grammar names no captures (an artifact whose grammar does gets a matcher that keeps
        its text)."""
        return []

    def allowed_tokens(self, *, budget: int | None = None) -> np.ndarray:
        """Ids allowed now (ascending), EOS included where the output is complete
        (``budget``: as for :meth:`mask`)."""
        return np.flatnonzero(self.mask(budget=budget))

    # ------------------------------------------------------------ state queries

    def is_complete(self) -> bool:
        """Could generation stop here (the output so far is in the language)?"""
        return self._ended or self._complete(self._state)

    def is_finished(self) -> bool:
        """True once EOS was committed, or when no token at all is allowed now."""
        return self._ended or not self._words(self._state).any()

    def is_failed(self) -> bool:
        """True when the output can never be completed with this vocabulary."""
        return not self.is_complete() and self.is_finished()

    # ------------------------------------------------------------ commits

    def _next(self, state: Any, ended: bool, token: int) -> tuple[Any, bool] | None:
        if ended or not 0 <= token < self.vocab_size:
            return None
        nxt = self._step_token(state, token)
        if nxt is not None:
            return nxt, False
        if token in self._eos and self._complete(state):
            return state, True
        return None

    def _push(self) -> None:
        if self.max_rollback:
            self._history.append((self._state, self._ended))

    def commit_token(self, token_id: int) -> bool:
        """Advance by one token. Returns False (state unchanged) if it is not allowed."""
        nxt = self._next(self._state, self._ended, _token_id(token_id))
        if nxt is None:
            return False
        self._push()
        self._state, self._ended = nxt
        return True

    def commit_tokens(self, token_ids: Iterable[int]) -> int:
        """Commit tokens in order, stopping at the first refused one; returns how many took."""
        n = 0
        for t in _token_ids(token_ids):
            if not self.commit_token(t):
                break
            n += 1
        return n

    def commit_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (e.g. text the decoder inserted). All or nothing.

        Counts as one step for :meth:`rollback`.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"commit_bytes takes bytes (encode text first), got {type(data).__name__}")
        if self._ended:
            return False
        nxt = self._step_bytes(self._state, bytes(data))
        if nxt is None:
            return False
        self._push()
        self._state = nxt
        return True

    def validate_tokens(self, token_ids: Iterable[int]) -> int:
        """Length of the longest prefix of ``token_ids`` that would be accepted (no change)."""
        state, ended, n = self._state, self._ended, 0
        for t in _token_ids(token_ids):
            nxt = self._next(state, ended, _token_id(t))
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
        return [] if self._ended else self._forced(self._state)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` commits (at most ``max_rollback`` are remembered)."""
        n = _count(n, "rollback")
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
        self._state = self._start()
        self._ended = False

    def fork(self) -> "Matcher":
        """An independent copy sharing the artifact (cheap: for beam search)."""
        m = object.__new__(type(self))
        for slot in ("_artifact", "max_rollback", "vocab_size", "_eos", "_shape", "_state", "_ended"):
            setattr(m, slot, getattr(self, slot))
        m._history = self._history.copy()
        m._fork_extra(self)
        return m

    def _fork_extra(self: _M, other: _M) -> None:
        """Copy subclass slots in :meth:`fork` (``other`` is of this matcher's class)."""

    def __repr__(self) -> str:
        flags = "ended" if self._ended else ("complete" if self.is_complete() else "open")
        return f"<{type(self).__name__} {flags}>"


def _count(n: Any, what: str) -> int:
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(f"{what} takes a number of steps (an int), got {n!r}") from None


def _token_id(token: Any) -> int:
    try:
        return operator.index(token)
    except TypeError:
        raise TypeError(f"a token id is an int, got {token!r}") from None


def _mask_size(size: Any, vocab_size: int) -> int:
    try:
        size = operator.index(size)
    except TypeError:
        raise TypeError(f"mask size is an int, got {size!r}") from None
    if size < vocab_size:
        raise ValueError(f"mask size {size} is smaller than the vocabulary ({vocab_size} ids)")
    if size > max(vocab_size, MAX_MASK_SIZE):
        raise ValueError(f"mask size {size} is larger than any vocabulary a reader accepts "
                         f"(max_vocab_size={MAX_MASK_SIZE:,} ids): a logits width, not a byte count?")
    return size


def _token_ids(token_ids: Any) -> Iterable[int]:
    if isinstance(token_ids, (str, bytes)) or not hasattr(token_ids, "__iter__"):
        raise TypeError(f"token ids are an iterable of ints, got {type(token_ids).__name__}")
    return token_ids


class DFAMatcher(Matcher):
    """A matcher over a DFA artifact: the state is a state number; O(1) per query."""

    __slots__ = ("_table", "_views")

    def __init__(self, artifact: Any, max_rollback: int = 16):
        self._table = artifact.token_table
        views = {np.dtype(t).char: self._table.row_views(t) for t in (np.int32, np.uint32)}
        # None when lazy; none for a one-word row either, which numpy would broadcast into a
        # row of any width (the fast path relies on a width mismatch being refused).
        wide = n_words(artifact.vocab.size) > 1
        self._views = {char: rows for char, rows in views.items() if rows is not None and wide}
        super().__init__(artifact, max_rollback)

    def _fork_extra(self, other: DFAMatcher) -> None:
        self._table, self._views = other._table, other._views

    def fill_bitmask(self, out: np.ndarray, budget: int | None = None) -> None:
        # Fast path for the common call: an exact-width int32/uint32 row of an eager table,
        # one slice assignment (cheaper per call than np.copyto; the dtypes match, no cast).
        # A 1-d row of another width cannot take it (numpy refuses to broadcast a row of two
        # words or more, before writing), so that case and every other falls to the checked path.
        if budget is None and not self._ended:
            try:
                views = self._views[out.dtype.char]
                if out.ndim == 1:
                    out[...] = views[self._state]
                    return
            except (AttributeError, KeyError, ValueError):  # not an array, another dtype or
                pass  # width, read-only, or a lazy table (no views)
        super().fill_bitmask(out, budget)

    def commit_token(self, token_id: int) -> bool:
        # Fast path for the common call: a plain int that the table steps (the checks and the
        # EOS / refused cases stay on the general path).
        if type(token_id) is int and not self._ended and 0 <= token_id < self.vocab_size:
            nxt = self._table.next_state(self._state, token_id)
            if nxt != DEAD:
                if self.max_rollback:
                    self._history.append((self._state, False))
                self._state = nxt
                return True
        return super().commit_token(token_id)

    def _budget(self) -> Any:
        return budget_of(self._table)

    def _start(self) -> int:
        return self._artifact.dfa.start

    def _words(self, state: int) -> np.ndarray:
        return self._table.words(state)

    def _bool_mask(self, state: int, size: int) -> np.ndarray:
        return self._table.mask(state, size)

    def _step_token(self, state: int, token: int) -> int | None:
        nxt = self._table.next_state(state, token)
        return None if nxt == DEAD else nxt

    def _step_bytes(self, state: int, data: bytes) -> int | None:
        nxt = self._artifact.dfa.step_bytes(state, data)
        return None if nxt == DEAD else nxt

    def _complete(self, state: int) -> bool:
        return bool(self._artifact.dfa.accept[state])

    def _forced(self, state: int) -> list[int]:
        out = []
        while (token := self._table.forced(state)) >= 0:
            out.append(token)
            state = self._table.next_state(state, token)
        return out

    @property
    def state(self) -> int:
        """The current DFA state (for debugging and batching)."""
        return self._state
