"""Token text as tokenizer files store it -> the raw bytes the token stands for.

Tokenizer files do not store token bytes directly. Three spellings cover every loader here:

* **byte-level BPE** (GPT-2, Llama 3, Qwen2 ``tokenizer.json``; GGUF ``model=gpt2``): each byte is
  one printable code point of GPT-2's ``bytes_to_unicode`` alphabet (``"Ġ"`` is the space byte).
  :func:`byte_level_to_bytes` inverts it. This module is the one place that table lives.
* **SentencePiece** (Llama 1/2, Phi-3, T5; GGUF ``model=llama``): ``"▁"`` (U+2581) stands for a
  space and byte-fallback pieces ``"<0xNN>"`` stand for the single byte ``NN``
  (:func:`sentencepiece_to_bytes`, :func:`byte_fallback_value`).
* **plain text**: the UTF-8 encoding of the token text (added tokens, WordLevel models).

The module also holds the end-of-sequence name heuristic shared by the loaders
(:data:`EOS_TOKEN_NAMES`, :func:`guess_eos_ids`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

#: The SentencePiece whitespace marker, U+2581 LOWER ONE EIGHTH BLOCK.
SPIECE_SPACE = "\u2581"

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")

#: Texts of special tokens that end a generation, in the tokenizers gramc knows
#: (GPT-2/Qwen, Llama 1/2/SentencePiece, Llama 3, ChatML, Phi-3, Gemma, DeepSeek, gpt-oss).
#: Loaders use them only when the file names no end-of-sequence id itself.
EOS_TOKEN_NAMES: frozenset[str] = frozenset(
    {
        "<|endoftext|>",
        "</s>",
        "<eos>",
        "<|end_of_text|>",
        "<|eot_id|>",
        "<|eom_id|>",
        "<|im_end|>",
        "<|end|>",
        "<end_of_turn>",
        "<|return|>",
        "<\uff5cend\u2581of\u2581sentence\uff5c>",
    }
)


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (the byte-level BPE alphabet).

    Printable Latin-1 bytes map to themselves; the other 68 bytes map, in byte order, to
    ``chr(256)``, ``chr(257)``, ... so that every byte has a visible, non-space stand-in.

    >>> bytes_to_unicode()[ord(" ")], bytes_to_unicode()[ord("A")], bytes_to_unicode()[10]
    ('Ġ', 'A', 'Ċ')
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    """The inverse of :func:`bytes_to_unicode`: alphabet character -> byte value."""
    return {ch: b for b, ch in bytes_to_unicode().items()}


@lru_cache(maxsize=1)
def _byte_level_translation() -> dict[int, int]:
    # str.translate table: alphabet character -> chr(its byte); a Latin-1 character outside
    # the alphabet -> a code point Latin-1 cannot encode, so that the token falls back whole.
    table = {ord(ch): b for ch, b in unicode_to_bytes().items() if ord(ch) != b}
    table.update({c: 0x10FFFF for c in range(256) if chr(c) not in unicode_to_bytes()})
    return table


def byte_level_to_bytes(text: str) -> bytes:
    """The bytes of a byte-level BPE token.

    Like the ``tokenizers`` ByteLevel decoder, a token containing a character outside the
    alphabet (an added token such as ``"<|im_start|>"`` is inside it; one with a real space is
    not) is taken as plain text and UTF-8 encoded as a whole.

    >>> byte_level_to_bytes("Ġhello"), byte_level_to_bytes("Ã©"), byte_level_to_bytes("a b")
    (b' hello', b'\\xc3\\xa9', b'a b')
    """
    try:
        return text.translate(_byte_level_translation()).encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def byte_fallback_value(text: str) -> int | None:
    """The byte of a SentencePiece byte-fallback piece ``"<0xNN>"``, else ``None``.

    >>> byte_fallback_value("<0x41>"), byte_fallback_value("<0x0A>"), byte_fallback_value("A")
    (65, 10, None)
    """
    m = _BYTE_PIECE.fullmatch(text)
    return int(m.group(1), 16) if m else None


def sentencepiece_to_bytes(
    text: str, *, byte_fallback: bool = True, space: str = SPIECE_SPACE
) -> bytes:
    """The bytes of a SentencePiece piece: ``space`` -> ``b" "``, ``"<0xNN>"`` -> one byte.

    The leading space of a word-initial piece is kept (``"▁the"`` is ``b" the"``): the
    decoder's "strip the first space" rule is about whole texts, not about single tokens.

    >>> sentencepiece_to_bytes("▁the"), sentencepiece_to_bytes("<0x41>")
    (b' the', b'A')
    >>> sentencepiece_to_bytes("<0x41>", byte_fallback=False)
    b'<0x41>'
    """
    if byte_fallback:
        value = byte_fallback_value(text)
        if value is not None:
            return bytes((value,))
    return text.replace(space, " ").encode("utf-8")


def guess_eos_ids(special_names: Mapping[str, int]) -> tuple[int, ...]:
    """Ids of the special tokens whose text is a known end-of-sequence name (sorted).

    >>> guess_eos_ids({"<|begin_of_text|>": 128000, "<|eot_id|>": 128009, "<|end_of_text|>": 128001})
    (128001, 128009)
    """
    return tuple(sorted({i for text, i in special_names.items() if text in EOS_TOKEN_NAMES}))


def resolve_eos(
    eos: int | str | Iterable[int | str] | None, special_names: Mapping[str, int], source: str
) -> tuple[int, ...] | None:
    """Turn an ``eos`` argument (ids and/or special-token texts) into ids; ``None`` stays ``None``.

    Raises:
        VocabularyError: a text that names no special token, or an item that is neither.
    """
    from gramc.errors import VocabularyError

    if eos is None:
        return None
    items = [eos] if isinstance(eos, (int, str)) else list(eos)
    ids = []
    for item in items:
        if isinstance(item, str):
            if item not in special_names:
                raise VocabularyError(
                    f"{source}: eos {item!r} is not a special token of this vocabulary"
                )
            ids.append(special_names[item])
        elif isinstance(item, int) and not isinstance(item, bool):
            ids.append(item)
        else:
            raise VocabularyError(f"{source}: eos must be ids or special-token texts, got {item!r}")
    return tuple(ids)
