"""The shared Lark vectors (lark-vectors.dev.jsonl) through bench/lark_vectors.py: a ratchet.

tests/data/lark_vectors_baseline.json lists every string (and compile-only check) gramc got
right when it was last written by ``python bench/lark_vectors.py --update`` (run it
deliberately, after an improvement). This test fails when one of them goes wrong, and when
the number right falls below the baseline's.
"""

from __future__ import annotations

import json

import pytest

from paths import SHARED

import lark_vectors  # bench/lark_vectors.py: bench/ is on pytest's pythonpath (pyproject.toml)

CORPUS = SHARED / "corpora" / "lark-vectors.dev.jsonl"


@pytest.mark.skipif(not CORPUS.exists(), reason=f"shared corpus not found: {CORPUS}")
def test_lark_vectors_ratchet():
    baseline = json.loads(lark_vectors.BASELINE.read_text())
    results = [lark_vectors.run_record(r) for r in lark_vectors.load(CORPUS)]
    outcomes = lark_vectors.outcomes(results)
    lost = sorted(k for k in baseline["right"] if outcomes.get(k) != "right")
    assert not lost, f"right in the baseline, wrong now: {lost}"
    right = sum(1 for v in outcomes.values() if v == "right")
    assert right >= len(baseline["right"])
