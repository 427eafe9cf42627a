"""The runtime-only install: ``pip install gramc`` (no extras) in a fresh virtual environment
loads ``.gmask`` artifacts and computes their masks, with none of lark, jsonschema and numba
installed; a compile that needs lark or jsonschema, and an artifact that walks tokens as it
decodes (which needs numba), say which extra to install; with ``gramc[numba]`` those artifacts
give their masks too.

The artifacts (a regex DFA, whose masks are stored rows; a recursive GBNF PDA, whose masks are
stored for the configurations up to six calls deep, and walked at run time deeper; and a
counted repetition, which walks tokens at run time) are compiled over a tiny vocabulary in
this process; the fresh environment must give the masks this process gives. The environment
is built by pip from a copy of the package (pyproject.toml's base dependencies resolved from
the package index pip is configured with, as ``.ci/run``'s own install does), so a
compile-only package slipping back into the base dependencies fails here. It takes about a
minute (a venv and two pip installs); an import blocker in a child process would be faster but
would not test what pip installs.
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

VOCAB = [b"a", b"b", b"(", b")", b"ab", b")(", b"<eos>", b"))"]
#: name -> (source, format, the token ids committed one by one)
ARTIFACTS = {
    "dfa": ("(ab)+", "regex", [0, 1, 4, 6]),
    "pda_stored": ('root ::= "(" root ")" | "ab"', "gbnf", [2, 2, 4, 7, 6]),
    "pda": ('root ::= "(" root ")" | "ab"', "gbnf", [2] * 10 + [4, 7, 7, 7, 7, 7, 6]),
    "counted": ("(ab){1,5000}", "regex", [0, 1, 4, 4, 6]),
}
#: The artifacts whose masks need the token walk at run time, hence numba: a PDA nested
#: deeper than its stored configurations checks the tokens that cross a rule boundary
#: (``))``) on the stack, a counted DFA walks its counter.
WALKING = {"pda", "counted"}

CHILD = textwrap.dedent("""
    import importlib, json, sys
    from pathlib import Path

    out = {"missing": []}
    for name in ("lark", "jsonschema", "numba"):
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
    # the decoder's vocabulary: the artifacts bind it by fingerprint
    vocab = gramc.Vocab.from_list([t.encode() for t in json.loads(sys.argv[3])], special_ids=[6], eos_ids=[6])
    for name, tokens in json.loads(sys.argv[2]).items():
        try:
            m = gramc.load(Path(sys.argv[1]) / f"{name}.gmask", vocab=vocab).matcher()
            walk = [[m.mask().tolist(), m.is_complete()]]
            for t in tokens:
                walk.append([m.commit_token(t), m.mask().tolist(), m.is_complete()])
            out[name] = [type(m).__name__, walk]
        except gramc.BackendUnavailableError as e:
            out[name] = str(e)
    print(json.dumps(out))
""")


def _walk(artifact: gramc.Artifact, tokens: list[int]) -> list:
    """What the child prints for one artifact: the masks and completeness along ``tokens``."""
    m = artifact.matcher()
    walk: list = [[m.mask().tolist(), m.is_complete()]]
    for t in tokens:
        walk.append([m.commit_token(t), m.mask().tolist(), m.is_complete()])
    return [type(m).__name__, walk]


def _install(python: Path, target: str, env: dict) -> None:
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", target],
                         capture_output=True, text=True, env=env, timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr


def _child(python: Path, tmp_path: Path, env: dict) -> dict:
    """What :data:`CHILD` finds in the environment of ``python``."""
    tokens = {name: spec[2] for name, spec in ARTIFACTS.items()}
    res = subprocess.run([str(python), "-I", "-c", CHILD, str(tmp_path), json.dumps(tokens),
                          json.dumps([t.decode() for t in VOCAB])],
                         capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)


def _cli_compile(python: Path, source: Path, env: dict) -> subprocess.CompletedProcess:
    gramc_cli = python.with_name("gramc.exe" if os.name == "nt" else "gramc")
    return subprocess.run([str(gramc_cli), "compile", str(source), "--vocab", "gpt2", "-o", str(source) + ".gmask"],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_runtime_only_install_loads_artifacts_without_the_compile_extra(tmp_path):
    vocab = gramc.Vocab.from_list(VOCAB, special_ids=[6], eos_ids=[6])
    expected = {}
    for name, (source, fmt, tokens) in ARTIFACTS.items():
        artifact = gramc.compile(source, format=fmt, vocab=vocab)
        artifact.save(tmp_path / f"{name}.gmask")
        expected[name] = _walk(artifact, tokens)
        assert all(step[0] for step in expected[name][1][1:]), f"{name}: a token of the walk is refused"
        assert expected[name][1][-1][-1], f"{name}: the walk ends complete"
    assert [expected[name][0] for name in ARTIFACTS] == ["DFAMatcher", "PDAMatcher", "PDAMatcher", "CountedDFAMatcher"]

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
    _install(python, str(package), env)

    got = _child(python, tmp_path, env)
    assert got["missing"] == ["lark", "jsonschema", "numba"]
    assert Path(got["gramc_file"]).is_relative_to(venv), got["gramc_file"]
    for key in ("lark_compile", "schema_compile"):
        assert got[key] is not None and "pip install 'gramc[compile]'" in got[key], got[key]
    for name in ARTIFACTS:
        if name in WALKING:
            assert "pip install 'gramc[numba]'" in got[name], got[name]
        else:
            assert got[name] == expected[name], name

    # The CLI says the same, with the exit status of a missing backend: a Lark grammar needs
    # the compile extra, and binding a regex to a vocabulary needs numba.
    (tmp_path / "g.lark").write_text('start: "a"\n')
    (tmp_path / "g.regex").write_text("(ab)+\n")
    for source, extra in (("g.lark", "compile"), ("g.regex", "numba")):
        cli = _cli_compile(python, tmp_path / source, env)
        assert cli.returncode == 7 and f"pip install 'gramc[{extra}]'" in cli.stderr, cli.stdout + cli.stderr

    # The extra that the message names brings what the walking artifact needs.
    _install(python, f"{package}[numba]", env)
    got = _child(python, tmp_path, env)
    assert got["missing"] == ["lark", "jsonschema"]
    for name in ARTIFACTS:
        assert got[name] == expected[name], name
