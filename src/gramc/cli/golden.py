"""Golden artifacts: sources under ``golden/cases/<name>/`` with their expected outputs.

Each case directory holds one source file (``source.<ext>``, the extension names the format)
and an optional ``options.json`` (CompileOptions fields). ``update`` writes ``program.gmask``
(bound to the bundled gpt2 vocabulary), ``ir.txt`` and ``automaton.txt``; ``check`` rebuilds them
and reports every file whose bytes differ.
"""

from __future__ import annotations

import json
from pathlib import Path

from gramc.api import compile as compile_artifact
from gramc.automata.text import format_automaton
from gramc.cli.sources import detect_format, read_pattern_file
from gramc.compiler.pipeline import CompileOptions
from gramc.errors import GramcError

GOLDEN_VOCAB = "gpt2"


def build_case(case: Path) -> dict[str, bytes]:
    """The expected files of one case, rebuilt from its source."""
    sources = sorted(p for p in case.glob("source.*"))
    if len(sources) != 1:
        raise GramcError(f"{case}: expected exactly one source.* file, found {len(sources)}")
    src = sources[0]
    opts_file = case / "options.json"
    options = CompileOptions(**json.loads(opts_file.read_text())) if opts_file.exists() else CompileOptions()
    fmt = detect_format(str(src), "auto")
    text = read_pattern_file(str(src), fmt)
    artifact = compile_artifact(text, fmt, GOLDEN_VOCAB, options=options)
    return {
        "program.gmask": artifact.to_bytes(),
        "ir.txt": artifact.meta["ir"].encode(),
        "automaton.txt": format_automaton(artifact).encode(),
    }


def run_golden(root: Path, update: bool) -> list[str]:
    """Check (or rewrite) every case under ``root/cases``; returns problems (or updates)."""
    cases = sorted(p for p in (root / "cases").iterdir() if p.is_dir()) if (root / "cases").is_dir() else []
    if not cases:
        raise GramcError(f"no golden cases under {root / 'cases'}")
    lines = []
    for case in cases:
        for name, data in build_case(case).items():
            path = case / name
            if update:
                if not path.exists() or path.read_bytes() != data:
                    path.write_bytes(data)
                    lines.append(f"updated {path}")
            elif not path.exists():
                lines.append(f"{path}: missing (run `gramc golden update`)")
            elif path.read_bytes() != data:
                lines.append(f"{path}: differs from a fresh build")
    return lines
