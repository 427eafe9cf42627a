"""Tool calling for ``gramc demo --tools``: a structural tag from a list of tools, and the calls
read back out of generated text.

The tag is the Hermes / Qwen format vLLM and SGLang build for these models: free text, then
``<tool_call>\\n{"name": "NAME", "arguments": ARGS}\\n</tool_call>`` where ``ARGS`` is a JSON
instance of the tool's ``parameters`` schema, then free text and further calls. The first
call is required (the demo's point is to show one); a caller wanting optional calls uses
``triggered_tags`` alone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gramc.errors import GramcError

TRIGGER = "<tool_call>"
CALL_END = "}\n</tool_call>"
_CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)


def load_tools(path: str | Path) -> list[dict[str, Any]]:
    """The tools of a JSON file: a list of ``{"name", "description", "parameters"}`` objects
    (OpenAI's ``{"type": "function", "function": {...}}`` wrapping is unwrapped)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise GramcError(f"{path}: cannot read the tools: {err}") from None
    if not isinstance(doc, list) or not doc:
        raise GramcError(f"{path}: expected a non-empty JSON array of tools")
    tools = []
    for i, tool in enumerate(doc):
        if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("function"), dict):
            tool = tool["function"]
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise GramcError(f"{path}: tool [{i}] needs a non-empty string 'name'")
        tools.append({"name": tool["name"], "description": tool.get("description", ""),
                      "parameters": tool.get("parameters", {"type": "object"})})
    return tools


def _begin(name: str) -> str:
    return f'{TRIGGER}\n{{"name": {json.dumps(name)}, "arguments": '


def tool_call_tag(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The structural-tag document: free text without the trigger, one call, then free text
    and calls (``triggered_tags`` starting with a tag)."""
    tags = [{"type": "tag", "begin": _begin(t["name"]),
             "content": {"type": "json_schema", "json_schema": t["parameters"]}, "end": CALL_END}
            for t in tools]
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "any_text", "excludes": [TRIGGER]},
        {"type": "triggered_tags", "triggers": [TRIGGER], "tags": tags, "at_least_one": True},
    ]}}


def parse_tool_calls(text: str) -> list[tuple[str, Any]]:
    """``(name, arguments)`` of every complete ``<tool_call>`` block of ``text``, in order."""
    out = []
    for m in _CALL.finditer(text):
        call = json.loads(m.group(1))
        out.append((call["name"], call["arguments"]))
    return out


def check_arguments(tools: list[dict[str, Any]], name: str, arguments: Any) -> str | None:
    """Why ``arguments`` are not valid for tool ``name`` (jsonschema), or None when they are."""
    import jsonschema

    schema = next((t["parameters"] for t in tools if t["name"] == name), None)
    if schema is None:
        return f"no tool named {name!r}"
    error = jsonschema.exceptions.best_match(jsonschema.validators.validator_for(schema)(schema).iter_errors(arguments))
    return None if error is None else error.message


__all__ = ["load_tools", "tool_call_tag", "parse_tool_calls", "check_arguments", "TRIGGER"]
