"""The package layering of docs/architecture.md, checked on the source."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import gramc


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
    cuda = Path(gramc.__file__).parent / "runtime" / "cuda"
    bad = []
    for path in sorted(cuda.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
        bad += [f"{path.name}: imports {m}" for m in _imports(tree) if m.startswith("gramc.runtime.batch")]
    assert not bad, bad
