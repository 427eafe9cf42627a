"""The GBNF frontend: llama.cpp's grammar notation to IR (see docs/grammars/gbnf.md).

Supported: ``name ::= ...`` rules (names of letters, digits and ``-``), the start rule
``root``, ``|``, groups, ``* + ?``, ``{m}`` ``{m,}`` ``{m,n}`` ``{,n}``, string literals
with llama.cpp's escapes (``\\x..`` ``\\u....`` ``\\U........`` are code points), character
classes over code points (``[^...]`` is the complement over every code point), ``.`` (any
code point), ``#`` comments, special tokens ``<[id]>`` and ``<name>``. Everything that is
code points is lowered to UTF-8 bytes.

Differences from llama.cpp: a rule runs until the next ``name ::=``, so a rule may continue
on the next line without parentheses; ``{,n}`` is accepted; reversed class ranges are an
error. As in llama.cpp, undefined rules and left recursion are errors. The negated token
references ``!<[id]>`` / ``!<name>`` ("any single token except") are refused with
:class:`~gramc.errors.UnsupportedFeatureError`: gramc matches bytes and named special
tokens, and "any other token" has no byte-level meaning before a vocabulary is bound.

>>> print(parse_gbnf('root ::= "a" item{2,3} <[7]>\\nitem ::= [0-9] | "-"'), end="")
root ::= "a" item{2,3} <[7]>
item ::= [\\-0-9]
"""

from __future__ import annotations

import re

from gramc.compiler.frontends.grammar_lexing import (
    GBNF_ESCAPES,
    Comment,
    Scanner,
    Tok,
    char_class,
    negated_special_token,
    repetition_bounds,
    special_token,
    string_literal,
)
from gramc.compiler.frontends.grammar_parsing import (
    Notation,
    RuleParser,
    check_references,
    punct,
    tokenize,
)
from gramc.compiler.frontends.language_ops import find_left_recursion
from gramc.compiler.ir import Grammar
from gramc.compiler.unicode import ALL_CODEPOINTS
from gramc.errors import GrammarSyntaxError, UnsupportedFeatureError
from gramc.limits import DEFAULT_LIMITS, Limits

_NAME = re.compile(r"[A-Za-z0-9_-]+")


def _name(sc: Scanner) -> Tok | None:
    start = sc.pos
    name = sc.take(_NAME)
    if name is None:
        return None
    if "_" in name:
        raise sc.error(
            f"'_' is not allowed in GBNF rule names ({name!r}): llama.cpp allows letters, digits "
            "and '-'", start + name.index("_"))
    return Tok("name", start, name)


def _any_char(sc: Scanner) -> Tok:
    return Tok("atom", sc.punct(".").offset, ALL_CODEPOINTS.to_ir())


GBNF = Notation(
    name="GBNF",
    define="::=",
    handlers={
        '"': lambda sc: Tok("atom", sc.pos, string_literal(sc, GBNF_ESCAPES)),
        "[": lambda sc: Tok("atom", sc.pos, char_class(sc, GBNF_ESCAPES)[0]),
        "{": lambda sc: Tok("bounds", sc.pos, repetition_bounds(sc)),
        "<": special_token,
        "!": negated_special_token,
        ".": _any_char,
        **{c: punct(c) for c in "()|*+?"},
    },
    name_token=_name,
    comments=(Comment("#"),),
)


def parse_gbnf(text: str, source_name: str = "<gbnf>", *, start: str = "root",
               limits: Limits = DEFAULT_LIMITS) -> Grammar:
    """Parse GBNF text into an IR grammar whose start rule is ``start``.

    Args:
        text: the grammar source.
        source_name: the name error spans carry.
        start: the start rule (llama.cpp: ``root``).
        limits: ``max_nesting`` bounds group nesting, ``max_repeat`` the ``{m,n}`` bounds.

    Raises:
        GrammarSyntaxError: malformed text, an undefined or twice-defined rule, no start rule.
        UnsupportedFeatureError: negated token references; left recursion (as llama.cpp).
        LimitExceededError: a limit of ``limits`` was exceeded.
    """
    sc = Scanner(text, source_name, limits)
    parsed = RuleParser(sc, tokenize(sc, GBNF), GBNF).parse()
    check_references(sc, parsed)
    if start not in parsed.rules:
        raise _missing_start(sc, start, list(parsed.rules))
    cycle = find_left_recursion(parsed.rules)
    if cycle is not None:
        raise UnsupportedFeatureError(
            "left recursion", sc.span(parsed.defined_at[cycle[0]]),
            f"rule {cycle[0]!r} is left-recursive ({' -> '.join(cycle)}); GBNF (as in llama.cpp) "
            "does not allow left recursion: rewrite it with repetition, e.g. a ::= b (\"x\" b)*")
    return Grammar(parsed.rules, start)


def _missing_start(sc: Scanner, start: str, names: list[str]) -> GrammarSyntaxError:
    if not names:
        return sc.error(f"the grammar defines no rules (it needs a {start!r} rule)", 0)
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    return sc.error(f"the grammar has no {start!r} rule to start from (it defines {shown})", 0)
