"""``load_vocab``: one entry point from a user-supplied spec to a :class:`Vocab`."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from gramc.errors import VocabularyError
from gramc.vocab.core import Vocab

ACCEPTED = (
    "a bundled name ('gpt2'), a tokenizer.json (*.json), a tiktoken rank file (*.tiktoken),"
    " a GGUF file (*.gguf), a folder holding tokenizer.json, or a Vocab"
)

_CACHE_SIZE = 8
_cache: OrderedDict[tuple, Vocab] = OrderedDict()
_lock = threading.Lock()


def load_vocab(spec: str | os.PathLike | Vocab) -> Vocab:
    """Load a vocabulary from a bundled name, a tokenizer file, or pass a :class:`Vocab` through.

    ========================== ===============================================================
    spec                       loader
    ========================== ===============================================================
    ``"gpt2"``                 :meth:`Vocab.gpt2` (bundled)
    ``*.json``                 :meth:`Vocab.from_tokenizer_json`
    ``*.tiktoken``             :meth:`Vocab.from_tiktoken`: a standard encoding's file gets
                               its specials, any other none (with a warning: no EOS)
    ``*.gguf``                 :meth:`Vocab.from_gguf`
    a folder                   its ``tokenizer.json``
    a :class:`Vocab`           returned as is
    ========================== ===============================================================

    Files are cached per (resolved path, modification time, size): loading the same
    unchanged file again returns the same object without reading it.

    >>> load_vocab("gpt2") is load_vocab("gpt2")
    True

    Raises:
        VocabularyError: an unknown name, a missing file, an unsupported extension, or a file
            its loader rejects; the message names the spec and what is accepted.
    """
    if isinstance(spec, Vocab):
        return spec
    if not isinstance(spec, (str, os.PathLike)):
        raise VocabularyError(
            f"cannot load a vocabulary from {type(spec).__name__}; expected {ACCEPTED}"
        )
    from gramc.vocab.bundled import BUNDLED_NAMES, load_bundled

    if isinstance(spec, str) and spec in BUNDLED_NAMES:
        return load_bundled(spec)
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    loader = _loader_for(path, spec)
    try:
        path = path.resolve(strict=True)
        stat = path.stat()
    except OSError:
        raise VocabularyError(
            f"vocabulary {str(spec)!r}: no such file (expected {ACCEPTED})"
        ) from None
    return _cached((str(path), stat.st_mtime_ns, stat.st_size), lambda: loader(path))


def known_vocab(fingerprint: str, name: str) -> Vocab | None:
    """A vocabulary with ``fingerprint`` that needs no file: one :func:`load_vocab` has loaded
    in this process (while cached), else the bundled one called ``name``, else None. What a
    loaded artifact that binds its vocabulary by fingerprint uses when none is given."""
    with _lock:
        for vocab in reversed(_cache.values()):
            if vocab.fingerprint == fingerprint:
                return vocab
    from gramc.vocab.bundled import BUNDLED_NAMES, load_bundled

    if name in BUNDLED_NAMES and load_bundled(name).fingerprint == fingerprint:
        return load_bundled(name)
    return None


def clear_cache() -> None:
    """Forget every vocabulary :func:`load_vocab` has cached."""
    with _lock:
        _cache.clear()


def _loader_for(path: Path, spec: object) -> Callable[[Path], Vocab]:
    suffix = path.suffix.lower()
    if suffix == ".json":
        return Vocab.from_tokenizer_json
    if suffix == ".tiktoken":
        return Vocab.from_tiktoken
    if suffix == ".gguf":
        return Vocab.from_gguf
    raise VocabularyError(f"vocabulary {str(spec)!r}: unrecognised kind; expected {ACCEPTED}")


def _cached(key: tuple, load: Callable[[], Vocab]) -> Vocab:
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    vocab = load()  # outside the lock: loading can take seconds
    with _lock:
        _cache[key] = vocab
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return vocab
