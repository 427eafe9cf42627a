"""What ``gramc compile --stats`` reports: time per stage, peak memory, artifact size.

The compile reports each stage's name as it starts (the ``progress`` callback of
:func:`gramc.compile`); :class:`StageTimer` turns those calls into durations.
"""

from __future__ import annotations

import re
import sys
import time

import click


class StageTimer:
    """Durations of consecutive named stages: call it with each stage's name as it starts."""

    def __init__(self) -> None:
        self._marks: list[tuple[str, float]] = []

    def __call__(self, stage: str) -> None:
        self._marks.append((stage, time.perf_counter()))

    def durations(self) -> list[tuple[str, float]]:
        """(stage, seconds) for every stage, the last one ending now."""
        ends = [t for _, t in self._marks[1:]] + [time.perf_counter()]
        return [(stage, end - start) for (stage, start), end in zip(self._marks, ends)]


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory so far (None where the OS does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS: bytes; Linux: KiB


def format_stats(artifact_bytes: int, durations: list[tuple[str, float]], peak: int | None) -> str:
    """The ``--stats`` report: one ``name: value`` line each, then one line per stage."""
    lines = [f"artifact size: {artifact_bytes:,} bytes"]
    lines.append(f"peak memory: {peak / 2**20:,.1f} MiB" if peak is not None else "peak memory: unknown")
    lines.append(f"total time: {sum(s for _, s in durations):.3f} s")
    width = max((len(stage) for stage, _ in durations), default=0)
    lines += [f"  {stage:<{width}}  {seconds:8.3f} s" for stage, seconds in durations]
    return "\n".join(lines)


_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


class ByteSize(click.ParamType):
    """A size in bytes: ``1048576``, ``512M``, ``4G``, ``4GiB`` (K, M, G, T are powers of 1024)."""

    name = "size"

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        m = _SIZE.fullmatch(str(value))
        if m is None:
            self.fail(f"{value!r} is not a size (examples: 1048576, 512M, 4G)", param, ctx)
        return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))
