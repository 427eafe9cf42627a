"""Vocabularies shipped inside the package (``gramc/vocab/data/<name>.vocab.zst``).

A bundle is a zstd frame holding one msgpack map with named keys:

============== ===============================================================
key            value
============== ===============================================================
format         ``"gramc.vocab.bundle"``
version        ``1``
name           the vocabulary name (``"gpt2"``)
tokens         array of bin: the bytes of every token id, in id order
special_ids    array of int, sorted
eos_ids        array of int, sorted
special_names  map str -> int
fingerprint    :attr:`Vocab.fingerprint` of the content, checked on load
source         where the data came from; ``source_sha256``: that file's hash
license        the data's license
============== ===============================================================

``tools/make_bundled_gpt2.py`` writes ``gpt2.vocab.zst`` deterministically (fixed key order,
fixed zstd level, no timestamps) from ``shared/vocabs/gpt2.tiktoken``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import msgpack
import zstandard

from gramc.errors import VocabularyError
from gramc.vocab.core import Vocab

FORMAT = "gramc.vocab.bundle"
VERSION = 1
ZSTD_LEVEL = 19
MAX_BUNDLE_BYTES = 64 << 20

#: Names :func:`load_bundled` (and so ``load_vocab``) accepts.
BUNDLED_NAMES: tuple[str, ...] = ("gpt2",)


@cache
def load_bundled(name: str) -> Vocab:
    """The bundled vocabulary ``name`` (loaded once per process; :class:`Vocab` is immutable).

    Raises:
        VocabularyError: an unknown name, or a damaged data file.
    """
    if name not in BUNDLED_NAMES:
        raise VocabularyError(
            f"no bundled vocabulary {name!r} (bundled: {', '.join(BUNDLED_NAMES)})"
        )
    blob = resources.files("gramc.vocab").joinpath("data").joinpath(f"{name}.vocab.zst").read_bytes()
    return decode_bundle(blob, source=f"bundled {name}")


def encode_bundle(vocab: Vocab, **provenance: str) -> bytes:
    """The bundle bytes of ``vocab``; ``provenance`` adds ``source``/``source_sha256``/``license``."""
    doc: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "name": vocab.name,
        "tokens": list(vocab.tokens),
        "special_ids": sorted(vocab.special_ids),
        "eos_ids": list(vocab.eos_ids),
        "special_names": dict(sorted(vocab.special_names.items())),
        "fingerprint": vocab.fingerprint,
    }
    doc.update(sorted(provenance.items()))
    packed = msgpack.packb(doc, use_bin_type=True)
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True).compress(packed)


def decode_bundle(blob: bytes, source: str = "bundle") -> Vocab:
    """Read bundle bytes back into a :class:`Vocab`, checking format, version and fingerprint."""
    try:
        packed = zstandard.ZstdDecompressor().decompress(blob, max_output_size=MAX_BUNDLE_BYTES)
        doc = msgpack.unpackb(packed, raw=False, strict_map_key=True)
    except (zstandard.ZstdError, ValueError, msgpack.ExtraData) as e:
        raise VocabularyError(f"{source}: damaged vocabulary bundle ({e})") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise VocabularyError(f"{source}: not a version-{VERSION} gramc vocabulary bundle")
    vocab = Vocab(
        doc["tokens"], doc["special_ids"], doc["eos_ids"], doc["special_names"], doc["name"]
    )
    if vocab.fingerprint != doc.get("fingerprint"):
        raise VocabularyError(f"{source}: vocabulary bundle fails its fingerprint check")
    return vocab
