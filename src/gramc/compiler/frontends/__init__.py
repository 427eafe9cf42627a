"""Frontends: source text -> IR grammar. One module per source language.

:data:`FRONTENDS` maps a format name to a function ``(source, options) -> Grammar``;
:data:`EXTENSIONS` maps file extensions to format names for ``--format auto``.
"""

from __future__ import annotations

from typing import Callable

from gramc.compiler.ir import Grammar


def _regex(source: str, options: dict) -> Grammar:
    from gramc.compiler.frontends.regex import parse_regex

    dialect = options.get("regex_dialect", "unicode")
    return Grammar.single(parse_regex(source, dialect=dialect, source_name=options.get("source_name", "<regex>")))


FRONTENDS: dict[str, Callable[[str, dict], Grammar]] = {
    "regex": _regex,
}

EXTENSIONS: dict[str, str] = {
    ".regex": "regex",
    ".re": "regex",
    ".rx": "regex",
}
