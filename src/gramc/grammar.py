"""``gramc.grammar``: compose a grammar in Python, without writing grammar text.

Parts are immutable values: :func:`literal`, :func:`regex` (ECMA-262, whole match),
:func:`json_schema` (a dict, JSON text or pydantic model), and the combinators :func:`seq`,
:func:`alt`, :func:`optional`, :func:`star`, :func:`plus`, :func:`repeat`, :func:`tag`;
:func:`rule` names a part (shared, or recursive through :func:`ref`). Where a part is
expected, a plain ``str`` is a literal. ``gramc.compile(part, vocab=...)`` compiles one;
``str(part)`` prints its IR grammar in the IR printer's syntax.

Parts lower through gramc's own frontends (the regex frontend, the JSON Schema compiler),
embedded as the structural-tag frontend embeds them
(:class:`~gramc.compiler.frontends.structural_tag.Composer`). Importing this module imports
no compiler: that happens on the first lowering.

>>> from gramc import grammar as g
>>> call = g.tag("<n>", g.regex("[0-9]+"), "</n>")
>>> print(call, end="")
root ::= "<n>" [0-9]+ "</n>"
>>> value = g.rule("value", g.alt(g.regex("[a-z]"), g.seq("[", g.ref("value"), "]")))
>>> print(value, end="")
value ::= [a-z] | "[" value "]"
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from gramc.errors import GrammarSyntaxError, SchemaError

if TYPE_CHECKING:
    from gramc.compiler.ir import Expr, Grammar
    from gramc.compiler.stackless import Call
    from gramc.limits import Limits

__all__ = ["Part", "literal", "regex", "json_schema", "seq", "alt", "optional", "star", "plus", "repeat",
           "tag", "rule", "ref", "schema_text"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Part:
    """One part of a composed grammar: a ``kind`` and its arguments (strings, integers,
    None or parts). Build parts with the functions of this module."""

    kind: str
    args: tuple

    def source(self) -> str:
        """The canonical text of the part, compact JSON (``{"seq":[{"literal":"a"},...]}``):
        what ``gramc.compile`` records as the source, hashes and keys its cache with."""
        from gramc.compiler import stackless

        out: list[str] = []
        stackless.run(_write(self, out))
        return "".join(out)

    def lower(self, options: Mapping[str, Any] | None = None, source_name: str = "<grammar>",
              limits: Limits | None = None) -> Grammar:
        """The IR grammar of the part under ``options`` (:meth:`CompileOptions.to_meta`;
        default: the defaults). Its start rule is the part's name when it is a :func:`rule`,
        else ``root``.

        Raises:
            GrammarSyntaxError: a malformed regex, a :func:`ref` to no rule, two different
                rules of one name, or a rule name that clashes with an embedded grammar's.
            SchemaError: an invalid JSON Schema.
            LimitExceededError: a limit of ``limits`` was exceeded.
        """
        from gramc.compiler.pipeline import CompileOptions
        from gramc.limits import DEFAULT_LIMITS

        meta = CompileOptions().to_meta() if options is None else options
        return _Lowering(meta, source_name, limits or DEFAULT_LIMITS).grammar(self)

    def __str__(self) -> str:
        from gramc.compiler.ir import format_grammar

        return format_grammar(self.lower())


PartLike = Union[Part, str]


def literal(s: str) -> Part:
    """The exact text ``s`` (UTF-8)."""
    if not isinstance(s, str):
        raise TypeError(f"literal: expected a str, got {type(s).__name__}")
    return Part("literal", (s,))


def regex(pattern: str) -> Part:
    """The strings that ``pattern`` (ECMA-262 syntax, see docs/regex.md) matches whole."""
    if not isinstance(pattern, str):
        raise TypeError(f"regex: expected the pattern as a str, got {type(pattern).__name__}")
    return Part("regex", (pattern,))


def json_schema(schema: Any) -> Part:
    """The JSON texts valid under ``schema``: a dict (or bool), JSON text, or a pydantic
    model (anything with ``model_json_schema()``), compiled as ``format="json_schema"``
    compiles it. Property order is kept."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except (ValueError, RecursionError) as err:
            raise SchemaError(f"json_schema: the schema text is not JSON: {err}") from None
    return Part("json_schema", (schema_text(schema),))


