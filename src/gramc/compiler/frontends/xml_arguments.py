"""Tool-call arguments in the XML styles of tool-calling models: a JSON Schema's object of
parameters written as one XML-like element per parameter (XGrammar's ``json_schema``
``style``; docs/grammars/structural-tags.md, "XML argument styles").

Each style writes a parameter as a head naming it, the value, and a closing string::

    qwen_xml       <parameter=city>Paris</parameter>
    minimax_xml    <parameter name="city">Paris</parameter>
    glm_xml        <arg_key>city</arg_key><arg_value>Paris</arg_value>
    deepseek_xml   <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    kimi_k3_xml    <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>

A string value is written raw: any UTF-8 text without the closing string when the schema is
just ``{"type": "string"}``, else the raw texts its ``const``/``enum``/``pattern``/lengths
allow. Any other value is JSON text (its schema compiled as in the JSON style), and every
value but a plain string may have whitespace around it. The schema's declared properties come
in schema order, the optional ones may be left out, and whitespace may come before each
parameter and at the end. An object schema without ``properties`` takes any parameters named
``[a-zA-Z_][a-zA-Z0-9_]*`` whose values are any string or JSON value.

Parameters are checked against the schema as the JSON style checks members; what cannot be
written exactly in these styles is refused with :class:`~gramc.errors.UnsupportedFeatureError`
naming the keyword and its place (``additionalProperties`` beside properties,
``patternProperties``, a string ``format``, a ``oneOf`` whose branches may overlap, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gramc.compiler.ir import NOTHING, Expr, alt, byte_class, literal, optional, repeat, seq
from gramc.errors import SchemaError, UnsupportedFeatureError

__all__ = ["STYLES", "xml_arguments"]

#: Keywords that never change a schema's language.
_ANNOTATIONS = frozenset({"title", "description", "$comment", "examples", "default", "$schema", "$id",
                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions"})
#: The JSON types by the name Kimi's ``type`` attribute gives them (an integer is a number).
_KIMI_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
_ANY_KIND = alt(*(literal(t.encode()) for t in _KIMI_TYPES))
_WS = repeat(byte_class(b" \n\r\t"), 0, None)
_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"
_NAME = seq(byte_class(_LETTERS), repeat(byte_class(_LETTERS + b"0123456789"), 0, None))
#: Every JSON value but a string: what a value of any type may be beside raw text.
_ANY_NOT_STRING = {"type": ["number", "boolean", "null", "array", "object"]}


@dataclass(frozen=True)
class _Value:
    """The ways a parameter's value may be written."""

    text: bool = False  # any string, written raw (text without the closing string)
    strings: Expr | None = None  # the raw texts of the strings a constrained string schema allows
    json: Expr | None = None  # the JSON texts of its values that are not strings

    def __or__(self, other: _Value) -> _Value:
        def either(a: Expr | None, b: Expr | None) -> Expr | None:
            return b if a is None else a if b is None else alt(a, b)

        return _Value(self.text or other.text, either(self.strings, other.strings), either(self.json, other.json))


@dataclass(frozen=True)
class _Style:
    """How one model family writes a parameter: ``head(name, type)`` before the value (the
    type only for Kimi), ``close`` after it; ``typed_strings``: the head says whether the
    value is a string (DeepSeek's ``string="true"``), and a string's value has no whitespace
    around it."""

    head: Callable[[Expr, Expr], Expr]
    close: bytes
    typed_strings: bool = False
    key: Callable[[str], str] = lambda name: name


def _kimi_key(name: str) -> str:
    return name.replace("&", "&amp;").replace('"', "&quot;")


_DSML = "｜DSML｜"
STYLES: dict[str, _Style] = {
    "qwen_xml": _Style(lambda n, t: seq(literal(b"<parameter="), n, literal(b">")), b"</parameter>"),
    "minimax_xml": _Style(lambda n, t: seq(literal(b'<parameter name="'), n, literal(b'">')), b"</parameter>"),
    "glm_xml": _Style(lambda n, t: seq(literal(b"<arg_key>"), n, literal(b"</arg_key>"), _WS, literal(b"<arg_value>")),
                      b"</arg_value>"),
    "deepseek_xml": _Style(lambda n, t: seq(literal(f'<{_DSML}parameter name="'.encode()), n),
                           f"</{_DSML}parameter>".encode(), typed_strings=True),
    "kimi_k3_xml": _Style(lambda n, t: seq(literal(b'<|open|>argument key="'), n, literal(b'" type="'), t,
                                           literal(b'"<|sep|>')), b"<|close|>argument<|sep|>", key=_kimi_key),
}


def xml_arguments(schema: dict | bool, style: str, *, json_of: Callable[[dict], Expr],
                  text_without: Callable[[bytes], Expr], where: str) -> Expr:
    """The IR of the parameters ``schema`` describes, written in ``style`` (a key of
    :data:`STYLES`).

    Args:
        json_of: the IR of the JSON texts of a subschema (the JSON style's compiler; the
            root's ``$defs``/``definitions`` are carried into it).
        text_without: the IR of UTF-8 text in which a string does not occur.
        where: the place of the schema in the source, for errors.

    Raises:
        UnsupportedFeatureError: what the style cannot write exactly (named, with its place).
    """
    return _Arguments(schema, STYLES[style], json_of, text_without(STYLES[style].close), where).root()


