"""Checking a whole text against an automaton, with a useful answer when it fails."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gramc.automata.tables import DEAD, DFATable
from gramc.automata.text import describe_bytes


@dataclass(frozen=True)
class CheckResult:
    """``ok``, or the byte offset where the text stops matching and what was expected there."""

    ok: bool
    offset: int
    expected: str
    message: str


def expected_bytes(dfa: DFATable, state: int) -> list[int]:
    """The bytes that keep ``state`` alive."""
    live_cols = np.flatnonzero(dfa.delta[state, : dfa.n_byte_classes] != DEAD)
    return np.flatnonzero(np.isin(dfa.byte_class, live_cols)).tolist()


def check_bytes(dfa: DFATable, data: bytes) -> CheckResult:
    """Does ``data`` match the whole grammar? If not, where and what was expected."""
    state = dfa.start
    for offset, b in enumerate(data):
        nxt = int(dfa.delta[state, dfa.byte_class[b]])
        if nxt == DEAD:
            exp = describe_bytes(expected_bytes(dfa, state))
            found = describe_bytes([b])
            return CheckResult(False, offset, exp,
                               f"no match at byte {offset}: found {found}, expected {exp or 'end of input'}")
        state = nxt
    if dfa.accept[state]:
        return CheckResult(True, len(data), "", "ok: the text matches")
    exp = describe_bytes(expected_bytes(dfa, state))
    return CheckResult(False, len(data), exp, f"incomplete: the text ends at byte {len(data)}, expected {exp}")
