"""The dense DFA table: the one boundary between symbolic automata and numpy arrays.

A :class:`DFATable` is a minimal DFA over an alphabet of byte equivalence classes plus one
column per special token the grammar names. State 0 is the dead state (absorbing, never
accepting, no completion possible); every other state can still reach an accepting state,
which is what makes "not dead" mean "viable prefix" in the mask computation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DEAD = 0


@dataclass(frozen=True, eq=False)
class DFATable:
    """A DFA as arrays.

    Attributes:
        delta: int32 ``[S, C]`` next state per (state, column); columns ``0..n_byte_classes-1``
            are byte classes, the rest are special-token columns.
        byte_class: uint8 ``[256]`` the column of each byte.
        token_ids: int32 ``[T]`` the special-token id of each token column, ascending.
        accept: bool ``[S]`` accepting states.
        start: the start state (0 when the language is empty).
    """

    delta: np.ndarray
    byte_class: np.ndarray
    token_ids: np.ndarray
    accept: np.ndarray
    start: int
    _forced: list = field(default_factory=list, repr=False)

    @property
    def n_states(self) -> int:
        return int(self.delta.shape[0])

    @property
    def n_byte_classes(self) -> int:
        return int(self.delta.shape[1]) - int(self.token_ids.shape[0])

    def step_bytes(self, state: int, data: bytes) -> int:
        """The state after reading ``data`` from ``state`` (DEAD if it dies)."""
        delta, cls = self.delta, self.byte_class
        for b in data:
            state = int(delta[state, cls[b]])
            if state == DEAD:
                break
        return state

    def step_token(self, state: int, token_id: int) -> int:
        """The state after the special-token column of ``token_id`` (DEAD if none)."""
        col = int(np.searchsorted(self.token_ids, token_id))
        if col < len(self.token_ids) and self.token_ids[col] == token_id:
            return int(self.delta[state, self.n_byte_classes + col])
        return DEAD

    def fullmatch(self, data: bytes) -> bool:
        """Is ``data`` in the language?"""
        return bool(self.accept[self.step_bytes(self.start, data)])

    def forced_steps(self) -> tuple[np.ndarray, np.ndarray]:
        """Per state, the byte the grammar forces next and the state after it.

        A state forces its next byte when it is not accepting, has exactly one live byte and
        no live special-token column. Returns ``(byte, next)`` int32 arrays, -1 where nothing
        is forced. Following them from a state spells its forced (jump-forward) string; they
        never cycle, because a cycle of such states could not reach an accepting state.
        """
        if not self._forced:
            self._forced.extend(self._compute_forced())
        return self._forced[0], self._forced[1]

    def _compute_forced(self) -> tuple[np.ndarray, np.ndarray]:
        nbc = self.n_byte_classes
        sizes = np.bincount(self.byte_class, minlength=nbc)
        live = self.delta[:, :nbc] != DEAD
        live_bytes = (live * sizes).sum(axis=1)
        tokens_live = (self.delta[:, nbc:] != DEAD).any(axis=1)
        single = (live_bytes == 1) & ~tokens_live & ~self.accept
        single[DEAD] = False
        col = np.argmax(live, axis=1)
        first_byte = np.full(nbc, -1, dtype=np.int32)
        first_byte[self.byte_class[::-1]] = np.arange(255, -1, -1, dtype=np.int32)
        byte = np.where(single, first_byte[col], -1).astype(np.int32)
        nxt = np.where(single, self.delta[np.arange(self.n_states), col], -1).astype(np.int32)
        return byte, nxt

    def forced_bytes(self, state: int) -> bytes:
        """The bytes forced from ``state`` before the grammar offers a choice."""
        byte, nxt = self.forced_steps()
        out = bytearray()
        while byte[state] >= 0:
            out.append(int(byte[state]))
            state = int(nxt[state])
        return bytes(out)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays to store in an artifact (names without a section prefix)."""
        return {
            "delta": self.delta,
            "byte_class": self.byte_class,
            "token_ids": self.token_ids,
            "accept": self.accept,
        }
