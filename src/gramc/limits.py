"""Resource limits of the compiler, in one documented place.

Every limit guards against a source that would otherwise run away (a regex like
``(a|b){1000}x{1000}`` or a hostile schema). Exceeding one raises
:class:`gramc.errors.LimitExceededError` naming the limit, so a user can raise it knowingly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gramc.errors import LimitExceededError


@dataclass(frozen=True, slots=True)
class Limits:
    """Compile-time resource limits (defaults sized for a 2-core, 24 GiB machine)."""

    #: Thompson NFA states. About 100 bytes each in Python; 2M states is ~200 MB.
    max_nfa_states: int = 2_000_000
    #: DFA states before minimisation. Each costs one row of the transition table and,
    #: once bound, one token-mask row (V/8 bytes: 16 KB for Llama 3).
    max_dfa_states: int = 200_000
    #: Largest counted repetition bound ``{m,n}`` a frontend accepts.
    max_repeat: int = 100_000
    #: Deepest nesting of groups / sub-expressions a frontend accepts (protects the stack).
    max_nesting: int = 500
    #: Wall-clock seconds for one compile (automaton construction and binding).
    max_compile_seconds: float = 600.0

    def check(self, limit: str, value: int) -> None:
        """Raise LimitExceededError when ``value`` exceeds the limit named ``limit``."""
        maximum = getattr(self, limit)
        if value > maximum:
            raise LimitExceededError(limit, value, maximum)


class Deadline:
    """A wall-clock budget checked at safe points of long loops."""

    __slots__ = ("_end", "_seconds")

    def __init__(self, seconds: float):
        self._seconds = seconds
        self._end = time.monotonic() + seconds

    def check(self) -> None:
        """Raise LimitExceededError once the budget is spent."""
        now = time.monotonic()
        if now > self._end:
            spent = round(now - self._end + self._seconds, 1)
            raise LimitExceededError("max_compile_seconds", spent, self._seconds)


DEFAULT_LIMITS = Limits()
