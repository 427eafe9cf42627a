"""The package layering of docs/architecture.md, checked on the source.

Every import of every module counts, lazy ones (inside functions) included: a lazy import of
the compiler from the runtime would still make a decoder depend on it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

import gramc

SRC = Path(gramc.__file__).parent
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

#: The parts of gramc: its subpackages and the modules at its root.
PARTS = sorted({p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
               | {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"})

#: Parts every part may import, left out of the architecture table: the error hierarchy,
#: and the package root (``__version__``, the ``gramc.compile`` facade).
EVERYWHERE = {"errors", "gramc"}

#: What a part must never import, whatever the table says (DESIGN.md: cli -> compiler/schemas
#: -> formats <- runtime; automata sits below the runtime; the bitmask layout below both).
NEVER = {
    "bitmask": set(PARTS) | {"gramc"},
    "errors": set(PARTS) | {"gramc"},
    "automata": {"runtime", "compiler", "schemas", "api", "cli", "integrations", "generation"},
    "runtime": {"compiler", "schemas", "api", "cli", "integrations", "generation"},
    "vocab": {"automata", "runtime", "compiler", "schemas", "api", "cli", "integrations", "formats"},
    "formats": {"automata", "runtime", "compiler", "schemas", "api", "cli", "vocab"},
}


def _imports(tree: ast.AST) -> list[str]:
    """Every absolute module named by an import in ``tree``, lazy imports included
    (``from a import b`` names ``a.b``: b may be a module)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [f"{node.module}.{a.name}" for a in node.names]
    return found


def _part(module: str) -> str | None:
    """The part of gramc a dotted name belongs to (``gramc`` for the root), None outside."""
    names = module.split(".")
    if names[0] != "gramc":
        return None
    return names[1] if len(names) > 1 and names[1] in PARTS else "gramc"


@lru_cache(maxsize=1)
def part_imports() -> dict[str, dict[str, set[str]]]:
    """Per part, the other parts it imports, each with the files that import it."""
    out: dict[str, dict[str, set[str]]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        me = "gramc" if rel.parts == ("__init__.py",) else rel.parts[0].removesuffix(".py")
        deps = out.setdefault(me, {})
        for module in _imports(ast.parse(path.read_text(), str(path))):
            other = _part(module)
            if other is not None and other != me:
                deps.setdefault(other, set()).add(str(rel))
    return out


def documented_imports() -> dict[str, set[str]]:
    """The architecture table: ``| `gramc.part` | job | imports |``; in the imports cell,
    parts are named plainly and anything in parentheses (third-party) is skipped."""
    table = {}
    for line in ARCHITECTURE.read_text().splitlines():
        m = re.match(r"\| `gramc\.(\w+)` \|[^|]*\|([^|]*)\|$", line)
        if m:
            cell = re.sub(r"\([^)]*\)", "", m.group(2)).replace("`", "")
            table[m.group(1)] = {w.strip() for w in cell.split(",") if w.strip()}
    return table


@pytest.mark.parametrize("part", sorted(NEVER))
def test_lower_parts_never_import_upper_ones(part):
    bad = {other: sorted(files) for other, files in part_imports().get(part, {}).items()
           if other in NEVER[part]}
    assert not bad, f"gramc.{part} imports {bad}"


def test_architecture_table_names_every_part_and_what_it_imports():
    """docs/architecture.md's package table is exact: one row per part, and its imports
    column lists exactly the parts imported (errors and the root aside)."""
    table = documented_imports()
    assert sorted(table) == PARTS
    for part, listed in table.items():
        assert listed <= set(PARTS), f"{part}: unknown part(s) {sorted(listed - set(PARTS))}"
        actual = set(part_imports().get(part, {})) - EVERYWHERE
        assert listed == actual, (f"gramc.{part}: the table lists {sorted(listed)}, the code "
                                  f"imports {sorted(actual)}")


def test_importing_gramc_does_not_import_the_compiler():
    code = (
        "import sys, gramc; gramc.load; "
        "bad = [m for m in sys.modules if m.startswith(('gramc.compiler', 'gramc.schemas', 'lark', "
        "'jsonschema', 'pycuda', 'torch'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_bitmask_is_importable_by_its_documented_old_name():
    """gramc.runtime.bitmask (documented before the layout moved to gramc.bitmask) is the
    same module under both names, in a fresh process and with either import form."""
    code = (
        "import gramc.runtime.bitmask as old; from gramc.runtime.bitmask import apply_bitmask; "
        "import gramc.bitmask as new; "
        "assert old is new and apply_bitmask is new.apply_bitmask; print('ok')"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stdout + res.stderr


def test_device_engine_reads_no_private_member_of_another_object():
    """runtime/cuda gets the batch's row maps and callbacks (RowMaps, HostSide), never the
    batch itself: no ``x._name`` on anything but ``self``/``cls``, and no import of the batch."""
    bad = []
    for path in sorted((SRC / "runtime" / "cuda").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
        bad += [f"{path.name}: imports {m}" for m in _imports(tree) if m.startswith("gramc.runtime.batch")]
    assert not bad, bad
