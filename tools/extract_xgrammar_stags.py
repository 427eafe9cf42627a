#!/usr/bin/env python
"""Extract the structural tags and test strings of xgrammar's own structural-tag tests into
tests/data/xgrammar_stags.jsonl (read by tests/test_structural_tag_xgrammar_suite.py).

xgrammar's tests build each tag in Python and check strings against it, so their data cannot be
read off the source text reliably. This runs their test files under pytest with two functions
of the installed (PyPI) xgrammar wrapped: ``Grammar.from_structural_tag`` records the tag each
grammar came from (as the JSON document, the older ``tags, triggers`` call included) and
``xgrammar.testing._is_grammar_accept_string`` records each string checked against such a
grammar. Nothing of their code is kept: only the tag documents and the strings, one JSON object
per tag: ``{"test": <the pytest node id>, "stag": <document>, "strings": [...]}``.

    python tools/extract_xgrammar_stags.py /path/to/xgrammar/git/dir --out tests/data/xgrammar_stags.jsonl

The argument is a git directory (or a checkout) of github.com/mlc-ai/xgrammar; the files are
read at its HEAD and the commit is recorded in tests/data/xgrammar_stags.README.md by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

FILES = ["tests/python/test_structural_tag_converter.py", "tests/python/test_grammar_matcher_structural_tag.py",
         "tests/python/test_builtin_structural_tag.py", "tests/conftest.py"]

PLUGIN = r'''
import json, os
import pytest
import xgrammar as xgr
import xgrammar.testing

_OUT = os.environ["STAG_RECORD"]
_of_grammar = {}  # id(grammar) -> (grammar, document) (the grammar kept alive: ids stay unique)
_current = [""]


def _doc(args, kwargs):
    if len(args) == 1 and not kwargs:
        st = args[0]
        if isinstance(st, str):
            return json.loads(st)
        if isinstance(st, dict):
            return st
        return json.loads(st.model_dump_json())
    tags, triggers = (list(args) + [kwargs.get("tags"), kwargs.get("triggers")])[:2] if len(args) < 2 else args[:2]
    return {"type": "structural_tag", "triggers": list(triggers),
            "structures": [{"begin": t.begin, "schema": t.schema_ if hasattr(t, "schema_") else t.model_dump()["schema"],
                            "end": t.end} for t in tags]}


_orig_from = xgr.Grammar.from_structural_tag.__func__ if hasattr(xgr.Grammar.from_structural_tag, "__func__") \
    else xgr.Grammar.from_structural_tag


def _from_structural_tag(*args, **kwargs):
    g = _orig_from(*args, **kwargs)
    try:
        _of_grammar[id(g)] = (g, _doc(args, kwargs))
    except Exception as err:  # a tag we cannot serialise: not recorded
        print("not recorded:", type(err).__name__, err)
    return g


_orig_accept = xgrammar.testing._is_grammar_accept_string


def _accept(grammar, input_str, **kwargs):
    hit = _of_grammar.get(id(grammar))
    if hit is not None and isinstance(input_str, str):
        with open(_OUT, "a") as f:
            f.write(json.dumps({"test": _current[0], "stag": hit[1], "string": input_str}) + "\n")
    return _orig_accept(grammar, input_str, **kwargs)


xgr.Grammar.from_structural_tag = staticmethod(_from_structural_tag)
xgrammar.testing._is_grammar_accept_string = _accept


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _current[0] = item.nodeid
    mod = item.module
    if getattr(mod, "_is_grammar_accept_string", None) is _orig_accept:
        mod._is_grammar_accept_string = _accept
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", help="a git directory of mlc-ai/xgrammar")
    ap.add_argument("--out", default="tests/data/xgrammar_stags.jsonl")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for f in FILES:
            text = subprocess.run(["git", "--git-dir", args.repo, "show", f"HEAD:{f}"], check=True,
                                  capture_output=True, text=True).stdout
            (root / Path(f).name).write_text(text)
        (root / "record_plugin.py").write_text(PLUGIN)
        record = root / "record.jsonl"
        env = {**os.environ, "STAG_RECORD": str(record), "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}
        tests = [str(root / Path(f).name) for f in FILES if "/test_" in f]
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "record_plugin", "-p", "no:cacheprovider",
                        "--rootdir", str(root), *tests], cwd=root, env=env)
        by_tag: dict[str, dict] = {}
        for line in record.read_text().splitlines() if record.exists() else []:
            rec = json.loads(line)
            key = json.dumps(rec["stag"], sort_keys=True)
            entry = by_tag.setdefault(key, {"test": rec["test"], "stag": rec["stag"], "strings": []})
            if rec["string"] not in entry["strings"]:
                entry["strings"].append(rec["string"])
    with open(args.out, "w") as f:
        for entry in by_tag.values():
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    print(f"{len(by_tag)} structural tags, {sum(len(e['strings']) for e in by_tag.values())} strings -> {args.out}")


if __name__ == "__main__":
    main()
