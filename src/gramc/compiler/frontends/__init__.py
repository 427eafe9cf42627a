"""Frontends: source text -> IR grammar. One module per source language.

:data:`FRONTENDS` maps a format name to a function ``(source, options, source_name, limits)
-> Grammar`` (``options`` is :meth:`CompileOptions.to_meta`, ``source_name`` is used in errors,
``limits`` is the caller's :class:`~gramc.limits.Limits`: ``max_repeat`` and ``max_nesting``
are enforced by every frontend);
:data:`EXTENSIONS` maps file extensions to format names for ``--format auto`` (the longest
that ends the file name wins: ``.stag.json`` before ``.json``).

The lark and json_schema frontends (and the structural_tag one for its embedded schemas and
Lark grammars) need third-party packages that only the ``compile`` extra
installs (the base install is the runtime); without them they raise a
:class:`~gramc.errors.BackendUnavailableError` naming the extra before parsing anything.
"""

from __future__ import annotations

import importlib
from typing import Callable

from gramc.compiler.ir import Grammar
from gramc.errors import BackendUnavailableError
from gramc.limits import Limits


def _require(package: str, format: str) -> None:
    """Raise :class:`BackendUnavailableError` when ``package``, which the ``format`` frontend
    imports, is not installed (``pip install gramc`` leaves it out; ``gramc[compile]`` has it)."""
    try:
        importlib.import_module(package)
    except ImportError as e:
        raise BackendUnavailableError(
            f"format={format!r} needs the {package!r} package, which the runtime-only install of "
            f"gramc leaves out: pip install 'gramc[compile]'") from e


def _regex(source: str, options: dict, source_name: str, limits: Limits) -> Grammar:
    from gramc.compiler.frontends.regex import parse_regex

    return Grammar.single(parse_regex(source, dialect=options["regex_dialect"], source_name=source_name,
                                      limits=limits, whole_text=True))


def _gbnf(source: str, options: dict, source_name: str, limits: Limits) -> Grammar:
    from gramc.compiler.frontends.gbnf import parse_gbnf

    return parse_gbnf(source, source_name=source_name, limits=limits)


def _ebnf(source: str, options: dict, source_name: str, limits: Limits) -> Grammar:
    from gramc.compiler.frontends.ebnf import parse_ebnf

    return parse_ebnf(source, source_name=source_name, limits=limits)


def _lark(source: str, options: dict, source_name: str, limits: Limits) -> Grammar:
    _require("lark", "lark")
    from gramc.compiler.frontends.lark import parse_lark

    return parse_lark(source, source_name=source_name, limits=limits)


def _json_schema(source: str, options: dict, source_name: str, limits: Limits) -> Grammar:
    _require("jsonschema", "json_schema")
    from gramc.schemas import compile_schema_text

    return compile_schema_text(source, options, source_name, limits)


def _structural_tag(source: str, options: dict, source_name: str, limits: Limits) -> Grammar:
    from gramc.compiler.frontends.structural_tag import parse_structural_tag

    return parse_structural_tag(source, options, source_name, limits)


FRONTENDS: dict[str, Callable[[str, dict, str, Limits], Grammar]] = {
    "regex": _regex,
    "gbnf": _gbnf,
    "ebnf": _ebnf,
    "lark": _lark,
    "json_schema": _json_schema,
    "structural_tag": _structural_tag,
}

EXTENSIONS: dict[str, str] = {
    ".regex": "regex",
    ".re": "regex",
    ".rx": "regex",
    ".gbnf": "gbnf",
    ".ebnf": "ebnf",
    ".lark": "lark",
    ".json": "json_schema",
    ".stag.json": "structural_tag",
}
