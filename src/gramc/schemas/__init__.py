"""JSON Schema -> IR grammar (the ``json_schema`` source format).

:func:`schema_to_grammar` compiles a parsed schema (drafts 2020-12, 2019-09, 07, 06 and the
common draft-04 spellings) into a :class:`~gramc.compiler.ir.Grammar` whose language is the
JSON texts of valid instances, written with the whitespace the options allow, object members
in schema order. Keywords that cannot be enforced exactly are over-approximated and reported
(returned as :class:`Approximation` and issued as :class:`~gramc.errors.GramcWarning`), or
refused with :class:`~gramc.errors.SchemaError` in strict mode. See docs/json-schema.md.

>>> g, approx = schema_to_grammar({"type": "object", "properties": {"ok": {"type": "boolean"}},
...                                "required": ["ok"], "additionalProperties": False},
...                               SchemaOptions(whitespace="compact"))
>>> print(g, end="")
root ::= "{\\"ok\\":" ("true" | "false") "}"
>>> approx
[]
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from gramc.compiler.ir import Grammar
from gramc.errors import GramcWarning, SchemaError, Span
from gramc.limits import DEFAULT_LIMITS, Limits
from gramc.schemas.options import Approximation, SchemaOptions

__all__ = ["schema_to_grammar", "parse_schema_text", "compile_schema_text", "SchemaOptions",
           "Approximation"]


def schema_to_grammar(schema: dict | bool, options: SchemaOptions = SchemaOptions(),
                      source_name: str = "<schema>", limits: Limits = DEFAULT_LIMITS, *,
                      runtime_unique: bool = True) -> tuple[Grammar, list[Approximation]]:
    """The grammar of the JSON texts of the instances of ``schema``, and the list of
    over-approximations made (each also issued as a :class:`GramcWarning`).

    ``runtime_unique``: ``uniqueItems`` is left to the matcher, as the grammar's ``unique``
    plan (:mod:`gramc.schemas.unique`), wherever the plan can say which arrays it binds;
    False (a schema embedded where no matcher follows its JSON structure) over-approximates
    every ``uniqueItems``, reported.

    ``limits``: ``max_nesting`` bounds how deeply the schema document nests, ``max_repeat``
    the counts that become counted repetitions (``minItems``/``maxItems``,
    ``minContains``/``maxContains``, ``minProperties``/``maxProperties``, counted
    ``minLength``/``maxLength``) and the ``{m,n}`` of patterns.

    Raises:
        SchemaError: an invalid schema, an unresolvable ``$ref`` (the pointer names it), or in
            strict mode a keyword that cannot be enforced exactly.
        LimitExceededError: a limit of ``limits`` was exceeded (the message has the pointer).
    """
    from gramc.schemas.compiler import SchemaCompiler
    from gramc.schemas.refs import Document

    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema must be a JSON object or a boolean, not {type(schema).__name__}", "#")
    check_nesting(schema, limits)
    compiler = SchemaCompiler(Document(schema), options, limits, runtime_unique=runtime_unique)
    grammar = compiler.compile()
    if runtime_unique:
        from gramc.schemas.unique import UniquePlanner

        planner = UniquePlanner(compiler)
        grammar.unique = planner.plan()
        unplanned = planner.unplanned()
        if unplanned:  # objects the plan cannot locate keep schema order (a restriction): again
            compiler = SchemaCompiler(Document(schema), options, limits, runtime_unique=True, unplanned=unplanned)
            grammar = compiler.compile()
            planner = UniquePlanner(compiler)
            grammar.unique = planner.plan()
            if planner.unplanned():  # pragma: no cover - same document, same places
                raise AssertionError("an object's members condition is at no place of the plan")
    for message in compiler.doc.notes + compiler.notes:
        warnings.warn(GramcWarning(f"{source_name}: {message}"), stacklevel=2)
    for item in compiler.approximations + compiler.restrictions:
        warnings.warn(GramcWarning(f"{source_name}: {item}"), stacklevel=2)
    return grammar, list(compiler.approximations)


def check_nesting(schema: Any, limits: Limits) -> None:
    """LimitExceededError naming the first object or array nested deeper than
    ``max_nesting`` (walked iteratively: the compiler's own walk recurses along it)."""
    from gramc.schemas.refs import escape_token

    todo: list[tuple[Any, int, str]] = [(schema, 0, "")]
    while todo:
        node, depth, pointer = todo.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            if isinstance(child, (dict, list)):
                where = f"{pointer}/{escape_token(str(key))}"
                limits.check("max_nesting", depth + 1, f"schema nesting at #{where}")
                todo.append((child, depth + 1, where))


def parse_schema_text(text: str, source_name: str = "<schema>") -> Any:
    """Parse JSON schema text; malformed JSON raises SchemaError naming line and column
    (the error's ``span`` attribute holds the position)."""
    def reject_constant(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as err:
        span = Span(err.pos, err.lineno, err.colno, source_name)
        error = SchemaError(f"invalid JSON at {span}: {err.msg}", "")
        error.span = span
        raise error from None
    except (ValueError, RecursionError) as err:
        raise SchemaError(f"invalid JSON in {source_name}: {err}", "") from None


def compile_schema_text(text: str, options: dict, source_name: str = "<schema>",
                        limits: Limits = DEFAULT_LIMITS) -> Grammar:
    """The ``json_schema`` frontend: schema text and :meth:`CompileOptions.to_meta` -> grammar."""
    schema = parse_schema_text(text, source_name)
    grammar, _ = schema_to_grammar(schema, SchemaOptions.from_compile_options(options), source_name, limits)
    return grammar
