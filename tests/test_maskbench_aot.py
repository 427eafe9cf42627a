"""bench/maskbench.py's gramc-aot engine: compile to a .gmask in a child process, load, match.

Two small schemas (one regular, one recursive) with instances whose validity jsonschema decides,
on the GPT-2 vocabulary: the loaded artifact must give jsonschema's verdict on every instance, the
per-schema records must carry the ahead-of-time figures, the artifact must be as long as the one an
in-process compile writes, and a compile process over the RSS cap must be a compile error.
"""

from __future__ import annotations

import os

import jsonschema
import pytest

from paths import SHARED, shared_path

import maskbench  # bench/maskbench.py: bench/ is on pytest's pythonpath (pyproject.toml)

SCHEMAS = {
    "regular": {"type": "object", "additionalProperties": False, "required": ["name"],
                "properties": {"name": {"type": "string", "maxLength": 5}, "age": {"type": "integer"}}},
    "recursive": {"type": "object", "properties": {"a": {"type": "integer"}}},
}
INSTANCES = [{"name": "bob", "age": 3}, {"name": "bob"}, {"name": "toolong"}, {"age": 3},
             {"a": 1, "b": [1, {"c": None}]}, {"a": "x"}, {"a": -2}, [1]]


def records() -> list[dict]:
    """The schemas with every instance, each labelled valid or not by jsonschema."""
    return [{"id": name, "schema": schema,
             "tests": [{"data": d, "valid": jsonschema.Draft202012Validator(schema).is_valid(d)}
                       for d in INSTANCES]}
            for name, schema in SCHEMAS.items()]


@pytest.fixture(scope="module")
def gpt2_bench():
    shared_path("vocabs", "gpt2.tiktoken")
    os.environ["GRAMC_BENCH_VOCABS"] = str(SHARED / "vocabs")  # read by the forked workers


def test_aot_records_and_verdicts(gpt2_bench):
    import gramc

    recs = records()
    assert all(any(t["valid"] for t in r["tests"]) and not all(t["valid"] for t in r["tests"]) for r in recs)
    run = maskbench.run_engine("gramc-aot", recs, vocab_key="gpt2", time_limit_s=120.0, log=lambda s: None)
    by_id = {r["id"]: r for r in run["results"]}
    for name, schema in SCHEMAS.items():
        r = by_id[name]
        assert r["outcome"] == "passing", r
        assert r["compile_s"] > 0 and r["load_ms"] > 0 and r["load_cpu_ms"] > 0 and r["first_mask_ms"] > 0
        assert r["compile_peak_rss_mb"] > 0
        expected = gramc.compile(maskbench.json.dumps(schema), format="json_schema", vocab="gpt2").to_bytes()
        assert r["artifact_bytes"] == len(expected)
        assert 0 < len(r["commit_ns"]) <= r["n_tokens"]
    assert {by_id[n]["kind"] for n in SCHEMAS} == {"dfa", "pda"}

    summary = maskbench.summarize(run, timed=True)
    for key in ("compile_s", "compile_peak_rss_mb", "artifact_mb", "load_ms", "load_cpu_ms"):
        assert summary[key]["n"] == len(SCHEMAS) and summary[key]["max"] >= summary[key]["p50"] > 0
    assert summary["commit_us"]["n"] == sum(len(r["commit_ns"]) for r in run["results"])

    meta = {"selection": "test", "vocab": "gpt2", "n_schemas": len(recs), "n_tests": len(INSTANCES) * len(recs),
            "workers": 1, "timed": True, "time_limit_s": 120.0, "test_time_limit_s": 120.0, "machine": {}}
    data = maskbench.assemble(meta, [run], timed=True)
    assert "commit_ns" not in data["results"]["gramc-aot"][0]
    md = maskbench.markdown(data)
    assert any(line.startswith("| gramc-aot | ") and line.count("|") == 17 for line in md.splitlines()), md


def test_aot_rss_cap_is_a_compile_error(gpt2_bench):
    run = maskbench.run_engine("gramc-aot", records()[:1], vocab_key="gpt2", aot_rss_cap_gb=0.01,
                               log=lambda s: None)
    (r,) = run["results"]
    assert r["outcome"] == "compile error" and r["error_class"] == "MemoryCap", r
    assert r["compile_peak_rss_mb"] > 0.01 * 1024
    assert "load_ms" not in r and "load_cpu_ms" not in r
