"""Loader for Hugging Face ``tokenizers`` files (``tokenizer.json``), read as plain JSON.

How a token's text becomes bytes is decided once per file, from its decoder (or, when it has
none, its pre-tokenizer):

* a ``ByteLevel`` decoder: byte-level BPE (GPT-2, Llama 3, Qwen2): the inverse GPT-2
  ``bytes_to_unicode`` map (:func:`gramc.vocab.pieces.byte_level_to_bytes`);
* a ``Metaspace`` decoder or a ``Replace("▁", " ")`` decoder: SentencePiece-style
  (Llama 2, Mistral, T5): ``"▁"`` -> space, and ``"<0xNN>"`` -> that byte when the model has
  ``byte_fallback`` (or a ``ByteFallback`` decoder);
* anything else: the UTF-8 of the token text (WordLevel vocabularies).

WordPiece models are refused: their decoder joins words with spaces, so a token has no fixed
byte string.

Added tokens (``added_tokens``) override the model vocabulary at their id. Special ones go to
``special_ids`` and ``special_names``; non-special ones are normal tokens whose bytes are their
``content``, which is the text they match when encoding.

End-of-sequence ids, unless ``eos_ids`` is passed, come from the first of:

1. ``generation_config.json`` beside the file: ``eos_token_id`` (an id or a list);
2. ``tokenizer_config.json`` beside the file: ``eos_token`` (text, or ``{"content": ...}``);
3. the special added tokens whose text is a known EOS name
   (:data:`gramc.vocab.pieces.EOS_TOKEN_NAMES`: ``<|endoftext|>``, ``</s>``, ``<|eot_id|>``,
   ``<|eom_id|>``, ``<|end_of_text|>``, ``<|im_end|>``, ``<|end|>``, ...). For Llama 3 this
   gives 128001, 128008 and 128009.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gramc.errors import VocabularyError
from gramc.vocab.core import Vocab
from gramc.vocab.pieces import (
    SPIECE_SPACE,
    byte_level_to_bytes,
    guess_eos_ids,
    sentencepiece_to_bytes,
)

log = logging.getLogger("gramc.vocab")

_SEQUENCE_KEYS = ("decoders", "pretokenizers", "normalizers", "processors")


def load_tokenizer_json(
    path: str | os.PathLike, eos_ids: Iterable[int] | None = None, name: str | None = None
) -> Vocab:
    """Read a ``tokenizer.json`` file (see the module doc for the rules).

    Raises:
        VocabularyError: unreadable or non-JSON file, not a tokenizer, an unsupported model.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except OSError as e:
        raise VocabularyError(f"{path}: cannot read tokenizer.json: {e.strerror or e}") from e
    except (ValueError, UnicodeDecodeError) as e:
        raise VocabularyError(f"{path}: not a tokenizer.json (invalid JSON: {e})") from e
    if eos_ids is None:
        eos_ids = _eos_from_sibling_configs(path.parent, data, str(path))
    return vocab_from_tokenizer_data(
        data, source=str(path), eos_ids=eos_ids, name=name or path.name
    )


def vocab_from_tokenizer_data(
    data: Any, *, source: str, eos_ids: Iterable[int] | None = None, name: str = "tokenizer.json"
) -> Vocab:
    """The vocabulary of a parsed ``tokenizer.json`` document (also used by ``from_hf``)."""
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict):
        raise VocabularyError(f"{source}: not a tokenizer.json (no 'model' object)")
    decode = _piece_decoder(data, model, source)
    slots: dict[int, bytes] = {}
    for text, i in _model_vocab(model, source):
        if i in slots:
            raise VocabularyError(f"{source}: id {i} appears twice in model.vocab")
        slots[i] = decode(text)
    special_names = _apply_added_tokens(data.get("added_tokens") or [], slots, source)
    if not slots:
        raise VocabularyError(f"{source}: the tokenizer has no tokens")
    tokens = [slots.get(i) for i in range(max(slots) + 1)]
    if eos_ids is None:
        eos_ids = guess_eos_ids(special_names)
    return Vocab.from_list(
        tokens,
        special_ids=special_names.values(),
        eos_ids=eos_ids,
        name=name,
        special_names=special_names,
    )


