"""Hostile inputs end cleanly: within 60 s and 2 GiB, with the right answer or a documented
gramc error whose message says what and where (issue 18).

The cases are ``tests/hostile_cases.py``'s (``bench/hostile.py`` prints their table). Each
runs in a capped child process; the children of the selected cases run two at a time, once
per session, and each test reads its case's result.
"""

from __future__ import annotations

import os

import pytest

import hostile_cases
from hostile_cases import CASES, Result

WORKERS = min(2, os.cpu_count() or 1)


def _param(case: hostile_cases.Case):
    marks = [pytest.mark.slow] if case.slow else []
    if case.xfail:
        marks.append(pytest.mark.xfail(strict=True, reason=case.xfail))
    return pytest.param(case.name, marks=marks, id=case.name)


@pytest.fixture(scope="session")
def hostile_results(request) -> dict[str, Result]:
    """The results of every selected case, run in parallel the first time one is asked for."""
    selected = {item.callspec.params["name"] for item in request.session.items
                if getattr(item, "callspec", None) is not None and item.originalname == "test_hostile_input_ends_clean"}
    cases = [c for c in CASES if c.name in selected]
    return hostile_cases.run_cases(sorted(cases, key=lambda c: not c.slow), WORKERS)


@pytest.mark.parametrize("name", [_param(c) for c in CASES])
def test_hostile_input_ends_clean(hostile_results, name):
    result = hostile_results[name]
    assert result.clean, f"{name}: {result.why}"


def test_every_case_has_a_clean_end_to_check():
    for case in CASES:
        assert case.ok is not None or (case.error and case.match), case.name
    assert len({c.name for c in CASES}) == len(CASES)


def test_the_caps_stop_a_runaway():
    spin, hog = hostile_cases.CAP_CHECKS
    assert hostile_cases.run_case(spin).why == "ran past 3 s"
    assert "MemoryError" in hostile_cases.run_case(hog).why
