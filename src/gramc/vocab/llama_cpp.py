"""The vocabulary of a loaded llama-cpp-python ``Llama``, read through llama.cpp itself.

``llama_token_to_piece`` and the token attributes spell every token exactly as llama.cpp's
detokenizer does. ``llama_cpp`` is imported only when :func:`vocab_from_llama_cpp` is called;
:mod:`gramc.integrations.llama_cpp` re-exports it next to the logits processor.
"""

from __future__ import annotations

import ctypes
from typing import Any

from gramc.errors import VocabularyError
from gramc.vocab.core import Vocab

__all__ = ["vocab_from_llama_cpp"]

# llama.cpp's llama_token_attr bits (llama.h)
ATTR_UNDEFINED = 0
ATTR_UNKNOWN = 1 << 0
ATTR_UNUSED = 1 << 1
ATTR_NORMAL = 1 << 2
ATTR_CONTROL = 1 << 3
ATTR_USER_DEFINED = 1 << 4
ATTR_BYTE = 1 << 5
#: Tokens a grammar never matches by their bytes.
SPECIAL_ATTRS = ATTR_UNKNOWN | ATTR_UNUSED | ATTR_CONTROL


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError as err:
        raise ImportError(
            "vocab_from_llama_cpp needs llama-cpp-python: pip install 'gramc[llama-cpp]'"
        ) from err
    return llama_cpp


def _vocab_handle(llm: Any):
    """The ``llama_vocab *`` of a ``Llama`` (or of its internal model wrapper)."""
    model = getattr(llm, "_model", llm)
    handle = getattr(model, "vocab", None)
    if handle is None:
        raise VocabularyError(f"{type(llm).__name__} is not a llama_cpp.Llama (no _model.vocab)")
    return handle


def _piece(lib, vocab, token: int, special: bool, buf) -> bytes:
    n = lib.llama_token_to_piece(vocab, token, buf, len(buf), 0, special)
    if n < 0:  # the buffer is too small: -n bytes are needed
        buf = ctypes.create_string_buffer(-n)
        n = lib.llama_token_to_piece(vocab, token, buf, len(buf), 0, special)
    return buf.raw[:n]


def vocab_from_llama_cpp(llm: Any, name: str | None = None) -> Vocab:
    """The :class:`Vocab` of a loaded ``llama_cpp.Llama`` (``vocab_only=True`` is enough).

    * bytes: ``llama_token_to_piece`` without special rendering, so SentencePiece ``▁`` is a
      space, ``<0xNN>`` tokens are single bytes and byte-level BPE symbols are raw bytes;
    * special: control, unknown, unused and undefined tokens (shown by their text), plus
      every end-of-generation id; user-defined tokens are ordinary text;
    * EOS: every id llama.cpp calls end-of-generation (``llama_vocab_is_eog``: EOS, EOT,
      ``<|end|>``, ``<|im_end|>``…), so a grammar may stop on any of them.
    """
    lib = _llama_cpp()
    vocab = _vocab_handle(llm)
    n = int(lib.llama_vocab_n_tokens(vocab))
    buf = ctypes.create_string_buffer(64)
    tokens: list[bytes] = []
    special: list[int] = []
    names: dict[str, int] = {}
    eos = [i for i in range(n) if lib.llama_vocab_is_eog(vocab, i)]
    eos_set = set(eos)
    for i in range(n):
        attr = int(lib.llama_vocab_get_attr(vocab, i))
        if attr == ATTR_UNDEFINED or attr & SPECIAL_ATTRS or i in eos_set:
            text = _piece(lib, vocab, i, True, buf)
            tokens.append(text or f"<special:{i}>".encode())
            special.append(i)
            if text:
                names.setdefault(text.decode("utf-8", "replace"), i)
        else:
            tokens.append(_piece(lib, vocab, i, False, buf))
    label = name or str(getattr(llm, "model_path", "") or "llama.cpp")
    return Vocab(tokens, special, eos, names, label)
