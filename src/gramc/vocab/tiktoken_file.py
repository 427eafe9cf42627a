"""Loader for tiktoken BPE rank files (``*.tiktoken``): one ``base64(token bytes) rank`` per line.

The rank is the token id. The format has no place for special tokens, so a file alone gives
a vocabulary without specials or EOS (GPT-2's ``gpt2.tiktoken`` has 50,256 lines, and
``<|endoftext|>`` = 50256 must be passed in). Ranks may leave gaps; gaps become holes.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from gramc.errors import VocabularyError
from gramc.vocab.core import Vocab
from gramc.vocab.pieces import guess_eos_ids, resolve_eos


def load_tiktoken(
    path: str | os.PathLike,
    special_tokens: Mapping[str, int] | None = None,
    eos: int | str | Iterable[int | str] | None = None,
    name: str | None = None,
) -> Vocab:
    """Read a ``.tiktoken`` rank file; ``special_tokens`` (text -> id) are added as specials.

    ``eos`` takes ids and/or special texts; ``None`` means "the specials whose text is a known
    end-of-sequence name" (none when no specials are given).

    Raises:
        VocabularyError: unreadable file, a malformed line, a repeated rank, or a special id
            that collides with a rank.
    """
    path = Path(path)
    ranks = _read_ranks(path)
    specials = dict(special_tokens or {})
    slots: list[bytes | None] = [None] * (max([*ranks, *specials.values(), -1]) + 1)
    for rank, token in ranks.items():
        slots[rank] = token
    for text, i in specials.items():
        if not isinstance(i, int) or i < 0:
            raise VocabularyError(f"{path}: special token {text!r} has invalid id {i!r}")
        if slots[i] is not None:
            raise VocabularyError(f"{path}: special token {text!r} id {i} is already a BPE rank")
        slots[i] = text.encode("utf-8")
    eos_ids = resolve_eos(eos, specials, str(path))
    if eos_ids is None:
        eos_ids = guess_eos_ids(specials)
    return Vocab.from_list(
        slots,
        special_ids=specials.values(),
        eos_ids=eos_ids,
        name=name or path.name,
        special_names=specials,
    )


def _read_ranks(path: Path) -> dict[int, bytes]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise VocabularyError(f"{path}: cannot read tiktoken file: {e.strerror or e}") from e
    ranks: dict[int, bytes] = {}
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError
            token, rank = base64.b64decode(parts[0], validate=True), int(parts[1])
        except (ValueError, binascii.Error):
            shown = line[:60].decode("utf-8", "replace")
            raise VocabularyError(
                f"{path}:{lineno}: expected 'base64-token rank', got {shown!r}"
            ) from None
        if rank < 0 or rank in ranks:
            raise VocabularyError(f"{path}:{lineno}: rank {rank} is negative or repeated")
        ranks[rank] = token
    if not ranks:
        raise VocabularyError(f"{path}: no tokens (expected 'base64-token rank' lines)")
    return ranks
