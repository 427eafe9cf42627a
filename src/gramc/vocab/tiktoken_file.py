"""Loader for tiktoken BPE rank files (``*.tiktoken``): one ``base64(token bytes) rank`` per line.

The rank is the token id. The format has no place for special tokens: the standard encodings'
files are recognised by their SHA-256 and get their published specials (GPT-2's
``gpt2.tiktoken`` has 50,256 lines and ``<|endoftext|>`` = 50256); any other file gives a
vocabulary without specials or EOS unless they are passed in, with a warning, since a
decoder could then never stop. Ranks may leave gaps; gaps become holes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

from gramc.errors import GramcWarning, VocabularyError
from gramc.vocab.core import Vocab
from gramc.vocab.pieces import guess_eos_ids, resolve_eos

_ENDOFTEXT, _ENDOFPROMPT = "<|endoftext|>", "<|endofprompt|>"
_FIM = ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>")

#: SHA-256 of a standard encoding's rank file -> its special tokens, as the ``tiktoken``
#: package and the Qwen tokenizer publish them. p50k_edit shares p50k_base's file (and adds
#: three FIM specials): a file of that hash is taken as p50k_base.
STANDARD_SPECIALS: dict[str, dict[str, int]] = {
    # r50k_base (GPT-2, GPT-3)
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930": {_ENDOFTEXT: 50256},
    # p50k_base
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069": {_ENDOFTEXT: 50256},
    # cl100k_base
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7": {
        _ENDOFTEXT: 100257, **dict(zip(_FIM, range(100258, 100261))), _ENDOFPROMPT: 100276},
    # o200k_base
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d": {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    # Qwen (qwen.tiktoken)
    "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186": {
        _ENDOFTEXT: 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
        **{f"<|extra_{i}|>": 151646 + i for i in range(205)}},
}


def load_tiktoken(
    path: str | os.PathLike,
    special_tokens: Mapping[str, int] | None = None,
    eos: int | str | Iterable[int | str] | None = None,
    name: str | None = None,
) -> Vocab:
    """Read a ``.tiktoken`` rank file; ``special_tokens`` (text -> id) are added as specials.

    ``special_tokens=None`` means "the standard encoding's specials" for a file of a standard
    encoding (:data:`STANDARD_SPECIALS`), none for any other. ``eos`` takes ids and/or special
    texts; ``None`` means "the specials whose text is a known end-of-sequence name".

    Warns:
        GramcWarning: the vocabulary has no end-of-sequence id (a decoding loop would never
            stop on one); name it with ``special_tokens`` and ``eos``.

    Raises:
        VocabularyError: unreadable file, a malformed line, a repeated rank, or a special id
            that collides with a rank.
    """
    path = Path(path)
    data = _read_bytes(path)
    ranks = _read_ranks(path, data)
    if special_tokens is None:
        special_tokens = STANDARD_SPECIALS.get(hashlib.sha256(data).hexdigest())
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
    if not eos_ids:
        warnings.warn(
            f"{path}: no end-of-sequence token (a .tiktoken file names none, and this one is not "
            "a standard encoding's): generation cannot stop on one; pass special_tokens= and eos= "
            "(Vocab.from_tiktoken) or --eos (the CLI)",
            GramcWarning,
            stacklevel=3,
        )
    return Vocab.from_list(
        slots,
        special_ids=specials.values(),
        eos_ids=eos_ids,
        name=name or path.name,
        special_names=specials,
    )


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise VocabularyError(f"{path}: cannot read tiktoken file: {e.strerror or e}") from e


def _read_ranks(path: Path, data: bytes) -> dict[int, bytes]:
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
