"""Deeply nested and long-chained sources compile, or fail with a gramc error naming the limit.

Every walk over user-controlled structure (IR rewrites and printers, NFA construction, the
grammar passes, the JSON Schema walker) must survive inputs far deeper than Python's stack:
a chain of 2,000 rules inlines to IR 2,000 deep. Each case runs in a child process capped at
60 s of wall time and 2 GiB of address space, so a runaway fails the test instead of hanging
it; the child forbids changing Python's recursion limit (a library must not). Where a case
compiles, strings in and out of the language are checked on the compiled automaton (``gramc
check``'s code path), and for JSON Schema against the ``jsonschema`` validator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

import gramc

WALL_SECONDS = 60
MEMORY_BYTES = 2 << 30

# Compiles the source file argv[1] (format argv[2]) and checks the strings of argv[3] (a JSON
# list) on the artifact; prints one JSON line: the kind and the answers, or the error.
_CHILD = textwrap.dedent("""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
    def setrecursionlimit(limit):
        raise AssertionError("a library must not change the process's recursion limit")
    sys.setrecursionlimit = setrecursionlimit
    import gramc
    from gramc.errors import GramcError
    from gramc.runtime.check import check_artifact
    source = open(sys.argv[1], encoding="utf-8").read()
    try:
        artifact = gramc.compile(source, sys.argv[2])
    except GramcError as err:
        print(json.dumps({{"error": type(err).__name__, "limit": getattr(err, "limit", None),
                          "message": str(err)}}))
    else:
        answers = [check_artifact(artifact, s.encode()).ok for s in json.loads(sys.argv[3])]
        print(json.dumps({{"kind": artifact.kind, "answers": answers}}))
