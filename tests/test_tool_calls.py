"""Tool calling: the Hermes-style structural tag of ``gramc demo --tools`` and the demo itself.

The tag's language is checked on hand-written calls (valid and not); the demo must emit, for
several seeds and through both decoding paths, a call whose arguments validate against the
tool's schema with jsonschema (an independent validator).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

import gramc
from gramc.cli.tool_calls import check_arguments, load_tools, parse_tool_calls, tool_call_tag
from gramc.errors import GramcError
from gramc.runtime.check import check_artifact

TOOLS = Path(__file__).resolve().parents[1] / "examples" / "tools.json"


@pytest.fixture(scope="module")
def artifact():
    return gramc.compile(json.dumps(tool_call_tag(load_tools(TOOLS))), format="structural_tag")


def _call(name, args, spacing=""):
    return f'<tool_call>\n{{"name": "{name}", "arguments": {spacing}{args}}}\n</tool_call>'


@pytest.mark.parametrize("text, ok", [
    ("hello " + _call("add", '{"a": 1, "b": -2}'), True),
    (_call("get_weather", '{"city": "Paris", "unit": "celsius"}') + " and " + _call("add", '{"a":0,"b":0}'), True),
    ("x <tool_cal " + _call("add", '{"a": 1, "b": 2}') + " bye", True),
    ("hello", False),                                                           # the call is required
    ("hello " + _call("add", '{"a": 1}'), False),                               # b is required
    ("hello " + _call("add", '{"a": 1, "b": 101}'), False),                     # maximum
    ("hello " + _call("add", '{"b": 1, "a": 2}'), False),                       # property order
    ("hello " + _call("get_weather", '{"city": "", "unit": "celsius"}'), False),  # minLength
    ("hello " + _call("mul", '{"a": 1, "b": 2}'), False),                       # no such tool
    ("hello " + _call("add", '{"a": 1, "b": 2, "c": 3}'), False),               # strict objects
    ("<tool_call> " + _call("add", '{"a": 1, "b": 2}'), False),                 # the trigger opens a call
])
def test_the_tag_accepts_calls_to_the_tools_only(artifact, text, ok):
    assert check_artifact(artifact, text.encode()).ok is ok


def test_calls_parse_back_and_validate():
    tools = load_tools(TOOLS)
    text = "a " + _call("add", '{"a": 1, "b": 2}') + " b " + _call("get_weather", '{"city": "Oslo", "unit": "kelvin"}')
    calls = parse_tool_calls(text)
    assert calls == [("add", {"a": 1, "b": 2}), ("get_weather", {"city": "Oslo", "unit": "kelvin"})]
    assert check_arguments(tools, *calls[0]) is None
    assert "kelvin" in check_arguments(tools, *calls[1])
    assert "no tool" in check_arguments(tools, "mul", {})


def test_load_tools_unwraps_openai_functions_and_refuses_nameless(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]))
    assert load_tools(path) == [{"name": "f", "description": "", "parameters": {"type": "object"}}]
    path.write_text(json.dumps([{"description": "x"}]))
    with pytest.raises(GramcError, match="name"):
        load_tools(path)


def test_demo_tool_calls_validate_for_several_seeds():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from click.testing import CliRunner

    from gramc.cli.main import main

    result = CliRunner().invoke(main, ["demo", "--tools", str(TOOLS), "-n", "3", "--max-tokens", "40"])
    assert result.exit_code == 0, result.output
    tools = load_tools(TOOLS)
    outputs = re.findall(r"^(transformers|gramc\.generate), seed (\d+): (.*)$", result.output, re.M)
    assert sorted((p, s) for p, s, _ in outputs) == sorted((p, str(s)) for p in ("transformers", "gramc.generate")
                                                         for s in range(3))
    for _, _, shown in outputs:
        calls = parse_tool_calls(ast.literal_eval(shown))  # the demo prints repr(text)
        assert calls, shown
        for name, arguments in calls:
            assert check_arguments(tools, name, arguments) is None, shown
    assert "INVALID" not in result.output and "no tool call" not in result.output


def test_demo_tools_refuses_beam_search():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from click.testing import CliRunner

    from gramc.cli.main import main

    result = CliRunner().invoke(main, ["demo", "--tools", str(TOOLS), "--sampler", "beam"])
    assert result.exit_code == 2 and "greedy or sample" in result.output
