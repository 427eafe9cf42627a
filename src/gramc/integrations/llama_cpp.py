"""llama-cpp-python: a logits processor and the vocabulary of a loaded ``Llama``.

Usage::

    from llama_cpp import Llama, LogitsProcessorList
    import gramc
    from gramc.integrations.llama_cpp import GramcLlamaLogitsProcessor, vocab_from_llama_cpp

    llm = Llama(model_path="model.gguf")
    artifact = gramc.compile(r"(yes|no)", vocab=vocab_from_llama_cpp(llm))
    out = llm.create_completion("Is water wet? Answer:", max_tokens=8,
                                logits_processor=LogitsProcessorList([GramcLlamaLogitsProcessor(artifact)]))

The vocabulary is read through llama.cpp itself (``llama_token_to_piece`` and the token
attributes), so it spells every token exactly as llama.cpp's detokenizer does. This module
imports ``llama_cpp`` only when a function that needs it is called.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import numpy as np

from gramc.errors import VocabularyError
from gramc.vocab import Vocab

__all__ = ["GramcLlamaLogitsProcessor", "vocab_from_llama_cpp"]

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
            "gramc.integrations.llama_cpp needs llama-cpp-python: pip install 'gramc[llama-cpp]'"
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


class GramcLlamaLogitsProcessor:
    """A llama-cpp-python logits processor: ``processor(input_ids, scores) -> scores``.

    Pass it in a ``llama_cpp.LogitsProcessorList`` to ``create_completion``,
    ``create_chat_completion``, ``generate`` or ``__call__``. The first call of a generation
    fixes the prompt (every id seen then); later calls commit the new ids to the matcher.
    A call whose ids do not extend the prompt starts a new generation, so one processor can
    serve consecutive completions (not concurrent ones).

    Once the grammar is complete only its end-of-generation ids stay allowed, and llama.cpp
    stops there. A refused id (one the grammar does not allow, e.g. forced by the caller)
    leaves only end-of-generation ids allowed.

    Attributes:
        calls, seconds: how often the processor ran and the time it took (profiling).
    """

    def __init__(self, artifact: Any):
        if getattr(artifact, "vocab", None) is None:
            raise ValueError("the artifact is not bound to a vocabulary (compile with vocab=)")
        self.artifact = artifact
        self._eos = np.asarray(artifact.vocab.eos_ids, dtype=np.int64)
        self.calls = 0
        self.seconds = 0.0
        self.reset()

    def reset(self) -> None:
        """Forget the current generation."""
        self._prompt: np.ndarray | None = None
        self._matcher = None
        self._done = 0
        self._dead = False

    @property
    def matcher(self):
        """The matcher of the current generation (None before the first call)."""
        return self._matcher

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        ids = np.asarray(input_ids)
        p = self._prompt
        if p is None or len(ids) < len(p) + self._done or not np.array_equal(ids[: len(p)], p):
            self.reset()
            self._prompt = p = ids.copy()
            self._matcher = self.artifact.matcher(max_rollback=0)
        new = ids[len(p) + self._done:]
        if len(new) and not self._dead:
            took = self._matcher.commit_tokens(new.tolist())
            self._dead = took < len(new)
        self._done += len(new)
        width = scores.shape[-1]
        if self._dead or self._matcher.is_finished():
            allowed = np.zeros(width, dtype=bool)
            allowed[self._eos[self._eos < width]] = True
        else:
            allowed = self._matcher.mask(width)
        out = np.where(allowed, scores, np.float32(-np.inf)).astype(scores.dtype, copy=False)
        self.calls += 1
        self.seconds += time.perf_counter() - t0
        return out
