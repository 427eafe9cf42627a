"""The shell sessions in the user docs run as shown: each ``$ command`` line of a ``sh``
block is run (in a scratch folder beside a copy of examples/) and must print the lines that
follow it. A compile's elapsed time is the one part that may differ."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ["docs/quickstart.md", "docs/grammars/structural-tags.md"]
_SECONDS = re.compile(r", \d+\.\d+s$")


def sessions(path: Path) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for every ``$`` line of the file's sh blocks."""
    out: list[tuple[str, list[str]]] = []
    in_block = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_block = line.strip() == "```sh" and not in_block
            continue
        if not in_block:
            continue
        if line.startswith("$ "):
            out.append((line[2:].split("  #")[0].strip(), []))
        elif out and line.strip():
            out[-1][1].append(line)
    return out


@pytest.mark.parametrize("doc", SESSIONS)
def test_doc_sessions_print_what_they_show(doc, tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    found = sessions(ROOT / doc)
    assert found, f"no $ commands in {doc}"
    for command, expected in found:
        res = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        printed = [_SECONDS.sub(", Ts", x) for x in (res.stdout + res.stderr).splitlines() if x.strip()]
        assert printed == [_SECONDS.sub(", Ts", x) for x in expected], command
