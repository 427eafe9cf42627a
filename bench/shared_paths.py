"""Where the benchmarks find the shared vocabularies and corpora: ``../shared`` beside the
repository, or the folder ``$GRAMC_SHARED`` names."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GRAMC_SHARED") or REPO.parent / "shared")
