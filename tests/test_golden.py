"""Golden artifacts: a fresh build must reproduce every committed file byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from gramc.cli.golden import build_case, run_golden

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CASES = sorted(p.name for p in (GOLDEN / "cases").iterdir() if p.is_dir())


def test_there_are_a_dozen_cases():
    assert len(CASES) >= 12


@pytest.mark.parametrize("case", CASES)
def test_golden_case_rebuilds_identically(case):
    rebuilt = build_case(GOLDEN / "cases" / case)
    for name, data in rebuilt.items():
        committed = (GOLDEN / "cases" / case / name).read_bytes()
        assert committed == data, f"{case}/{name} differs: run `gramc golden update` if intended"


def test_build_is_deterministic_across_runs():
    case = GOLDEN / "cases" / CASES[0]
    assert build_case(case) == build_case(case)


def test_check_reports_a_changed_artifact(tmp_path):
    case = tmp_path / "cases" / "one"
    case.mkdir(parents=True)
    (case / "source.regex").write_text("ab+\n")
    assert run_golden(tmp_path, update=True)  # writes the files
    assert run_golden(tmp_path, update=False) == []
    (case / "source.regex").write_text("ab*\n")
    problems = run_golden(tmp_path, update=False)
    assert any("program.gmask" in p for p in problems) and any("automaton.txt" in p for p in problems)
