"""Differential test on XGrammar's own structural-tag suite (tests/data/xgrammar_stags.jsonl,
see its README): for every tag gramc compiles, gramc's accept/reject equals XGrammar's (the
installed PyPI package) on the suite's strings and on random strings made from them
(truncations, one-character edits, splices of two strings). A tag gramc refuses must be refused
with an error naming an unimplemented feature or a documented difference
(docs/grammars/structural-tags.md, "Differences from XGrammar"), never a crash.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import gramc
from gramc.errors import GrammarSyntaxError, UnsupportedFeatureError
from gramc.runtime.check import check_artifact
from strategies import mutants

xgr = pytest.importorskip("xgrammar")
from xgrammar.testing import _is_grammar_accept_string  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "xgrammar_stags.jsonl"
SUITE = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
#: GrammarSyntaxError refusals that are documented differences, not unknown faults.
DOCUMENTED = ("free text inside a tag needs a non-empty string end",)
MUTANTS = 30


def test_the_suite_is_there():
    assert len(SUITE) > 100 and all(entry["strings"] for entry in SUITE)


@pytest.mark.parametrize("index", range(len(SUITE)), ids=[e["test"].split("::")[-1][:60] for e in SUITE])
def test_gramc_agrees_with_xgrammar(index):
    entry = SUITE[index]
    doc = json.dumps(entry["stag"])
    try:
        artifact = gramc.compile(doc, format="structural_tag")
    except UnsupportedFeatureError:
        pytest.skip("a feature gramc does not implement")
    except GrammarSyntaxError as err:
        assert any(reason in str(err) for reason in DOCUMENTED), err
        pytest.skip(f"a documented difference: {err}")
    grammar = xgr.Grammar.from_structural_tag(doc)
    strings = entry["strings"] + mutants(entry["strings"], random.Random(index), MUTANTS)
    disagree = [(s, ok) for s in strings
                if (ok := check_artifact(artifact, s.encode("utf-8")).ok) != _is_grammar_accept_string(grammar, s)]
    assert not disagree, f"{entry['test']}: gramc's verdicts differ from xgrammar's on {disagree[:5]}"
