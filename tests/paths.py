"""Where the shared test material lives: ../shared beside the repository, or the folder
``$GRAMC_SHARED`` names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("GRAMC_SHARED") or Path(__file__).resolve().parents[2] / "shared")


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip the test (with the path) when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared test material not found: {path}")
    return path
