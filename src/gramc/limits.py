"""Resource limits of the compiler, in one documented place.

Every limit guards against a source that would otherwise run away (a regex like
``(a|b){1000}x{1000}`` or a hostile schema). Exceeding one raises
:class:`gramc.errors.LimitExceededError` naming the limit, so a user can raise it knowingly.
The same :class:`Limits` reach every frontend, the automaton construction and the
vocabulary binding of an eager compile.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gramc.errors import LimitExceededError, Span


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
    #: Wall-clock seconds for one compile: parsing, automaton construction and binding.
    max_compile_seconds: float = 600.0
    #: Bytes the large arrays of one compile may take (transition tables, token rows).
    #: Estimated from their shapes before they are allocated; 4 GiB fits a laptop and a
    #: CI runner, and is far above what a compile that gives a usable artifact needs.
    max_memory: int = 4 << 30

    def check(self, limit: str, value: int, where: str = "", span: Span | None = None) -> None:
        """Raise LimitExceededError when ``value`` exceeds the limit named ``limit``;
        ``where`` and ``span`` say where (for the message)."""
        maximum = getattr(self, limit)
        if value > maximum:
            raise LimitExceededError(limit, value, maximum, where, span)

    def check_memory(self, estimate: int, where: str) -> None:
        """Raise LimitExceededError when ``estimate`` bytes exceed ``max_memory``; call it
        before allocating them, with ``where`` naming the phase."""
        self.check("max_memory", int(estimate), where)


class Deadline:
    """A wall-clock budget checked at safe points of long loops.

    ``stage`` names what is running, for the error message; :meth:`during` gives the same
    budget under another stage's name, so one compile shares one deadline.
    """

    __slots__ = ("_end", "_seconds", "stage")

    def __init__(self, seconds: float, stage: str = ""):
        self._seconds = seconds
        self._end = time.monotonic() + seconds
        self.stage = stage

    def during(self, stage: str) -> "Deadline":
        """This deadline, reported as spent during ``stage``."""
        other = Deadline.__new__(Deadline)
        other._seconds, other._end, other.stage = self._seconds, self._end, stage
        return other

    def check(self) -> None:
        """Raise LimitExceededError once the budget is spent."""
        now = time.monotonic()
        if now > self._end:
            spent = round(now - self._end + self._seconds, 1)
            where = f"while {self.stage}" if self.stage else ""
            raise LimitExceededError("max_compile_seconds", spent, self._seconds, where)


DEFAULT_LIMITS = Limits()
LimitExceededError.raisable = frozenset(Limits.__dataclass_fields__)
