"""Where the shared test material lives: ../shared beside the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip the test (with the path) when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared test material not found: {path}")
    return path
