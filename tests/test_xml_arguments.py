"""XML argument styles of structural tags (``json_schema`` with ``style``): gramc's language
against a reference written from docs/grammars/structural-tags.md ("XML argument styles") and,
where xgrammar is installed, against XGrammar's own matcher, on tool arguments rendered in each
style and on strings near them.

The reference parses a text into parameters (trying every occurrence of the closing string)
and checks each value with ``jsonschema``: a raw string value (less whitespace around it,
except in DeepSeek's ``string="true"``) or a JSON value that is not a string. It treats a
string value holding the closing string as invalid, so the test schemas' constrained strings
are too short or too narrow to hold one.
"""

from __future__ import annotations

import json
import random
import re

import pytest

import gramc
from gramc.errors import UnsupportedFeatureError
from gramc.runtime.check import check_artifact
from strategies import mutants

jsonschema = pytest.importorskip("jsonschema")

WS = " \n\r\t"
KINDS = ("string", "number", "integer", "boolean", "object", "array", "null")
NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
DSML = "｜DSML｜"
CLOSE = {"qwen_xml": "</parameter>", "minimax_xml": "</parameter>", "glm_xml": "</arg_value>",
         "deepseek_xml": f"</{DSML}parameter>", "kimi_k3_xml": "<|close|>argument<|sep|>"}
STYLES = sorted(CLOSE)

SCHEMAS = {
    "weather": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
        "unit": {"enum": ["C", "F"]}}, "required": ["city"]},
    "nested": {"type": "object", "properties": {
        "config": {"type": "object", "properties": {"mode": {"type": "string"}, "on": {"type": "boolean"}},
                   "required": ["mode", "on"]},
        "items": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}, "required": ["config"]},
    "unions": {"type": "object", "properties": {
        "v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}, "w": {"type": ["integer", "null"]},
        "c": {"const": 42}, "r": {"$ref": "#/$defs/code"}}, "required": ["v", "w"],
        "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{2}$"}}},
    "short": {"type": "object", "properties": {
        "s": {"type": "string", "maxLength": 3}, "k": {"enum": ["a b", 1, True]},
        "o": {"oneOf": [{"type": "object"}, {"type": "array", "items": {"type": "integer"}}]}},
        "required": ["s", "k"]},
    "any": True,
}
INSTANCES = {
    "weather": [{"city": "Paris"}, {"city": "São Paulo", "days": 3, "unit": "C"}, {"city": "", "unit": "F"},
                {"city": "a<b>c\n"}],
    "nested": [{"config": {"mode": "fast", "on": True}}, {"config": {"mode": "", "on": False}, "items": ["x", "y"]}],
    "unions": [{"v": "text", "w": None}, {"v": 7, "w": 3, "c": 42, "r": "AB"}, {"v": "", "w": -1, "r": "QQ"}],
    "short": [{"s": "abc", "k": "a b"}, {"s": "", "k": 1, "o": {"x": 1}}, {"s": "é", "k": True, "o": [1, 2]}],
    "any": [{}, {"a": "x", "b_2": [1, {"k": None}]}, {"q": 1.5, "r": "two words"}],
}


def kind_of(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", type(None): "null", list: "array", dict: "object"}[type(value)]


def declared_kind(schema) -> str | None:
    """The type Kimi's ``type`` attribute must name, None where any may be named."""
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("type"), str):
        return "number" if schema["type"] == "integer" else schema["type"]
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    kinds = {kind_of(v) for v in values} if values else set()
    return kinds.pop() if len(kinds) == 1 else None


def head(style: str, name: str, kind: str, is_string: bool, gap: str = "") -> str:
    if style == "qwen_xml":
        return f"<parameter={name}>"
    if style == "minimax_xml":
        return f'<parameter name="{name}">'
    if style == "glm_xml":
        return f"<arg_key>{name}</arg_key>{gap}<arg_value>"
    if style == "deepseek_xml":
        return f'<{DSML}parameter name="{name}" string="{"true" if is_string else "false"}">'
    key = name.replace("&", "&amp;").replace('"', "&quot;")
    return f'<|open|>argument key="{key}" type="{kind}"<|sep|>'


