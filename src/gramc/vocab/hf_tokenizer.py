"""The vocabulary of a ``transformers`` tokenizer object (nothing is imported from transformers).

* A fast tokenizer (``tokenizer.is_fast`` with a ``backend_tokenizer``) is read through its
  ``tokenizer.json`` document, exactly as :mod:`gramc.vocab.hf_json` reads the file.
* A slow tokenizer is read from ``get_vocab()``, one spelling rule for the whole vocabulary:
  a ``byte_decoder`` attribute (GPT-2 style) -> the inverse byte-level map; a ``sp_model``
  attribute or any token containing ``"▁"`` -> SentencePiece rules (``"▁"`` -> space,
  ``"<0xNN>"`` -> one byte); otherwise ``convert_tokens_to_string([token])`` as UTF-8.

In both cases ``all_special_ids`` become special. EOS, unless ``eos_ids`` is passed, is
``tokenizer.eos_token_id``; when the tokenizer has none (e.g. a bare
``PreTrainedTokenizerFast(tokenizer_file=...)``), the end-of-sequence name heuristic of
:func:`gramc.vocab.pieces.guess_eos_ids` applies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gramc.errors import VocabularyError
from gramc.vocab.core import Vocab
from gramc.vocab.hf_json import vocab_from_tokenizer_data
from gramc.vocab.pieces import (
    SPIECE_SPACE,
    guess_eos_ids,
    sentencepiece_to_bytes,
)


def vocab_from_hf(tokenizer: Any, eos_ids: Iterable[int] | None = None) -> Vocab:
    """Build a :class:`Vocab` from a transformers tokenizer (see the module doc).

    Raises:
        VocabularyError: an object that is not a tokenizer, or whose vocabulary is unusable.
    """
    name = str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if getattr(tokenizer, "is_fast", False) and backend is not None:
        base = vocab_from_tokenizer_data(json.loads(backend.to_str()), source=name, name=name)
        tokens: list[bytes | None] = list(base.tokens)
        special_names = base.special_names
    elif callable(getattr(tokenizer, "get_vocab", None)):
        tokens, special_names = _slow_tokens(tokenizer, name)
    else:
        raise VocabularyError(
            f"{name}: not a transformers tokenizer (no backend_tokenizer or get_vocab)"
        )
    special = set(special_names.values()) | _special_ids(tokenizer, len(tokens))
    if eos_ids is None:
        eos = getattr(tokenizer, "eos_token_id", None)
        eos_ids = (eos,) if isinstance(eos, int) else guess_eos_ids(special_names)
    return Vocab.from_list(tokens, special, eos_ids, name=name, special_names=special_names)


def _special_ids(tokenizer: Any, size: int) -> set[int]:
    ids = getattr(tokenizer, "all_special_ids", None) or []
    return {i for i in ids if isinstance(i, int) and 0 <= i < size}


def _slow_tokens(tokenizer: Any, name: str) -> tuple[list[bytes | None], dict[str, int]]:
    vocab = tokenizer.get_vocab()
    if not vocab:
        raise VocabularyError(f"{name}: the tokenizer has an empty vocabulary")
    special = _special_ids(tokenizer, max(vocab.values()) + 1)
    decode = _slow_decoder(tokenizer, vocab)
    tokens: list[bytes | None] = [None] * (max(vocab.values()) + 1)
    names: dict[str, int] = {}
    for text, i in vocab.items():
        if i in special:
            tokens[i] = text.encode("utf-8")
            names.setdefault(text, i)
        else:
            tokens[i] = decode(text)
    return tokens, names


def _slow_decoder(tokenizer: Any, vocab: dict[str, int]) -> Callable[[str], bytes]:
    table = getattr(tokenizer, "byte_decoder", None)
    if isinstance(table, Mapping):
        return lambda text: _via_table(text, table)
    if getattr(tokenizer, "sp_model", None) is not None or any(SPIECE_SPACE in t for t in vocab):
        return sentencepiece_to_bytes
    return lambda text: tokenizer.convert_tokens_to_string([text]).encode("utf-8")


def _via_table(text: str, table: Mapping[str, int]) -> bytes:
    """The tokenizer's own byte-level table; a token outside it is UTF-8 as a whole."""
    try:
        return bytes([table[ch] for ch in text])
    except (KeyError, ValueError, TypeError):
        return text.encode("utf-8")
