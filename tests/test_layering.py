"""The package layering of docs/architecture.md, checked on the source."""

from __future__ import annotations

import subprocess
import sys


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
