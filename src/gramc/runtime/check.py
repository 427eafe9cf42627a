"""Checking a whole text against an automaton, with a useful answer when it fails."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD, DFATable
from gramc.automata.text import describe_bytes
from gramc.runtime.earley import EarleyParser


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


def check_artifact(artifact, data: bytes) -> CheckResult:
    """Does ``data`` match the artifact's whole grammar (DFA or PDA), and, where the artifact
    has a ``uniqueItems`` plan, are the items of its unique arrays distinct?"""
    if artifact.kind == "dfa":
        result = check_bytes(artifact.dfa, data)
    elif artifact.kind == "counted":
        result = check_bytes_counted(artifact.cdfa, data)
    else:
        result = check_bytes_pda(artifact.pda, data)
    if result.ok and "unique" in artifact.meta:
        return check_unique(artifact.meta["unique"], data)
    return result


def check_unique(plan: object, data: bytes) -> CheckResult:
    """``data`` (a text the grammar accepts) against a ``uniqueItems`` plan: the first byte
    that completes an item equal to an earlier one of its array, if any."""
    from gramc.runtime.unique import Plan, Tracker

    tracker: Tracker | None = Tracker(Plan(plan))
    for offset in range(len(data)):
        assert tracker is not None
        tracker = tracker.feed(data[offset : offset + 1])
        if tracker is None:
            return CheckResult(False, offset, "", f"no match at byte {offset}: it completes an item "
                                                  "equal to an earlier one of a uniqueItems array")
    return CheckResult(True, len(data), "", _OK)


def _failure(offset: int, expected: list[int], found: int | None) -> CheckResult:
    exp = describe_bytes(expected)
    if found is None:
        return CheckResult(False, offset, exp, f"incomplete: the text ends at byte {offset}, expected {exp}")
    return CheckResult(False, offset, exp, f"no match at byte {offset}: found {describe_bytes([found])}, "
                                           f"expected {exp or 'end of input'}")


_OK = "ok: the text matches"


def check_bytes_pda(pda: PDATable, data: bytes) -> CheckResult:
    """:func:`check_bytes` for a context-free grammar (an Earley parse)."""
    parser = EarleyParser(pda)
    chart = parser.initial().sets  # a fresh list: this parse alone appends to it
    for offset, b in enumerate(data):
        s = parser.scan_byte(chart, b)
        if s is None:
            return _failure(offset, parser.next_bytes(chart[-1]), b)
        chart.append(s)
    if parser.is_complete(chart[-1]):
        return CheckResult(True, len(data), "", _OK)
    return _failure(len(data), parser.next_bytes(chart[-1]), None)


def check_bytes(dfa: DFATable, data: bytes) -> CheckResult:
    """Does ``data`` match the whole grammar? If not, where and what was expected."""
    state = dfa.start
    for offset, b in enumerate(data):
        nxt = int(dfa.delta[state, dfa.byte_class[b]])
        if nxt == DEAD:
            return _failure(offset, expected_bytes(dfa, state), b)
        state = nxt
    if dfa.accept[state]:
        return CheckResult(True, len(data), "", _OK)
    return _failure(len(data), expected_bytes(dfa, state), None)


def check_bytes_counted(cdfa, data: bytes) -> CheckResult:
    """:func:`check_bytes` for a regular grammar with counters (a
    :class:`~gramc.automata.counted.CountedDFA`)."""
    state = cdfa.start
    for offset, b in enumerate(data):
        nxt = cdfa.step_byte(state, b)
        if nxt == DEAD:
            return _failure(offset, np.flatnonzero(cdfa.live_bytes(state)).tolist(), b)
        state = nxt
    if cdfa.accepts(state):
        return CheckResult(True, len(data), "", _OK)
    return _failure(len(data), np.flatnonzero(cdfa.live_bytes(state)).tolist(), None)