""").format(memory=MEMORY_BYTES)


def compile_capped(tmp_path: Path, source: str, fmt: str, strings: list[str] = ()) -> dict:
    """Compile ``source`` in a capped child process; its JSON answer (see ``_CHILD``)."""
    path = tmp_path / "source.txt"
    path.write_text(source, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(gramc.__file__).parents[1]))
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(path), fmt, json.dumps(list(strings))],
                              capture_output=True, text=True, timeout=WALL_SECONDS, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"compiling took over {WALL_SECONDS} s")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def chain(fmt: str, n: int) -> str:
    """``n`` rules, each a letter and the next rule: the language is ``a{n} z``."""
    if fmt == "gbnf":
        return "root ::= r0\n" + "".join(f'r{i} ::= "a" r{i + 1}\n' for i in range(n)) + f'r{n} ::= "z"\n'
    if fmt == "lark":
        return "start: r0\n" + "".join(f'r{i}: "a" r{i + 1}\n' for i in range(n)) + f'r{n}: "z"\n'
    return "root = r0 ;\n" + "".join(f'r{i} = "a" , r{i + 1} ;\n' for i in range(n)) + f'r{n} = "z" ;\n'


@pytest.mark.parametrize("n", [200, 2000])
@pytest.mark.parametrize("fmt", ["gbnf", "lark", "ebnf"])
def test_a_long_chain_of_rules_compiles_to_its_language(tmp_path, fmt, n):
    out = compile_capped(tmp_path, chain(fmt, n), fmt, ["a" * n + "z", "a" * (n - 1) + "z", "a" * (n + 1) + "z"])
    assert out == {"kind": "dfa", "answers": [True, False, False]}


def test_a_long_recursive_cycle_compiles_to_its_language(tmp_path):
    # r0 -> r1 -> ... -> r299 -> r0: each rule reads "a" (the last one "b") and goes on, or ends with "z".
    n = 300
    source = "root ::= r0\n" + "".join(f'r{i} ::= "a" r{i + 1} | "z"\n' for i in range(n - 1)) + \
        f'r{n - 1} ::= "b" r0 | "z"\n'
    around = "a" * (n - 1) + "b"
    out = compile_capped(tmp_path, source, "gbnf", ["z", "a" * 7 + "z", around * 2 + "aaz", "a" * n + "z"])
    assert out == {"kind": "pda", "answers": [True, True, True, False]}


def nested_objects(depth: int, required: bool) -> tuple[dict, str]:
    """Objects nested ``depth`` deep under key ``x``, an integer at the bottom; an instance."""
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}, "additionalProperties": False}
        if required:
            schema["required"] = ["x"]
    return schema, '{"x":' * depth + "1" + "}" * depth


def defs_chain(depth: int) -> tuple[dict, str]:
    """The same nesting written as a chain of ``$defs`` each referring to the next."""
    defs = {f"d{i}": {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{i + 1}"}},
                      "required": ["x"], "additionalProperties": False} for i in range(depth)}
    defs[f"d{depth}"] = {"type": "integer"}
    return {"$ref": "#/$defs/d0", "$defs": defs}, '{"x":' * depth + "1" + "}" * depth


def nested_any_of(depth: int) -> tuple[dict, str]:
    schema: dict = {"type": "integer"}
    for i in range(depth):
        schema = {"anyOf": [schema, {"const": f"s{i}"}]}
    return schema, '"s7"'


# A subschema under properties or anyOf nests the document two levels: 240 levels are 480 of
# the 500 that max_nesting allows (a $defs chain nests only the walk, not the document).
@pytest.mark.parametrize("make", [lambda: nested_objects(100, False), lambda: nested_objects(240, True),
                                  lambda: defs_chain(100), lambda: defs_chain(200),
                                  lambda: nested_any_of(240)],
                         ids=["optional-objects-100", "objects-240", "defs-100", "defs-200", "anyOf-240"])
def test_a_deeply_nested_schema_compiles_to_its_language(tmp_path, make):
    schema, valid = make()
    strings = [valid, valid.replace("1", '"1"'), "1", "{}", '"s"']
    out = compile_capped(tmp_path, json.dumps(schema), "json_schema", strings)
    validator = jsonschema.Draft202012Validator(schema)
    assert out["answers"] == [validator.is_valid(json.loads(s)) for s in strings]
    assert out["answers"][0]


def test_a_schema_nested_past_the_limit_is_a_limit_error_naming_where(tmp_path):
    schema, _ = defs_chain(600)
    out = compile_capped(tmp_path, json.dumps(schema), "json_schema")
    assert out["error"] == "LimitExceededError" and out["limit"] == "max_nesting"
    assert "#/$defs/d" in out["message"]


@pytest.mark.parametrize("keyword", ["const", "enum"])
def test_a_deeply_nested_listed_value_compiles_to_its_language(tmp_path, keyword):
    # 450 nested arrays: past where the recursive value walks failed (~330), within the
    # document's max_nesting (500; a deeper value is refused by it, as any deep document).
    value = "[" * 450 + "1" + "]" * 450
    schema = f'{{"{keyword}": {value if keyword == "const" else "[" + value + ", 2]"}}}'
    out = compile_capped(tmp_path, schema, "json_schema", [value, value.replace("1", "2"), "2"])
    assert out["answers"] == [True, False, keyword == "enum"]


def test_multiple_of_a_tiny_number_compiles_to_its_language(tmp_path):
    schema = {"type": "number", "multipleOf": 1e-308}
    # Decimal spellings (exponents are restricted, see docs/json-schema.md); 1.5e-308 is no multiple.
    strings = ["0", "2", "-7.25", "0." + "0" * 307 + "1", "0." + "0" * 307 + "15"]
    out = compile_capped(tmp_path, json.dumps(schema), "json_schema", strings)
    assert out["answers"] == [True, True, True, True, False]


def test_deep_regex_nesting_compiles_to_its_language(tmp_path):
    # 450 nested optional groups: the IR nests 900 deep (a sequence in a repetition each level).
    n = 450
    out = compile_capped(tmp_path, "(a" * n + ")?" * n, "regex", ["a" * n, "a" * 17, "", "a" * (n + 1)])
    assert out == {"kind": "dfa", "answers": [True, True, True, False]}


def test_regex_nesting_past_the_limit_is_a_limit_error(tmp_path):
    out = compile_capped(tmp_path, "(" * 600 + "x" + ")" * 600, "regex")
    assert out["error"] == "LimitExceededError" and out["limit"] == "max_nesting"
