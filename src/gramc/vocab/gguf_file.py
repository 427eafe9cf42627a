"""Loader for the vocabulary in a GGUF file (llama.cpp), read with the ``gguf`` package.

Only metadata is read: ``tokenizer.ggml.tokens``, ``tokenizer.ggml.token_type`` and
``tokenizer.ggml.model`` (plus the EOS keys). Token types follow llama.cpp's enum, and token
bytes follow llama.cpp's ``token_to_piece``:

=========================  =============================================================
type                       bytes
=========================  =============================================================
1 NORMAL                   ``model=llama``/``t5``/``bert``: ``"▁"`` -> space;
                           ``model=gpt2``: the inverse GPT-2 ``bytes_to_unicode`` map
6 BYTE                     ``"<0xNN>"`` -> the single byte ``NN``
4 USER_DEFINED             the token text as UTF-8, unchanged
2 UNKNOWN, 3 CONTROL,      special (never matched by grammar bytes); the token text is kept
5 UNUSED, 0 undefined      for display, and named specials go to ``special_names``
=========================  =============================================================

A file without ``token_type`` is read as all NORMAL. End-of-sequence ids, unless ``eos_ids`` is
passed, are ``tokenizer.ggml.eos_token_id``, ``eot_token_id`` and ``eom_token_id`` (those
present), plus, as llama.cpp does for its end-of-generation set, the special tokens whose text
is a known EOS name (:data:`gramc.vocab.pieces.EOS_TOKEN_NAMES`; Phi-3's ``<|end|>``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gramc.errors import VocabularyError
from gramc.vocab.core import Vocab
from gramc.vocab.pieces import (
    byte_fallback_value,
    byte_level_to_bytes,
    guess_eos_ids,
    sentencepiece_to_bytes,
)

log = logging.getLogger("gramc.vocab")

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
_MATCHED_TYPES = frozenset({NORMAL, USER_DEFINED, BYTE})
_SPM_MODELS = frozenset({"llama", "t5", "bert"})
_BPE_MODELS = frozenset({"gpt2"})
_GGUF_STRING = 8  # GGUFValueType.STRING
_EOS_KEYS = ("eos_token_id", "eot_token_id", "eom_token_id")


def load_gguf(
    path: str | os.PathLike, eos_ids: Iterable[int] | None = None, name: str | None = None
) -> Vocab:
    """Read the vocabulary of a GGUF file (see the module doc for the rules).

    Raises:
        VocabularyError: ``gguf`` not installed, unreadable or non-GGUF file, a GGUF without a
            vocabulary, an unsupported tokenizer model, or a malformed BYTE token.
    """
    path = Path(path)
    reader = _open(path)
    model = _scalar(reader, "tokenizer.ggml.model", path)
    texts = _strings(reader, "tokenizer.ggml.tokens", path)
    if model is None or texts is None:
        raise VocabularyError(
            f"{path}: GGUF file has no vocabulary (no tokenizer.ggml.tokens/model)"
        )
    types = _ints(reader, "tokenizer.ggml.token_type", path) or [NORMAL] * len(texts)
    if len(types) != len(texts):
        raise VocabularyError(f"{path}: {len(texts)} tokens but {len(types)} token types")
    decode = _normal_decoder(str(model), path)
    tokens: list[bytes] = []
    special: list[int] = []
    names: dict[str, int] = {}
    for i, (raw, kind) in enumerate(zip(texts, types)):
        text = raw.decode("utf-8", "replace")
        if kind == BYTE:
            tokens.append(_byte_token(text, i, path))
        elif kind == USER_DEFINED:
            tokens.append(raw)
        elif kind == NORMAL:
            tokens.append(decode(text))
        else:
            tokens.append(raw)
            special.append(i)
            names.setdefault(text, i)
    if eos_ids is None:
        eos_ids = _metadata_eos(reader, path) + guess_eos_ids(names)
    return Vocab(tokens, special, eos_ids, names, name or path.name)


def _import_gguf() -> Any:
    try:
        import gguf
    except ImportError as e:
        raise VocabularyError(
            "reading GGUF vocabularies needs the 'gguf' package: pip install 'gramc[gguf]'"
            " (or pip install gguf)"
        ) from e
    return gguf


def _open(path: Path) -> Any:
    gguf = _import_gguf()
    if not path.is_file():
        raise VocabularyError(f"{path}: no such GGUF file")
    try:
        return _fast_reader_class(gguf)(path)
    except Exception as e:  # noqa: BLE001 - the fast path leans on a gguf internal
        log.debug("%s: fast GGUF reader failed (%s); using gguf.GGUFReader", path, e)
    try:
        return gguf.GGUFReader(path)
    except Exception as e:  # the reader raises many types on hostile input
        raise VocabularyError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})") from e


def _fast_reader_class(gguf: Any) -> type:
    """``GGUFReader`` slicing a plain ndarray view of its memmap: 3x faster on big vocabularies.

    ``numpy.memmap`` slices pay a Python-level ``__array_finalize__`` each, and the reader
    takes several slices per string; viewing the map as a plain ndarray skips that.
    """
    import numpy as np

    class _PlainArrayReader(gguf.GGUFReader):
        @property
        def data(self):
            return self._gramc_data

        @data.setter
        def data(self, value):
            self._gramc_data = value.view(np.ndarray)

    return _PlainArrayReader


def _field(reader: Any, key: str) -> Any:
    return reader.fields.get(key)


def _scalar(reader: Any, key: str, path: Path) -> Any:
    field = _field(reader, key)
    if field is None or not field.data:
        return None
    part = field.parts[field.data[0]]
    try:
        if len(field.types) == 1 and int(field.types[0]) == _GGUF_STRING:
            return bytes(part).decode("utf-8", "replace")
        return part[0].item()
    except (AttributeError, IndexError, TypeError, ValueError) as e:
        raise VocabularyError(f"{path}: malformed GGUF field {key}") from e


def _strings(reader: Any, key: str, path: Path) -> list[bytes] | None:
    field = _field(reader, key)
    if field is None:
        return None
    try:
        return [bytes(field.parts[i]) for i in field.data]
    except (IndexError, TypeError, ValueError) as e:
        raise VocabularyError(f"{path}: malformed GGUF field {key}") from e


def _ints(reader: Any, key: str, path: Path) -> list[int] | None:
    field = _field(reader, key)
    if field is None:
        return None
    try:
        return [int(field.parts[i][0]) for i in field.data]
    except (IndexError, TypeError, ValueError) as e:
        raise VocabularyError(f"{path}: malformed GGUF field {key}") from e


def _normal_decoder(model: str, path: Path) -> Callable[[str], bytes]:
    if model in _SPM_MODELS:
        return lambda text: sentencepiece_to_bytes(text, byte_fallback=False)
    if model in _BPE_MODELS:
        return byte_level_to_bytes
    raise VocabularyError(
        f"{path}: unsupported GGUF tokenizer model {model!r}"
        f" (gramc reads {', '.join(sorted(_SPM_MODELS | _BPE_MODELS))})"
    )


def _byte_token(text: str, i: int, path: Path) -> bytes:
    value = byte_fallback_value(text)
    if value is None:
        raise VocabularyError(f"{path}: BYTE token {i} is {text!r}, expected '<0xNN>'")
    return bytes((value,))


def _metadata_eos(reader: Any, path: Path) -> tuple[int, ...]:
    ids = []
    for key in _EOS_KEYS:
        value = _scalar(reader, f"tokenizer.ggml.{key}", path)
        if isinstance(value, int):
            ids.append(value)
    return tuple(ids)