def render(style: str, schema, instance: dict, rng: random.Random) -> str:
    """``instance`` written in ``style``: properties in schema order, random whitespace."""
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    names = [n for n in props if n in instance] if props else list(instance)
    out = []
    for name in names:
        value = instance[name]
        kind = declared_kind(props.get(name)) or kind_of(value)
        text = value if isinstance(value, str) else json.dumps(value)
        pad = "" if isinstance(value, str) else rng.choice(["", " ", "\n"])
        out.append(rng.choice(["", "\n", " "]) + head(style, name, kind, isinstance(value, str), rng.choice(["", "\n"]))
                   + pad + text + pad + CLOSE[style])
    return "".join(out) + rng.choice(["", "\n"])


class Reference:
    """A text's parameters in one style, checked against the schema as documented."""

    def __init__(self, style: str, schema):
        self.style, self.schema, self.close = style, schema, CLOSE[style]
        self.root = schema if isinstance(schema, dict) else {}

    def accepts(self, text: str) -> bool:
        props = self.root.get("properties")
        if props is None:
            return self.any_parameters(text, 0)
        return self.declared(text, 0, list(props.items()), set(self.root.get("required", [])))

    def declared(self, text: str, pos: int, props: list, required: set) -> bool:
        if not props:
            return text[pos:].strip(WS) == ""
        name, sub = props[0]
        if name not in required and self.declared(text, pos, props[1:], required):
            return True
        at = len(text) - len(text[pos:].lstrip(WS))
        return any(self.declared(text, end, props[1:], required) for end in self.parameter(text, at, name, sub))

    def any_parameters(self, text: str, pos: int) -> bool:
        at = len(text) - len(text[pos:].lstrip(WS))
        if at == len(text):
            return True
        prefix = head(self.style, "\0", "", True).split("\0")[0]
        match = NAME.match(text, at + len(prefix)) if text.startswith(prefix, at) else None
        if match is None:
            return False
        return any(self.any_parameters(text, end) for end in self.parameter(text, at, match.group(), True))

    def parameter(self, text: str, at: int, name: str, schema):
        """Where a parameter named ``name`` that starts at ``at`` may end."""
        for h, mode in self.heads(name, schema):
            if isinstance(h, re.Pattern):
                m = h.match(text, at)
                if m is None:
                    continue
                start = m.end()
            elif text.startswith(h, at):
                start = at + len(h)
            else:
                continue
            end = text.find(self.close, start)
            while end != -1:
                if self.value_ok(text[start:end], self.resolve(schema), mode):
                    yield end + len(self.close)
                end = text.find(self.close, end + 1)

    def heads(self, name: str, schema):
        if self.style == "deepseek_xml":
            return [(head(self.style, name, "", True), "raw"), (head(self.style, name, "", False), "json")]
        if self.style == "glm_xml":
            return [(re.compile(re.escape(f"<arg_key>{name}</arg_key>") + "[ \n\r\t]*<arg_value>"), "any")]
        if self.style == "kimi_k3_xml":
            kind = declared_kind(schema)
            return [(head(self.style, name, k, True), "any") for k in ([kind] if kind else KINDS)]
        return [(head(self.style, name, "", True), "any")]

    def resolve(self, schema):
        if isinstance(schema, dict) and "$ref" in schema:
            return self.root["$defs"][schema["$ref"].split("/")[-1]]
        return schema

    def valid(self, value, schema) -> bool:
        return jsonschema.Draft202012Validator(schema).is_valid(value)

    def value_ok(self, v: str, schema, mode: str) -> bool:
        if mode in ("raw", "any") and self.close not in v:
            lead = len(v) - len(v.lstrip(WS)) if mode == "any" else 0
            trail = len(v) - len(v.rstrip(WS)) if mode == "any" else 0
            for i in range(lead + 1):
                for j in range(trail + 1):
                    if self.valid(v[i:len(v) - j], schema):
                        return True
        if mode in ("json", "any"):
            try:
                value = json.loads(v, parse_constant=lambda c: 1 / 0)
            except (ValueError, ZeroDivisionError):
                return False
            return not isinstance(value, str) and self.valid(value, schema)
        return False


def stag(style: str, schema) -> str:
    return json.dumps({"type": "structural_tag", "format": {"type": "json_schema", "json_schema": schema,
                                                            "style": style}})