def seq(*parts: PartLike) -> Part:
    """The parts one after another."""
    return Part("seq", _parts("seq", parts))


def alt(*parts: PartLike) -> Part:
    """Any one of the parts."""
    return Part("alt", _parts("alt", parts))


def repeat(part: PartLike, min: int, max: int | None) -> Part:
    """``part`` repeated ``min`` to ``max`` times (``max=None``: no upper bound)."""
    for name, value in (("min", min), ("max", max)):
        if value is None and name == "max":
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"repeat: {name} must be a non-negative int, got {value!r}")
    if max is not None and max < min:
        raise ValueError(f"repeat: max ({max}) is less than min ({min})")
    return Part("repeat", (_part("repeat", part), min, max))


def optional(part: PartLike) -> Part:
    """``part`` or nothing."""
    return repeat(part, 0, 1)


def star(part: PartLike) -> Part:
    """``part`` zero or more times."""
    return repeat(part, 0, None)


def plus(part: PartLike) -> Part:
    """``part`` one or more times."""
    return repeat(part, 1, None)


def tag(begin: PartLike, content: PartLike, end: PartLike) -> Part:
    """``content`` between ``begin`` and ``end`` (a structural tag's ``tag``)."""
    return seq(begin, content, end)


def rule(name: str, part: PartLike) -> Part:
    """``part`` as the rule ``name``: kept once however often it is used, and reachable by
    :func:`ref` from inside itself (recursion)."""
    _check_name("rule", name)
    return Part("rule", (name, _part("rule", part)))


def ref(name: str) -> Part:
    """A reference to the :func:`rule` ``name``, defined elsewhere in the same grammar."""
    _check_name("ref", name)
    return Part("ref", (name,))


