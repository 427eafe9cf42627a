"""Reading sources and texts for the CLI, with errors that name the file."""

from __future__ import annotations

import sys
from pathlib import Path

from gramc.errors import GramcError


def read_bytes(path: str) -> bytes:
    """The bytes of ``path`` (``-`` for stdin)."""
    if path == "-":
        return sys.stdin.buffer.read()
    return Path(path).read_bytes()


def read_source(path: str) -> str:
    """A source file as text (UTF-8; a BOM is dropped)."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise GramcError(f"{path}: not UTF-8 text (byte {err.start})") from None


def read_pattern_file(path: str, fmt: str) -> str:
    """A source file's text; a regex file's one final line break is not part of the pattern."""
    text = read_source(path)
    if fmt == "regex":
        text = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
    return text


def detect_format(path: str, fmt: str) -> str:
    """``fmt``, or for ``auto`` the format its file extension names."""
    from gramc.compiler.frontends import EXTENSIONS, FRONTENDS

    if fmt != "auto":
        if fmt not in FRONTENDS:
            raise GramcError(f"unknown format {fmt!r} (available: {', '.join(sorted(FRONTENDS))})")
        return fmt
    name = Path(path).name.lower()
    matches = [ext for ext in EXTENSIONS if name.endswith(ext)]
    suffix = max(matches, key=len) if matches else Path(path).suffix.lower()
    if suffix not in EXTENSIONS:
        known = ", ".join(f"{ext} ({name})" for ext, name in sorted(EXTENSIONS.items()))
        raise GramcError(f"{path}: cannot tell the format from {suffix or 'no extension'!r}; "
                         f"use --format (known extensions: {known})")
    return EXTENSIONS[suffix]