class _Arguments:
    def __init__(self, schema: dict | bool, style: _Style, json_of: Callable[[dict], Expr], text: Expr, where: str):
        self.schema = schema
        self.style = style
        self.json_of = json_of
        self.text = text
        self.where = where
        self._any: _Value | None = None

    def refuse(self, pointer: str, feature: str, reason: str) -> UnsupportedFeatureError:
        place = f"{self.where}#{pointer}" if pointer else self.where
        return UnsupportedFeatureError(feature, None, f"{place}: {feature} in an XML argument style: {reason}")

    # ------------------------------------------------------------ the object of parameters

    def root(self) -> Expr:
        schema = self.schema
        if schema is True or schema == {}:
            return self.any_parameters()
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            raise self.refuse("", "a schema that is not an object",
                              "the styles write an object's properties as parameters")
        for key in schema:
            if key not in _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}:
                raise self.refuse(f"/{key}", f"{key!r}", "not implemented")
        extra = schema.get("additionalProperties", True)
        if "properties" not in schema:
            return _WS if extra is False else self.any_parameters() if extra is True else self._refuse_extra()
        if extra is not False and "additionalProperties" in schema:
            self._refuse_extra()
        properties, required = schema["properties"], schema.get("required", [])
        if not isinstance(properties, dict) or not isinstance(required, list):
            raise SchemaError(f"{self.where}: 'properties' must be an object and 'required' an array", "#")
        for name in required:
            if name not in properties:
                raise self.refuse("/required", f"required property {name!r} not among the properties",
                                  "no parameter may be written for it")
        parts = []
        for name, sub in properties.items():
            one = seq(_WS, self.parameter(name, sub, f"/properties/{name}"))
            parts.append(one if name in required else optional(one))
        return seq(*parts, _WS)

    def _refuse_extra(self) -> Expr:
        raise self.refuse("/additionalProperties", "additionalProperties",
                          "only absent or false is implemented beside properties")

    def any_parameters(self) -> Expr:
        """Any number of parameters with any names and values."""
        return seq(repeat(seq(_WS, self.written(_NAME, _ANY_KIND, self.any_value())), 0, None), _WS)

    def any_value(self) -> _Value:
        """Any string or JSON value (its JSON grammar embedded once per schema)."""
        if self._any is None:
            self._any = _Value(text=True, json=self.json_of(dict(_ANY_NOT_STRING)))
        return self._any

    def parameter(self, name: str, schema: Any, pointer: str) -> Expr:
        kind = _declared_kind(schema)
        kinds = _ANY_KIND if kind is None else literal(kind.encode())
        return self.written(literal(self.style.key(name).encode()), kinds, self.value(schema, pointer))

    def written(self, name: Expr, kind: Expr, value: _Value) -> Expr:
        """One parameter: head, value and close."""
        style, close = self.style, literal(self.style.close)
        if style.typed_strings:
            ways = []
            if value.text or value.strings is not None:
                raw = alt(*([self.text] if value.text else []), *([value.strings] if value.strings is not None else []))
                ways.append(seq(literal(b'" string="true">'), raw, close))
            if value.json is not None:
                ways.append(seq(literal(b'" string="false">'), _WS, value.json, _WS, close))
            return seq(style.head(name, kind), alt(*ways) if ways else NOTHING)
        padded = [x for x in (value.strings, value.json) if x is not None]
        ways = ([self.text] if value.text else []) + ([seq(_WS, alt(*padded), _WS)] if padded else [])
        return seq(style.head(name, kind), alt(*ways) if ways else NOTHING, close)

    # ------------------------------------------------------------ values

    def value(self, schema: Any, pointer: str) -> _Value:
        schema, pointer = self.resolve(schema, pointer)
        if schema is True or (isinstance(schema, dict) and not set(schema) - _ANNOTATIONS):
            return self.any_value()
        if schema is False:
            return _Value()
        if not isinstance(schema, dict):
            raise self.refuse(pointer, "a schema that is not an object or a boolean", "invalid")
        keys = set(schema) - _ANNOTATIONS
        for combinator in ("anyOf", "oneOf", "allOf"):
            if combinator in schema:
                return self.combined(schema, combinator, keys, pointer)
        if "const" in schema or "enum" in schema:
            return self.listed(schema, pointer)
        kind = schema.get("type")
        if isinstance(kind, list):
            out = _Value()
            for i, one in enumerate(kind):
                out |= self.value({**schema, "type": one}, f"{pointer}/type/{i}")
            return out
        if kind == "string":
            return self.string(schema, keys, pointer)
        if kind is None:
            raise self.refuse(pointer, "a parameter schema without 'type'", "its kind of value is not known")
        return _Value(json=self.json_of(self.carried(schema)))

    def combined(self, schema: dict, combinator: str, keys: set[str], pointer: str) -> _Value:
        branches = schema[combinator]
        if keys != {combinator} or not isinstance(branches, list) or not branches:
            raise self.refuse(pointer, f"{combinator} beside other keywords",
                              "not implemented")
        if combinator == "allOf":
            if len(branches) != 1:
                raise self.refuse(f"{pointer}/allOf", "allOf of several schemas",
                                  "not implemented")
            return self.value(branches[0], f"{pointer}/allOf/0")
        if combinator == "oneOf":
            seen: set[str] = set()
            for i, branch in enumerate(branches):
                kinds = _kinds(self.resolve(branch, pointer)[0])
                if kinds is None or kinds & seen:
                    raise self.refuse(f"{pointer}/oneOf/{i}", "oneOf whose branches may overlap",
                                      "only branches of different types are written exactly")
                seen |= kinds
        out = _Value()
        for i, branch in enumerate(branches):
            out |= self.value(branch, f"{pointer}/{combinator}/{i}")
        return out

    def listed(self, schema: dict, pointer: str) -> _Value:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        if not isinstance(values, list):
            raise SchemaError(f"{self.where}: 'enum' must be an array", f"#{pointer}")
        if set(schema) - _ANNOTATIONS - {"const", "enum", "type"}:
            raise self.refuse(pointer, "const/enum beside other keywords", "not implemented")
        kind = schema.get("type")
        if kind is not None and any(not _is_a(v, kind) for v in values):
            raise self.refuse(pointer, "const/enum values outside the stated type",
                              "not implemented")
        out = _Value()
        for v in values:
            if isinstance(v, str):
                out |= _Value(strings=literal(v.encode("utf-8", "surrogatepass")))
            else:
                out |= _Value(json=self.json_of({"const": v}))
        return out

    def string(self, schema: dict, keys: set[str], pointer: str) -> _Value:
        from gramc.schemas.approx import NotExpressible
        from gramc.schemas.strings import raw_string_ir

        for key in keys - {"type", "pattern", "minLength", "maxLength"}:
            raise self.refuse(f"{pointer}/{key}", f"{key!r} on a string", "not implemented")
        if keys == {"type"}:
            return _Value(text=True)
        try:
            return _Value(strings=raw_string_ir(schema.get("minLength"), schema.get("maxLength"), schema.get("pattern")))
        except (NotExpressible, ValueError) as err:
            raise self.refuse(pointer, "a string value", str(err)) from None

    # ------------------------------------------------------------ references

    def resolve(self, schema: Any, pointer: str) -> tuple[Any, str]:
        """``schema`` with a ``$ref`` to the root's ``$defs``/``definitions`` followed."""
        for _ in range(64):
            if not (isinstance(schema, dict) and "$ref" in schema):
                return schema, pointer
            ref = schema["$ref"]
            if set(schema) - _ANNOTATIONS != {"$ref"} or not isinstance(ref, str):
                raise self.refuse(pointer, "$ref beside other keywords", "not implemented")
            parts = ref.split("/")
            table = self.schema.get(parts[1]) if isinstance(self.schema, dict) and len(parts) == 3 else None
            if parts[0] != "#" or parts[1] not in ("$defs", "definitions") or not isinstance(table, dict) \
                    or parts[2] not in table:
                raise self.refuse(pointer, f"$ref {ref!r}",
                                  "only references to the root's $defs or definitions are followed")
            schema, pointer = table[parts[2]], f"/{parts[1]}/{parts[2]}"
        raise self.refuse(pointer, "$ref cycle", "the references never reach a schema")

    def carried(self, schema: dict) -> dict:
        """``schema`` with the root's definitions, so that its ``$ref`` resolve."""
        out = dict(schema)
        if isinstance(self.schema, dict):
            for table in ("$defs", "definitions"):
                if table in self.schema and table not in out:
                    out[table] = self.schema[table]
        return out


def _kind_of(value: Any) -> str:
    """The JSON type of a value, as Kimi's ``type`` attribute names it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", type(None): "null", list: "array", dict: "object"}[type(value)]


def _is_a(value: Any, kind: Any) -> bool:
    """Whether ``value`` is of the JSON Schema type ``kind``."""
    if kind == "integer":
        return _kind_of(value) == "number" and float(value).is_integer()
    return _kind_of(value) == kind


def _declared_kind(schema: Any) -> str | None:
    """The one type a parameter's schema states as written (``type``, or the values of
    ``const``/``enum``), as Kimi's ``type`` attribute names it; None: any type may be named."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return "number" if kind == "integer" else kind
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list) and values:
        kinds = {_kind_of(v) for v in values}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _kinds(schema: Any) -> set[str] | None:
    """The JSON types a branch of ``oneOf`` can have (integer counted as number), None where
    it is not stated."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        kind = [kind]
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        return {"number" if k == "integer" else k for k in kind}
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list) and values:
        return {_kind_of(v) for v in values}
    return None
