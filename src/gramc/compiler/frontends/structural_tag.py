"""The structural-tag frontend: XGrammar's structural-tag JSON to IR (see
docs/grammars/structural-tags.md).

A document is ``{"type": "structural_tag", "format": {...}}``, a tree of format objects, or
the older ``{"type": "structural_tag", "structures": [{"begin", "schema", "end"}],
"triggers": [...]}``, read as ``triggered_tags``. Each format lowers to an IR expression:
constant strings, regexes (ECMA-262, whole match) and EBNF/Lark grammars through gramc's own
frontends, JSON Schemas through :mod:`gramc.schemas`, and free text (``any_text``, the text
between ``triggered_tags``) as the regular languages of
:mod:`gramc.compiler.frontends.free_text`. An embedded grammar with several rules keeps them,
each name prefixed with a name unique to the embedding, so a recursive schema makes the
whole a context-free grammar without clashing with its neighbours.

Free text stops where XGrammar's stops: inside a ``tag``, ``any_text`` and the free text of
``triggered_tags`` never contain the tag's end strings (nor their own ``excludes``); free text
runs until the first occurrence of a trigger, which must go on as one of the tags whose
``begin`` starts with it.

A malformed document is a :class:`~gramc.errors.GrammarSyntaxError` whose message names the
JSON path of the fault (``format.tags[2].begin``); a format or field gramc does not implement
is an :class:`~gramc.errors.UnsupportedFeatureError` naming it.

>>> doc = '''{"type": "structural_tag", "format": {"type": "tag", "begin": "<n>",
...     "content": {"type": "regex", "pattern": "[0-9]+"}, "end": "</n>"}}'''
>>> print(parse_structural_tag(doc), end="")
root ::= "<n>" [0-9]+ "</n>"
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from gramc.compiler import stackless
from gramc.compiler.frontends.free_text import avoiding, until_trigger
from gramc.compiler.frontends.language_ops import rebuild
from gramc.compiler.frontends.xml_arguments import STYLES as XML_STYLES
from gramc.compiler.frontends.xml_arguments import xml_arguments
from gramc.compiler.ir import Expr, Grammar, Ref, Token, TokenName, alt, literal, optional, repeat, seq
from gramc.compiler.stackless import Call
from gramc.errors import GrammarSyntaxError, SchemaError, UnsupportedFeatureError
from gramc.limits import DEFAULT_LIMITS, Limits

__all__ = ["parse_structural_tag", "FORMAT_TYPES", "Composer"]

_MISSING = object()

#: Format types XGrammar defines that gramc refuses, and why.
_UNSUPPORTED = {
    "token_triggered_tags": "token-level dispatch is not implemented",
    "token_dispatch": "token-level dispatch is not implemented",
    "exclude_token": "token sets are not implemented",
    "any_tokens": "token sets are not implemented",
}

#: XGrammar's argument styles gramc does not write (see docs/grammars/structural-tags.md).
_UNIMPLEMENTED_STYLES = ("minimax_m3_xml", "cohere_xml", "deepseek_v4_1_xml", "gemma")


class Composer:
    """Grammars embedded into one expression: the rules of each embedded grammar, gathered
    as they are met under names unique to the embedding (used by this frontend and by the
    :mod:`gramc.grammar` builder)."""

    def __init__(self) -> None:
        self.rules: dict[str, Expr] = {}
        self.lexemes: set[Expr] = set()
        self.captures: dict[str, str] = {}  # an embedded Lark grammar's [capture] rules, renamed
        self.uncaptured: dict[str, str] = {}
        self.embedded = 0

    def embed(self, grammar: Grammar, kind: str) -> Expr:
        """``grammar``'s start as an expression: its body when it has one rule, else a call,
        its rules added under names prefixed ``<kind><n>_`` (unique to this embedding)."""
        self.lexemes |= grammar.lexemes
        self.uncaptured.update(grammar.uncaptured)
        if len(grammar.rules) == 1 and not grammar.captures:
            return grammar.rules[grammar.start]
        self.embedded += 1
        prefix = f"{kind}{self.embedded}_"
        self.captures.update((prefix + r, c) for r, c in grammar.captures.items())

        def rename(node: Expr) -> Expr:
            return Ref(prefix + node.name) if isinstance(node, Ref) else node

        for name, body in grammar.rules.items():
            self.rules[prefix + name] = rebuild(body, rename)
        return Ref(prefix + grammar.start)

    def grammar(self, body: Expr, start: str = "root") -> Grammar:
        """The grammar whose start rule ``start`` is ``body``, with the embedded rules."""
        return Grammar({start: body, **self.rules}, start, self.lexemes, self.captures, self.uncaptured)


class _Lowering(Composer):
    """One document's lowering: the rules of embedded grammars, gathered as they are met."""

    def __init__(self, options: Mapping[str, Any], source_name: str, limits: Limits):
        super().__init__()
        self.options = options
        self.source_name = source_name
        self.limits = limits
        self.handlers: dict[str, Callable[[dict, str, tuple[bytes, ...] | None, int], Call[Expr]]] = {
            "const_string": self._const_string, "json_schema": self._json_schema, "regex": self._regex,
            "grammar": self._grammar, "sequence": self._sequence, "or": self._or, "tag": self._tag,
            "any_text": self._any_text, "triggered_tags": self._triggered_tags,
            "tags_with_separator": self._tags_with_separator, "optional": self._optional,
            "plus": self._plus, "star": self._star, "repeat": self._repeat, "token": self._token,
            "qwen_xml_parameter": self._qwen_xml_parameter, "dispatch": self._dispatch,
        }

    # ------------------------------------------------------------ reading the document

    def error(self, path: str, reason: str) -> GrammarSyntaxError:
        """A malformed document: the message names the JSON path of the fault."""
        return GrammarSyntaxError(f"{self.source_name}: {path or '(the document)'}: {reason}")

    def unsupported(self, path: str, feature: str, reason: str) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(feature, None, f"{self.source_name}: {path}: {feature}: {reason}")

    def field(self, obj: dict, key: str, path: str, kinds: tuple[type, ...], default: Any = _MISSING) -> Any:
        """``obj[key]``, checked to be of one of ``kinds`` (``bool`` is not an ``int``)."""
        if key not in obj:
            if default is _MISSING:
                raise self.error(path, f"missing field {key!r}")
            return default
        value = obj[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(_KIND_NAMES[k] for k in kinds)
            raise self.error(_at(path, key), f"expected {names}, found {_json_kind(value)}")
        return value

    def strings(self, obj: dict, key: str, path: str, default: Any = _MISSING) -> list[str]:
        """``obj[key]``, a list of strings."""
        items = self.field(obj, key, path, (list,), default)
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise self.error(f"{_at(path, key)}[{i}]", f"expected a string, found {_json_kind(item)}")
        return items

    def keys(self, obj: dict, path: str, allowed: set[str]) -> None:
        """Refuse fields a format does not define (a misspelt flag would change nothing)."""
        for key in obj:
            if key not in allowed:
                raise self.error(_at(path, key), f"unknown field for a {obj.get('type', 'structural_tag')!r} "
                                 f"object (expected {', '.join(sorted(allowed))})")

    def encode(self, s: str, path: str) -> bytes:
        try:
            return s.encode("utf-8")
        except UnicodeEncodeError:
            raise self.error(path, "the string holds a lone surrogate, which has no UTF-8 encoding") from None

    # ------------------------------------------------------------ formats

    def lower(self, fmt: Any, path: str, ends: tuple[bytes, ...] | None, depth: int = 1) -> Call[Expr]:
        """The IR of format ``fmt`` at ``path``. ``ends`` are the string ends of the nearest
        enclosing tag, where free text must stop (None: no enclosing tag)."""
        if not isinstance(fmt, dict):
            raise self.error(path, f"expected a format object, found {_json_kind(fmt)}")
        self.limits.check("max_nesting", depth, f"structural tag formats nested at {path}")
        kind = self.field(fmt, "type", path, (str,))
        handler = self.handlers.get(kind)
        if handler is None:
            if kind in _UNSUPPORTED:
                raise self.unsupported(_at(path, "type"), f"structural tag format {kind!r}", _UNSUPPORTED[kind])
            raise self.error(_at(path, "type"), f"unknown format type {kind!r} (expected one of "
                             f"{', '.join(sorted(self.handlers))})")
        return (yield handler(fmt, path, ends, depth))

    def child(self, fmt: dict, key: str, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        out = yield self.lower(self.field(fmt, key, path, (dict,)), _at(path, key), ends, depth + 1)
        return out

    def elements(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[list[Expr]]:
        self.keys(fmt, path, {"type", "elements"})
        items = self.field(fmt, "elements", path, (list,))
        if not items:
            raise self.error(_at(path, "elements"), "needs at least one element")
        out = []
        for i, item in enumerate(items):
            out.append((yield self.lower(item, f"{_at(path, 'elements')}[{i}]", ends, depth + 1)))
        return out

    def _const_string(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "value"})
        return literal(self.encode(self.field(fmt, "value", path, (str,)), _at(path, "value")))
        yield

    def _regex(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        from gramc.compiler.frontends.regex import parse_regex

        self.keys(fmt, path, {"type", "pattern"})
        pattern = self.field(fmt, "pattern", path, (str,))
        return parse_regex(pattern, dialect=self.options.get("regex_dialect", "unicode"),
                           source_name=f"{self.source_name}:{path}.pattern", limits=self.limits)
        yield

    def _grammar(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "grammar", "syntax"})
        text = self.field(fmt, "grammar", path, (str,))
        syntax = self.field(fmt, "syntax", path, (str,), "ebnf")
        name = f"{self.source_name}:{path}.grammar"
        if syntax == "ebnf":
            from gramc.compiler.frontends.ebnf import parse_ebnf

            return self.embed(parse_ebnf(text, name, "gbnf-like", limits=self.limits), "ebnf")
        if syntax == "lark":
            from gramc.compiler.frontends import _require
            from gramc.compiler.frontends.lark import parse_lark

            _require("lark", "structural_tag")
            return self.embed(parse_lark(text, name, limits=self.limits), "lark")
        raise self.error(_at(path, "syntax"), f"expected 'ebnf' or 'lark', found {syntax!r}")
        yield

    def _json_schema(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "json_schema", "style", "any_order", "max_whitespace_cnt", "excludes"})
        schema = self.field(fmt, "json_schema", path, (dict, bool))
        style = self.field(fmt, "style", path, (str,), "json")
        if style != "json" and style not in XML_STYLES:
            reason = ("not implemented" if style in _UNIMPLEMENTED_STYLES
                      else f"unknown (expected json, {', '.join(sorted(XML_STYLES))})")
            raise self.unsupported(_at(path, "style"), f"json_schema style {style!r}", reason)
        if self.field(fmt, "any_order", path, (bool,), False):
            raise self.unsupported(_at(path, "any_order"), "json_schema any_order",
                                   "XGrammar's any_order (keys neither required nor unique) is not implemented")
        if self.strings(fmt, "excludes", path, []):
            raise self.unsupported(_at(path, "excludes"), "json_schema excludes", "not implemented")
        spaces = self.field(fmt, "max_whitespace_cnt", path, (int, type(None)), None)
        if spaces is not None and spaces < 0:
            raise self.error(_at(path, "max_whitespace_cnt"), "must be a non-negative integer")
        if style != "json":
            if spaces is not None:
                raise self.unsupported(_at(path, "max_whitespace_cnt"), "max_whitespace_cnt with an XML style",
                                       "not implemented")
            return self.xml(schema, style, _at(path, "json_schema"))
        return self.embed(self.schema(schema, spaces, _at(path, "json_schema")), "json")
        yield

    def xml(self, schema: dict | bool, style: str, path: str) -> Expr:
        """The parameters of ``schema`` in an XML argument style."""
        return xml_arguments(
            schema, style, where=f"{self.source_name}: {path}",
            json_of=lambda sub: self.embed(self.schema(sub, None, path), "json"),
            text_without=lambda close: avoiding([close], None, self.limits))

    def _qwen_xml_parameter(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        """XGrammar's deprecated spelling of ``json_schema`` with ``style: "qwen_xml"``."""
        self.keys(fmt, path, {"type", "json_schema"})
        return self.xml(self.field(fmt, "json_schema", path, (dict, bool)), "qwen_xml", _at(path, "json_schema"))
        yield

    def schema(self, schema: dict | bool, max_whitespace: int | None, path: str) -> Grammar:
        """The grammar of a JSON Schema under the compile's JSON options, except that an
        absent ``additionalProperties`` allows no other properties: XGrammar compiles the
        schemas of structural tags in its strict mode."""
        from dataclasses import replace

        from gramc.compiler.frontends import _require

        _require("jsonschema", "structural_tag")
        from gramc.schemas import SchemaOptions, schema_to_grammar

        options = replace(SchemaOptions.from_compile_options(self.options), additional_properties_default=False)
        if max_whitespace is not None:
            options = replace(options, max_whitespace=max_whitespace)
        try:
            grammar, _ = schema_to_grammar(schema, options, f"{self.source_name}:{path}", self.limits)
        except SchemaError as err:
            raise SchemaError(f"{self.source_name}: {path}: {err.reason}", err.pointer) from None
        return grammar

    def _sequence(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        return seq(*(yield self.elements(fmt, path, ends, depth)))

    def _or(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        return alt(*(yield self.elements(fmt, path, ends, depth)))

    def _optional(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "content"})
        return optional((yield self.child(fmt, "content", path, ends, depth)))

    def _plus(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "content"})
        return repeat((yield self.child(fmt, "content", path, ends, depth)), 1, None)

    def _star(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "content"})
        return repeat((yield self.child(fmt, "content", path, ends, depth)), 0, None)

    def _repeat(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "content", "min", "max"})
        lo = self.field(fmt, "min", path, (int,))
        hi = self.field(fmt, "max", path, (int,))
        if lo < 0:
            raise self.error(_at(path, "min"), "must be a non-negative integer")
        if hi != -1 and hi < lo:
            raise self.error(_at(path, "max"), "must be at least min, or -1 for no upper bound")
        self.limits.check("max_repeat", max(lo, hi), f"structural tag repeat at {path}")
        return repeat((yield self.child(fmt, "content", path, ends, depth)), lo, None if hi == -1 else hi)

    def _token(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "token"})
        token = self.field(fmt, "token", path, (int, str))
        if isinstance(token, int):
            if token < 0:
                raise self.error(_at(path, "token"), "a token id must be non-negative")
            return Token(token)
        return TokenName(token)
        yield

    # ------------------------------------------------------------ tags and free text

    def _tag(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        begin, content, end = yield self.tag_parts(fmt, path, depth)
        return seq(begin, content, end)

    def tag_parts(self, fmt: Any, path: str, depth: int) -> Call[tuple[Expr, Expr, Expr]]:
        """A tag's begin, content and end; the content's free text stops at the tag's string
        ends."""
        if not isinstance(fmt, dict):
            raise self.error(path, f"expected a tag object, found {_json_kind(fmt)}")
        if self.field(fmt, "type", path, (str,), "tag") != "tag":
            raise self.error(_at(path, "type"), f"expected a 'tag' object, found {fmt['type']!r}")
        self.keys(fmt, path, {"type", "begin", "content", "end"})
        begin = yield self.delimiter(fmt, "begin", path, depth)
        end = yield self.delimiter(fmt, "end", path, depth)
        ends = tuple(self.encode(s, _at(path, "end")) for s in _end_strings(fmt["end"]) if s)
        content = yield self.lower(self.field(fmt, "content", path, (dict,)), _at(path, "content"), ends, depth + 1)
        return begin, content, end

    def delimiter(self, fmt: dict, key: str, path: str, depth: int) -> Call[Expr]:
        """A tag's ``begin`` or ``end``: a string, a token format, or (``end`` only) a list of
        strings."""
        value = self.field(fmt, key, path, (str, dict, list))
        where = _at(path, key)
        if isinstance(value, str):
            return literal(self.encode(value, where))
        if isinstance(value, list):
            if key != "end":
                raise self.error(where, "expected a string or a token object, found an array")
            if not value:
                raise self.error(where, "needs at least one end string")
            return alt(*(literal(self.encode(s, f"{where}[{i}]")) for i, s in enumerate(self.strings(fmt, key, path))))
        if value.get("type") != "token":
            raise self.error(where, "expected a string or a token object")
        out = yield self.lower(value, where, None, depth + 1)
        return out

    def free_text_ends(self, path: str, ends: tuple[bytes, ...] | None) -> tuple[bytes, ...]:
        if ends == ():
            raise self.error(path, "free text inside a tag needs a non-empty string end to stop at")
        return ends or ()

    def _any_text(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "excludes", "max_tokens", "max_chars"})
        excludes = [self.encode(s, _at(path, "excludes")) for s in self.strings(fmt, "excludes", path, [])]
        if self.field(fmt, "max_tokens", path, (int, type(None)), None) is not None:
            raise self.unsupported(_at(path, "max_tokens"), "any_text max_tokens",
                                   "a budget counted in tokens is not a language over bytes")
        max_chars = self.field(fmt, "max_chars", path, (int, type(None)), None)
        if max_chars is not None:
            if max_chars < 0:
                raise self.error(_at(path, "max_chars"), "must be a non-negative integer")
            self.limits.check("max_repeat", max_chars, f"any_text max_chars at {path}")
        return avoiding([*excludes, *self.free_text_ends(path, ends)], max_chars, self.limits)
        yield

    def triggers(self, fmt: dict, path: str) -> list[bytes]:
        triggers = self.strings(fmt, "triggers", path)
        if not triggers:
            raise self.error(_at(path, "triggers"), "needs at least one trigger")
        out = []
        for i, t in enumerate(triggers):
            if not t:
                raise self.error(f"{_at(path, 'triggers')}[{i}]", "a trigger must be a non-empty string")
            out.append(self.encode(t, f"{_at(path, 'triggers')}[{i}]"))
        return out

    def _triggered_tags(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "triggers", "tags", "at_least_one", "stop_after_first", "excludes"})
        triggers = self.triggers(fmt, path)
        excludes = [self.encode(s, _at(path, "excludes")) for s in self.strings(fmt, "excludes", path, [])]
        tags = self.field(fmt, "tags", path, (list,))
        at_least_one = self.field(fmt, "at_least_one", path, (bool,), False)
        stop_after_first = self.field(fmt, "stop_after_first", path, (bool,), False)
        stops = [*excludes, *self.free_text_ends(path, ends)]
        return (yield self.triggered([(f"{_at(path, 'tags')}[{i}]", t) for i, t in enumerate(tags)], triggers,
                                     _at(path, "triggers"), stops, at_least_one, stop_after_first, depth))

    def triggered(self, tags: list[tuple[str, Any]], triggers: list[bytes], triggers_path: str,
                  stops: list[bytes], at_least_one: bool, stop_after_first: bool, depth: int) -> Call[Expr]:
        """Free text and tags: each run of free text avoids ``stops`` and ends at the first
        trigger, which goes on as a tag whose begin starts with it."""
        if not tags:
            raise self.error(triggers_path[:-len("triggers")] + "tags", "needs at least one tag")
        after: dict[bytes, list[Expr]] = {t: [] for t in triggers}
        whole = []
        for tag_path, tag in tags:
            begin, content, end = yield self.tag_parts(tag, tag_path, depth + 1)
            if not isinstance(tag.get("begin"), str):
                raise self.error(f"{tag_path}.begin", "a triggered tag's begin must be a string")
            text = self.encode(tag["begin"], f"{tag_path}.begin")
            matched = [t for t in triggers if text.startswith(t)]
            if len(matched) != 1:
                which = "no trigger" if not matched else f"several triggers ({_names(matched)})"
                raise self.error(f"{tag_path}.begin", f"{tag['begin']!r} starts with {which}; a tag must "
                                 "start with exactly one trigger")
            after[matched[0]].append(seq(literal(text[len(matched[0]):]), content, end))
            whole.append(seq(begin, content, end))
        for i, t in enumerate(triggers):
            if not after[t]:
                raise self.error(f"{triggers_path}[{i}]", f"no tag's begin starts with the trigger {_names([t])}")
        tag = alt(*whole)
        if at_least_one and stop_after_first:
            return tag
        dispatch = alt(*(seq(until_trigger(t, triggers, stops, self.limits), alt(*after[t])) for t in triggers))
        free = avoiding([*stops, *triggers], None, self.limits)
        if stop_after_first:
            return alt(free, dispatch)
        loop = seq(repeat(dispatch, 0, None), free)
        return seq(tag, loop) if at_least_one else loop

    def _dispatch(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        """Free text in which each pattern, where it first occurs, goes on as its format;
        with ``loop`` false the output ends after the first format. Patterns must not occur
        in one another (then first occurrence is what XGrammar's matcher dispatches on)."""
        self.keys(fmt, path, {"type", "rules", "loop", "excludes"})
        rules = self.field(fmt, "rules", path, (list,))
        if not rules:
            raise self.error(_at(path, "rules"), "needs at least one rule")
        patterns, contents = [], []
        for i, rule in enumerate(rules):
            where = f"{_at(path, 'rules')}[{i}]"
            if not (isinstance(rule, list) and len(rule) == 2 and isinstance(rule[0], str)):
                raise self.error(where, "expected a [pattern, format] pair")
            if not rule[0]:
                raise self.error(f"{where}[0]", "a pattern must be a non-empty string")
            pattern = self.encode(rule[0], f"{where}[0]")
            if pattern in patterns:
                raise self.error(f"{where}[0]", f"the pattern {rule[0]!r} has a rule already")
            patterns.append(pattern)
            contents.append((yield self.lower(rule[1], f"{where}[1]", ends, depth + 1)))
        for i, p in enumerate(patterns):
            inside = [q for q in patterns if q != p and p in q]
            if inside:
                raise self.unsupported(f"{_at(path, 'rules')}[{i}][0]", "dispatch patterns inside one another",
                                       f"{_names([p])} occurs in {_names(inside)}: XGrammar then dispatches by "
                                       "the state of its pattern matcher, which is not implemented")
        # Unlike triggered_tags, the free text does not stop at the enclosing tag's end:
        # only ``excludes`` bound it (XGrammar's definition).
        stops = [self.encode(s, _at(path, "excludes")) for s in self.strings(fmt, "excludes", path, [])]
        one = alt(*(seq(until_trigger(p, patterns, stops, self.limits), c) for p, c in zip(patterns, contents)))
        free = avoiding([*stops, *patterns], None, self.limits)
        if not self.field(fmt, "loop", path, (bool,), True):
            return alt(free, one)
        return seq(repeat(one, 0, None), free)

    def _tags_with_separator(self, fmt: dict, path: str, ends: tuple[bytes, ...] | None, depth: int) -> Call[Expr]:
        self.keys(fmt, path, {"type", "tags", "separator", "at_least_one", "stop_after_first"})
        tags = self.field(fmt, "tags", path, (list,))
        if not tags:
            raise self.error(_at(path, "tags"), "needs at least one tag")
        separator = literal(self.encode(self.field(fmt, "separator", path, (str,)), _at(path, "separator")))
        at_least_one = self.field(fmt, "at_least_one", path, (bool,), False)
        stop_after_first = self.field(fmt, "stop_after_first", path, (bool,), False)
        whole = []
        for i, tag in enumerate(tags):
            whole.append(seq(*(yield self.tag_parts(tag, f"{_at(path, 'tags')}[{i}]", depth + 1))))
        one = alt(*whole)
        some = one if stop_after_first else seq(one, repeat(seq(separator, one), 0, None))
        return some if at_least_one else optional(some)


def parse_structural_tag(text: str, options: Mapping[str, Any] | None = None,
                         source_name: str = "<structural_tag>", limits: Limits = DEFAULT_LIMITS) -> Grammar:
    """The grammar of a structural-tag JSON document (start rule ``root``).

    Args:
        text: the JSON text.
        options: :meth:`CompileOptions.to_meta` (``regex_dialect`` for ``regex`` formats, the
            ``json_*`` options for ``json_schema`` ones).
        source_name: the name errors carry.
        limits: ``max_nesting`` bounds how deeply formats nest, ``max_repeat`` the counts of
            ``repeat`` and ``max_chars``; both reach the embedded frontends.

    Raises:
        GrammarSyntaxError: malformed JSON or a malformed document (the message names the
            JSON path), or a malformed embedded regex or grammar.
        UnsupportedFeatureError: a format type or field gramc does not implement.
        SchemaError: an invalid embedded JSON Schema.
        LimitExceededError: a limit of ``limits`` was exceeded.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise GrammarSyntaxError(f"{source_name}: invalid JSON at line {err.lineno}, column {err.colno}: "
                                 f"{err.msg}") from None
    except RecursionError:
        raise GrammarSyntaxError(f"{source_name}: the JSON nests too deeply") from None
    lowering = _Lowering(options or {}, source_name, limits)
    if not isinstance(doc, dict):
        raise lowering.error("", f"expected a JSON object, found {_json_kind(doc)}")
    kind = lowering.field(doc, "type", "", (str,), "structural_tag")  # XGrammar's default too
    if kind != "structural_tag":
        raise lowering.error("type", f"expected 'structural_tag', found {kind!r}")
    if "format" in doc or "structures" not in doc:
        lowering.keys(doc, "", {"type", "format"})
        body = stackless.run(lowering.lower(lowering.field(doc, "format", "", (dict,)), "format", None))
    else:
        body = stackless.run(_legacy(lowering, doc))
    return lowering.grammar(body)


def _legacy(lowering: _Lowering, doc: dict) -> Call[Expr]:
    """``{"structures": [{"begin", "schema", "end"}], "triggers": [...]}``: triggered tags
    whose contents are JSON Schemas (a schema may be given as JSON text)."""
    lowering.keys(doc, "", {"type", "structures", "triggers"})
    structures = lowering.field(doc, "structures", "", (list,))
    tags = []
    for i, item in enumerate(structures):
        path = f"structures[{i}]"
        if not isinstance(item, dict):
            raise lowering.error(path, f"expected an object, found {_json_kind(item)}")
        lowering.keys(item, path, {"begin", "schema", "end"})
        schema = lowering.field(item, "schema", path, (dict, bool, str))
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except (json.JSONDecodeError, RecursionError) as err:
                raise lowering.error(_at(path, "schema"), f"the schema text is not JSON: {err}") from None
        tag = {"begin": lowering.field(item, "begin", path, (str,)), "end": lowering.field(item, "end", path, (str,)),
               "content": {"type": "json_schema", "json_schema": schema}}
        tags.append((path, tag))
    return (yield lowering.triggered(tags, lowering.triggers(doc, ""), "triggers", [], False, False, 0))


_KIND_NAMES: dict[type, str] = {str: "a string", int: "an integer", bool: "a boolean", float: "a number",
                                 list: "an array", dict: "an object", type(None): "null"}


def _json_kind(value: Any) -> str:
    """What a JSON value is, for messages (a boolean is not an integer)."""
    for kind in (bool, str, int, float, list, dict, type(None)):
        if isinstance(value, kind):
            return _KIND_NAMES[kind]
    return type(value).__name__


def _end_strings(end: Any) -> list[str]:
    """The string ends of a tag's ``end`` (none for a token end)."""
    if isinstance(end, str):
        return [end]
    return [s for s in end if isinstance(s, str)] if isinstance(end, list) else []


def _at(path: str, key: str) -> str:
    """The JSON path of field ``key`` of the object at ``path`` (``""``: the document)."""
    return f"{path}.{key}" if path else key


def _names(strings: list[bytes]) -> str:
    return ", ".join(repr(s.decode("utf-8")) for s in strings)


#: The format types this frontend lowers.
FORMAT_TYPES = frozenset(_Lowering({}, "", DEFAULT_LIMITS).handlers)