def cases(style: str, name: str) -> list[str]:
    rng = random.Random(f"{style}/{name}")
    positives = [render(style, SCHEMAS[name], inst, rng) for inst in INSTANCES[name] for _ in range(2)]
    return positives + mutants(positives, rng, 120)


PAIRS = [(style, name) for style in STYLES for name in SCHEMAS]


@pytest.mark.parametrize("style,name", PAIRS)
def test_language_matches_the_reference(style, name):
    artifact = gramc.compile(stag(style, SCHEMAS[name]), format="structural_tag")
    reference = Reference(style, SCHEMAS[name])
    strings = cases(style, name)
    wrong = [(s, ok) for s in strings if (ok := check_artifact(artifact, s.encode()).ok) != reference.accepts(s)]
    assert not wrong, wrong[:5]
    accepted = sum(reference.accepts(s) for s in strings)
    assert len(INSTANCES[name]) * 2 <= accepted < len(strings)  # both verdicts are exercised


def test_rendered_instances_are_accepted_and_others_are_not():
    artifact = gramc.compile(stag("qwen_xml", SCHEMAS["weather"]), format="structural_tag")
    for text, ok in [("<parameter=city>Paris</parameter>", True),
                     ("\n<parameter=city>Paris</parameter>\n<parameter=days> 3 </parameter>\n", True),
                     ("<parameter=days>3</parameter>", False),  # city is required
                     ("<parameter=city>Paris</parameter><parameter=days>0</parameter>", False),  # minimum
                     ("<parameter=days>3</parameter><parameter=city>Paris</parameter>", False),  # schema order
                     ("<parameter=city>a</parameter>b</parameter>", False),  # the close ends the value
                     ("<parameter=city>x</parameter><parameter=unit>\nC </parameter>", True),
                     ("<parameter=city>x</parameter><parameter=unit>\"C\"</parameter>", False)]:
        assert check_artifact(artifact, text.encode()).ok is ok, text


@pytest.mark.parametrize("schema,where", [
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
     "#/additionalProperties"),
    ({"type": "object", "patternProperties": {"^x": {}}}, "#/patternProperties"),
    ({"type": "object", "properties": {"a": {"type": "string", "format": "date"}}}, "#/properties/a/format"),
    ({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "string"}]}}},
     "#/properties/a/oneOf/1"),
    ({"type": "object", "properties": {"a": {"$ref": "#/properties/b"}}}, "#/properties/a"),
    ({"type": "string"}, "json_schema:"),
])
def test_what_a_style_cannot_write_is_refused_by_name_and_place(schema, where):
    with pytest.raises(UnsupportedFeatureError) as err:
        gramc.compile(stag("qwen_xml", schema), format="structural_tag")
    assert where in str(err.value) and "XML argument style" in str(err.value)


def test_unimplemented_styles_are_refused():
    with pytest.raises(UnsupportedFeatureError, match="cohere_xml.*not implemented"):
        gramc.compile(stag("cohere_xml", True), format="structural_tag")
    with pytest.raises(UnsupportedFeatureError, match="'yaml'.*unknown"):
        gramc.compile(stag("yaml", True), format="structural_tag")


def test_deprecated_qwen_xml_parameter_is_the_qwen_style():
    doc = json.dumps({"type": "structural_tag", "format": {"type": "qwen_xml_parameter",
                                                           "json_schema": SCHEMAS["weather"]}})
    artifact = gramc.compile(doc, format="structural_tag")
    reference = Reference("qwen_xml", SCHEMAS["weather"])
    for s in cases("qwen_xml", "weather"):
        assert check_artifact(artifact, s.encode()).ok is reference.accepts(s), s


@pytest.mark.parametrize("style,name", PAIRS)
def test_agrees_with_xgrammar(style, name):
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    artifact = gramc.compile(stag(style, SCHEMAS[name]), format="structural_tag")
    grammar = xgr.Grammar.from_structural_tag(stag(style, SCHEMAS[name]))
    wrong = [(s, ok) for s in cases(style, name)
             if (ok := check_artifact(artifact, s.encode()).ok) != _is_grammar_accept_string(grammar, s)]
    assert not wrong, wrong[:5]
