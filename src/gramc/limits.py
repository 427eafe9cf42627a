"""Resource limits, in one documented place: the compiler's and the runtime's caches'.

Every compile limit guards against a source that would otherwise run away (a regex like
``(a|b){1000}x{1000}`` or a hostile schema). Exceeding one raises
:class:`gramc.errors.LimitExceededError` naming the limit, so a user can raise it knowingly.
The same :class:`Limits` reach every frontend, the automaton construction and the
vocabulary binding of an eager compile.

The runtime limits (:class:`RuntimeLimits`) bound what an artifact caches while it serves
masks, so a long-running server's memory stays bounded; exceeding one evicts, never fails.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gramc.errors import GramcError, LimitExceededError, Span


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


@dataclass(frozen=True, slots=True)
class RuntimeLimits:
    """Bounds of the caches an artifact fills while it serves masks (entries, unless named).

    Each cache evicts its least recently used entry past its bound (the Earley parser's
    interned sets and the stack DFA start afresh instead: see docs/architecture.md, "Bounded
    memory"); masks stay exact whatever the bounds, smaller ones only cost recomputation.
    Costs below are per entry with Llama 3 (128,256 tokens: a packed row is 16 KB, a bool
    mask 128 KB); bounds are per artifact unless named process-wide.
    """

    #: Packed mask rows memoised per parse configuration (PDA): 16 KB each.
    mask_rows: int = 4096
    #: Bool masks (``Matcher.mask()``) memoised per configuration or DFA state: 128 KB each.
    bool_masks: int = 256
    #: Packed rows of whole-vocabulary walks per canonical configuration (lazy PDA): 16 KB each.
    walk_rows: int = 4096
    #: Sets the Earley parser interns (configuration keys and continuations, ~0.3 KB each);
    #: past it the parser starts a new generation and every cache keyed by them is dropped.
    interned_sets: int = 500_000
    #: States of the stack DFA (a configuration set and a row of byte-class transitions,
    #: up to ~0.75 KB each for a JSON schema) before it is dropped and grown afresh.
    stack_dfa_states: int = 200_000
    #: Node slices (lazy PDA, lazy DFA): a packed row and its exits each, ~16 KB.
    node_slices: int = 4096
    #: Lazily bound node rows of a PDA (an accepted row, 16 KB, and the uncertain ids).
    node_rows: int = 4096
    #: Loop shapes shared by every table of one vocabulary (process-wide): ~16 KB each.
    shared_slice_shapes: int = 1024
    #: Counted-item shapes (process-wide per vocabulary, and per table): up to ~2 MB each.
    counted_shapes: int = 32
    #: Lazily bound DFA states (their packed row, 16 KB, and token ids / next states).
    dfa_rows: int = 4096
    #: Token-budget masks (``mask(budget=n)``): rows cut to the tokens that fit, by state or
    #: configuration and cut (16 KB each), and as many per-state token orders (ids and
    #: distances sorted, up to 12 bytes per allowed token).
    budget_rows: int = 1024
    #: Token paths the Earley parser memoises for commits (PDA), by node and token (~0.1 KB
    #: each); past it they are dropped and found again.
    commit_paths: int = 65_536
    #: Commit steps a PDA memoises, by configuration key and token: the chart the token
    #: leads to (~0.3 KB; it also keeps alive the chart of the text it came from, which the
    #: steps of one text share: 8 bytes a byte, and the Earley sets that are not repeats).
    commit_steps: int = 4096
    #: Bytes of dense next-state rows (int32 per token) a DFA table may build for commits.
    dense_row_bytes: int = 256 << 20
    #: Artifacts an integration keeps compiled by source (the vLLM processor), process-wide.
    compiled_grammars: int = 64

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "dense_row_bytes" else 1):
                raise GramcError(f"RuntimeLimits.{name} must be a positive integer, got {value!r}")


DEFAULT_RUNTIME_LIMITS = RuntimeLimits()
