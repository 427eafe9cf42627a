"""The runtime-only install: ``pip install gramc`` (no extras) in a fresh virtual environment
loads ``.gmask`` artifacts and computes their masks, with neither lark nor jsonschema
installed, and a compile that needs them says which extra to install.

The artifacts (a regex DFA and a recursive GBNF PDA over a tiny vocabulary) are compiled in
this process; the fresh environment must give the masks this process gives. The environment
is built by pip from a copy of the package (pyproject.toml's base dependencies resolved from
the package index pip is configured with, as ``.ci/run``'s own install does), so a
compile-only package slipping back into the base dependencies fails here. It takes about 40 s
(a venv and one pip install); an import blocker in a child process would be faster but would
not test what pip installs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gramc

ROOT = Path(__file__).resolve().parents[1]

VOCAB = [b"a", b"b", b"(", b")", b"ab", b")(", b"<eos>"]
#: name -> (source, format, the token ids committed one by one)
ARTIFACTS = {
    "dfa": ("(ab)+", "regex", [0, 1, 4, 6]),
    "pda": ('root ::= "(" root ")" | "ab"', "gbnf", [2, 2, 4, 3, 3, 6]),
}

CHILD = textwrap.dedent("""
    import importlib, json, sys
    from pathlib import Path

    out = {"missing": []}
    for name in ("lark", "jsonschema"):
        try:
            importlib.import_module(name)
        except ImportError:
            out["missing"].append(name)
    import gramc

    out["gramc_file"] = gramc.__file__
    out["lark_compile"] = out["schema_compile"] = None
    for key, src, fmt in (("lark_compile", 'start: "a"', "lark"),
                          ("schema_compile", '{"type": "string"}', "json_schema")):
        try:
            gramc.compile(src, format=fmt)
        except gramc.BackendUnavailableError as e:
            out[key] = str(e)
    for name, tokens in json.loads(sys.argv[2]).items():
        m = gramc.load(Path(sys.argv[1]) / f"{name}.gmask").matcher()
        walk = [[m.mask().tolist(), m.is_complete()]]
        for t in tokens:
            walk.append([m.commit_token(t), m.mask().tolist(), m.is_complete()])
        out[name] = [type(m).__name__, walk]
    print(json.dumps(out))
""")


def _walk(artifact: gramc.Artifact, tokens: list[int]) -> list:
    """What the child prints for one artifact: the masks and completeness along ``tokens``."""
    m = artifact.matcher()
    walk: list = [[m.mask().tolist(), m.is_complete()]]
    for t in tokens:
        walk.append([m.commit_token(t), m.mask().tolist(), m.is_complete()])
    return [type(m).__name__, walk]


@pytest.mark.slow
def test_runtime_only_install_loads_artifacts_without_the_compile_extra(tmp_path):
    vocab = gramc.Vocab.from_list(VOCAB, special_ids=[6], eos_ids=[6])
    expected = {}
    for name, (source, fmt, tokens) in ARTIFACTS.items():
        artifact = gramc.compile(source, format=fmt, vocab=vocab)
        artifact.save(tmp_path / f"{name}.gmask")
        expected[name] = _walk(artifact, tokens)
        assert all(step[0] for step in expected[name][1][1:]), f"{name}: a token of the walk is refused"
    assert expected["dfa"][1][-1][-1] and expected["pda"][1][-1][-1], "the walks end complete"

    package = tmp_path / "package"
    package.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE"):
        shutil.copy(ROOT / name, package / name)
    shutil.copytree(ROOT / "src", package / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    # The child must see only the fresh environment, not this checkout (PYTHONPATH).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", str(package)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr

    tokens = {name: spec[2] for name, spec in ARTIFACTS.items()}
    res = subprocess.run([str(python), "-I", "-c", CHILD, str(tmp_path), json.dumps(tokens)],
                         capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads(res.stdout)
    assert got["missing"] == ["lark", "jsonschema"]
    assert Path(got["gramc_file"]).is_relative_to(venv), got["gramc_file"]
    for key in ("lark_compile", "schema_compile"):
        assert got[key] is not None and "pip install 'gramc[compile]'" in got[key], got[key]
    for name in ARTIFACTS:
        assert got[name] == expected[name], name

    # The CLI says the same, with the exit status of a missing backend.
    (tmp_path / "g.lark").write_text('start: "a"\n')
    gramc_cli = python.with_name("gramc.exe" if os.name == "nt" else "gramc")
    cli = subprocess.run([str(gramc_cli), "compile", str(tmp_path / "g.lark"), "--vocab", "gpt2",
                          "-o", str(tmp_path / "g.gmask")], capture_output=True, text=True, env=env, timeout=300)
    assert cli.returncode == 7 and "pip install 'gramc[compile]'" in cli.stderr, cli.stdout + cli.stderr
