"""Run the doctest examples in gramc's docstrings (public API examples must stay true)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import gramc

FINDER = doctest.DocTestFinder()


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(gramc.__path__, "gramc."):
        module = importlib.import_module(info.name)
        if any(t.examples for t in FINDER.find(module)):
            names.append(info.name)
    return sorted(names)


MODULES = _modules_with_examples()


def test_public_modules_carry_examples():
    assert {"gramc.compiler.ir", "gramc.api"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
