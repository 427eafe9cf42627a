"""MaskBench on a fixed sample of the dev corpus, gramc only: a ratchet on the passing count.

The protocol is bench/maskbench.py's (Llama 3 tokens, both serialisations of every instance, a
mask check before every token, EOS at the end). The sample is tests/data/maskbench_sample_ids.txt
(120 ids drawn with a fixed seed). gramc runs it with lazy binding (the same masks as eager
binding, a shorter compile) in two worker processes. Ids that were compile errors in the baseline
get a short compile limit (maskbench.RETRY_LIMIT_S); the others a long one (RATCHET_LIMIT_S), so
that a loaded machine does not turn a pass into a timeout.
tests/data/maskbench_baseline.json lists each id's outcome when it was last written by
``python bench/maskbench.py --update-baseline`` (run it deliberately, after an improvement). This
test fails on any invalidation error (an invalid instance accepted) and on any id that passed in
the baseline and no longer does.
"""

from __future__ import annotations

import collections
import json
import os

import pytest

from paths import SHARED, shared_path

import maskbench  # bench/maskbench.py: bench/ is on pytest's pythonpath (pyproject.toml)


@pytest.mark.slow
def test_maskbench_sample_ratchet():
    corpus = shared_path("corpora", "maskbench.dev.jsonl.gz")
    shared_path("vocabs", "llama3-tokenizer.json")
    os.environ["GRAMC_BENCH_VOCABS"] = str(SHARED / "vocabs")  # read by the forked workers
    ids = maskbench.read_ids(maskbench.SAMPLE_IDS)
    baseline = json.loads(maskbench.BASELINE.read_text())
    records = maskbench.select(maskbench.load_corpus(corpus), ids=ids)
    outcomes = maskbench.sample_outcomes(records, workers=2, baseline=baseline, log=lambda s: None)

    invalidation = {i: r["invalidation_failures"][:1] for i, r in outcomes.items()
                    if r.get("n_invalidation_failures")}
    assert not invalidation, f"invalid instances accepted: {invalidation}"

    lost = {i: (outcomes[i]["outcome"], outcomes[i].get("error") or outcomes[i].get("validation_failures", [])[:1])
            for i in baseline["ids_passing"] if outcomes[i]["outcome"] != "passing"}
    assert not lost, f"schemas that passed in the baseline and no longer do: {lost}"

    passing = sum(1 for r in outcomes.values() if r["outcome"] == "passing")
    counts = collections.Counter(r["outcome"] for r in outcomes.values())
    assert passing >= baseline["passing"], (passing, baseline["passing"], dict(counts))