def _model_vocab(model: dict, source: str) -> Iterable[tuple[str, int]]:
    kind = model.get("type")
    vocab = model.get("vocab")
    if kind == "WordPiece":
        raise VocabularyError(
            f"{source}: WordPiece tokenizers are not supported (their decoder inserts spaces"
            " between words, so a token has no fixed byte string)"
        )
    if kind == "Unigram" and isinstance(vocab, list):
        return [(_entry_text(entry, source), i) for i, entry in enumerate(vocab)]
    if kind in ("BPE", "WordLevel", None) and isinstance(vocab, dict):
        return [(text, _entry_id(i, text, source)) for text, i in vocab.items()]
    raise VocabularyError(
        f"{source}: unsupported tokenizer model {kind!r} (gramc reads BPE, Unigram and WordLevel)"
    )


def _entry_text(entry: Any, source: str) -> str:
    if isinstance(entry, list) and entry and isinstance(entry[0], str):
        return entry[0]
    raise VocabularyError(f"{source}: malformed Unigram vocab entry {entry!r}")


def _entry_id(i: Any, text: str, source: str) -> int:
    if isinstance(i, int) and not isinstance(i, bool) and i >= 0:
        return i
    raise VocabularyError(f"{source}: token {text!r} has invalid id {i!r}")


def _components(node: Any) -> list[dict]:
    """A decoder / pre-tokenizer and, for a Sequence, its parts, flattened (pre-order, on
    an explicit stack: a hostile file can nest Sequences as deep as JSON allows)."""
    out: list[dict] = []
    stack = [node]
    while stack:
        part = stack.pop()
        if isinstance(part, dict):
            out.append(part)
            stack.extend(reversed([child for key in _SEQUENCE_KEYS for child in part.get(key) or []]))
    return out


def _piece_decoder(data: dict, model: dict, source: str) -> Callable[[str], bytes]:
    decoder = _components(data.get("decoder"))
    parts = decoder or _components(data.get("pre_tokenizer"))
    types = {c.get("type") for c in parts}
    if "ByteLevel" in types:
        return byte_level_to_bytes
    space = _sentencepiece_space(parts)
    if space is not None:
        fallback = bool(model.get("byte_fallback")) or "ByteFallback" in types
        return lambda text: sentencepiece_to_bytes(text, byte_fallback=fallback, space=space)
    log.debug("%s: no byte-level or SentencePiece decoder; token text is taken as UTF-8", source)
    return lambda text: text.encode("utf-8")


def _sentencepiece_space(parts: list[dict]) -> str | None:
    for c in parts:
        if c.get("type") == "Metaspace":
            return c.get("replacement") or SPIECE_SPACE
        if c.get("type") == "Replace" and c.get("content") == " ":
            pattern = c.get("pattern") or {}
            if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
                return pattern["String"]
    return None


def _apply_added_tokens(added: Any, slots: dict[int, bytes], source: str) -> dict[str, int]:
    """Write added tokens into ``slots``; return the special ones as text -> id."""
    if not isinstance(added, list):
        raise VocabularyError(f"{source}: 'added_tokens' is not a list")
    special_names: dict[str, int] = {}
    for entry in added:
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            raise VocabularyError(f"{source}: malformed added token {entry!r}")
        content = entry["content"]
        i = _entry_id(entry.get("id"), content, source)
        slots[i] = content.encode("utf-8")
        if entry.get("special"):
            special_names.setdefault(content, i)
    return special_names


def _eos_from_sibling_configs(folder: Path, data: Any, source: str) -> tuple[int, ...] | None:
    """EOS ids named by ``generation_config.json`` / ``tokenizer_config.json`` beside the file."""
    gen = _read_optional_json(folder / "generation_config.json")
    if isinstance(gen, dict):
        ids = gen.get("eos_token_id")
        ids = [ids] if isinstance(ids, int) else ids
        if isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids):
            log.debug("%s: eos ids from generation_config.json: %s", source, ids)
            return tuple(ids)
    cfg = _read_optional_json(folder / "tokenizer_config.json")
    if isinstance(cfg, dict):
        eos = cfg.get("eos_token")
        text = eos.get("content") if isinstance(eos, dict) else eos
        by_text = {
            e.get("content"): e.get("id")
            for e in (data.get("added_tokens") or [] if isinstance(data, dict) else [])
            if isinstance(e, dict)
        }
        eos_id = by_text.get(text) if isinstance(text, str) else None
        if isinstance(eos_id, int):
            log.debug("%s: eos %r from tokenizer_config.json", source, text)
            return (eos_id,)
    return None


def _read_optional_json(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
