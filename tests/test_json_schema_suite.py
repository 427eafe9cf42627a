"""The official JSON-Schema-Test-Suite (draft 2020-12) through gramc: a ratchet per case.

bench/json_schema_suite.py compiles each schema (unbound, byte level) and checks
``json.dumps(data)`` with ``check_artifact``. tests/data/json_schema_suite_baseline.json stores
each case's category (correct, wrong-accept, approximated, wrong-reject, compile-error) as of the
last ``python bench/json_schema_suite.py --update``; this test fails only when a case that was
correct is correct no longer.
"""

from __future__ import annotations

import collections
import json

from paths import shared_path

import json_schema_suite as suite  # bench/: on pytest's pythonpath (pyproject.toml)


def test_json_schema_suite_no_regressions():
    path = shared_path("corpora", "json-schema-test-suite.jsonl")
    baseline = json.loads(suite.BASELINE.read_text())["cases"]
    records = suite.load_suite(path)
    result = suite.run_suite(records, workers=2)
    got = result["cases"]
    regressed = {cid: got.get(cid) for cid, cat in baseline.items() if cat == "correct" and got.get(cid) != "correct"}
    errors = {g["id"]: g.get("error") for g in result["groups"] if g.get("error")}
    detail = {cid: (cat, errors.get(cid.rsplit("/", 1)[0])) for cid, cat in regressed.items()}
    counts = collections.Counter(got.values())
    assert not regressed, f"{len(regressed)} cases no longer correct ({dict(counts)}): {detail}"