def schema_text(schema: Any) -> str:
    """The canonical text of a JSON Schema given as a dict (or bool) or a pydantic model:
    compact JSON, keys in their given order (property order is part of the language)."""
    model_schema = getattr(schema, "model_json_schema", None)
    if callable(model_schema) and not isinstance(schema, (dict, bool)):
        schema = model_schema()
    if not isinstance(schema, (dict, bool)):
        raise TypeError(f"a JSON Schema is a dict, a bool, JSON text or a pydantic model, got {type(schema).__name__}")
    try:
        return json.dumps(schema, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as err:
        raise SchemaError(f"the schema is not JSON: {err}") from None
    except RecursionError:
        raise SchemaError("the schema nests too deeply to write as JSON") from None


def _write(part: Part, out: list[str]) -> Call[None]:
    """Append ``part``'s canonical text to ``out`` (on an explicit stack: parts nest as deep
    as the caller builds them)."""
    out.append("{" + json.dumps(part.kind) + ":")
    if part.kind == "json_schema":
        out.append(part.args[0])  # already the schema's canonical text
    else:
        out.append("[" if len(part.args) > 1 else "")
        for i, arg in enumerate(part.args):
            out.append("," if i else "")
            if isinstance(arg, Part):
                yield _write(arg, out)
            else:
                out.append(json.dumps(arg, ensure_ascii=False))
        out.append("]" if len(part.args) > 1 else "")
    out.append("}")


def _check_name(where: str, name: Any) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{where}: a rule name is letters, digits and '_' not starting with a digit, got {name!r}")


def _part(where: str, part: Any, index: int | None = None) -> Part:
    if isinstance(part, Part):
        return part
    if isinstance(part, str):
        return literal(part)
    which = "" if index is None else f" part {index + 1}"
    raise TypeError(f"{where}:{which} expected a gramc.grammar part or a str (a literal), got {type(part).__name__}")


def _parts(where: str, parts: tuple) -> tuple[Part, ...]:
    if not parts:
        raise ValueError(f"{where}: needs at least one part")
    return tuple(_part(where, p, i) for i, p in enumerate(parts))


class _Lowering:
    """One part tree to IR: the rules it defines, and the grammars it embeds."""

    def __init__(self, options: Mapping[str, Any], source_name: str, limits: Limits):
        from gramc.compiler.frontends.structural_tag import Composer

        self.options, self.source_name, self.limits = options, source_name, limits
        self.composer = Composer()
        self.defined: dict[str, Part] = {}
        self.rules: dict[str, Expr] = {}
        self.refs: set[str] = set()

    def grammar(self, top: Part) -> Grammar:
        from gramc.compiler.ir import Grammar

        from gramc.compiler import stackless

        body = stackless.run(self.expr(top, 1))
        start = top.args[0] if top.kind == "rule" else "root"
        if top.kind != "rule":
            if start in self.rules:
                raise self.error(f"a rule named {start!r} must be the whole grammar (the part given to compile)")
            self.rules = {start: body, **self.rules}
        for name in sorted(self.refs - set(self.rules)):
            raise self.error(f"ref({name!r}) names no rule of the grammar")
        for name in sorted(set(self.rules) & set(self.composer.rules)):
            raise self.error(f"the rule name {name!r} is taken by an embedded grammar's rule: rename it")
        c = self.composer
        return Grammar({**self.rules, **c.rules}, start, c.lexemes, c.captures, c.uncaptured)

    def error(self, reason: str) -> GrammarSyntaxError:
        return GrammarSyntaxError(f"{self.source_name}: {reason}")

    def expr(self, part: Part, depth: int) -> Call[Expr]:
        """The IR of ``part`` at nesting ``depth`` (a :mod:`stackless` call)."""
        from gramc.compiler import ir

        self.limits.check("max_nesting", depth, "gramc.grammar parts")
        kind, args = part.kind, part.args
        if kind in ("seq", "alt"):
            items = []
            for p in args:
                items.append((yield self.expr(p, depth + 1)))
            return ir.seq(*items) if kind == "seq" else ir.alt(*items)
        if kind == "repeat":
            self.limits.check("max_repeat", args[2] if args[2] is not None else args[1], "gramc.grammar repeat")
            return ir.repeat((yield self.expr(args[0], depth + 1)), args[1], args[2])
        if kind == "rule":
            name = args[0]
            if name in self.defined:
                if self.defined[name] is not part and self.defined[name] != part:
                    raise self.error(f"two different rules are named {name!r}")
                return ir.Ref(name)
            self.defined[name] = part
            self.rules[name] = ir.EMPTY  # keeps the rules in the order they are met
            self.rules[name] = yield self.expr(args[1], depth + 1)
            return ir.Ref(name)
        return self.leaf(part)

    def leaf(self, part: Part) -> Expr:
        """The IR of a part without sub-parts."""
        from gramc.compiler import ir

        kind, args = part.kind, part.args
        if kind == "literal":
            return ir.text(args[0])
        if kind == "ref":
            self.refs.add(args[0])
            return ir.Ref(args[0])
        if kind == "regex":
            from gramc.compiler.frontends.regex import parse_regex

            return parse_regex(args[0], dialect=self.options.get("regex_dialect", "unicode"),
                               source_name=f"{self.source_name}: regex {args[0]!r}", limits=self.limits)
        if kind == "json_schema":
            from gramc.compiler.frontends import _require

            _require("jsonschema", "json_schema")
            from gramc.schemas import compile_schema_text

            return self.composer.embed(compile_schema_text(args[0], dict(self.options), self.source_name,
                                                           self.limits), "json")
        raise TypeError(f"not a gramc.grammar part kind: {kind!r}")
