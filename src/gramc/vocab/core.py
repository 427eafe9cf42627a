"""The :class:`Vocab`: what a tokenizer vocabulary means to a grammar, as plain bytes.

A vocabulary is the list of token ids a model can emit, each with the bytes it appends to the
output text, plus the ids a grammar never matches by bytes (special tokens) and the ids that
end a generation (EOS). Everything else about a tokenizer (merges, scores, pre-tokenization)
is irrelevant to masking and is dropped by the loaders.
"""

from __future__ import annotations

import hashlib
import operator
import os
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from gramc.errors import VocabularyError

_U32 = struct.Struct("<I")
_FINGERPRINT_MAGIC = b"gramc.vocab.fingerprint.v1\n"


class Vocab:
    """An immutable token vocabulary: token id -> bytes, plus special and end-of-sequence ids.

    Attributes:
        tokens: the raw bytes of each token id (``len(tokens) == size``). For a special token
            they are its text in UTF-8, for display only; a hole (an id with no token) is ``b""``.
        special_ids: ids a grammar never matches by bytes: control/special tokens, unknown and
            unused ids, holes. Always includes every ``eos_ids`` entry, every id in
            ``special_names`` and every id whose bytes are empty.
        eos_ids: end-of-sequence / end-of-generation ids, sorted. A compiled grammar allows them
            exactly where the grammar may stop.
        special_names: text of each named special token -> its id (a fresh ``dict`` per access).
        name: a human label such as ``"gpt2"`` or a file name; not part of :attr:`fingerprint`.

    Two vocabularies are equal when their fingerprints are (same tokens, specials and EOS).

    >>> v = Vocab.from_list(["a", "b", "ab", None, "<eos>"], special_ids=[4], eos_ids=[4])
    >>> v.size, v.tokens[2], sorted(v.special_ids), v.eos_ids
    (5, b'ab', [3, 4], (4,))
    """

    __slots__ = ("_fingerprint", "_special_names", "eos_ids", "name", "special_ids", "tokens")

    tokens: tuple[bytes, ...]
    special_ids: frozenset[int]
    eos_ids: tuple[int, ...]
    name: str
    _special_names: dict[str, int]
    _fingerprint: str | None

    def __init__(
        self,
        tokens: Iterable[bytes],
        special_ids: Iterable[int] = (),
        eos_ids: Iterable[int] = (),
        special_names: Mapping[str, int] | None = None,
        name: str = "custom",
    ):
        """Validate and freeze a vocabulary.

        Raises:
            VocabularyError: no tokens, a token that is not bytes, or an id (special, EOS,
                named) that is not an int in ``range(size)``.
        """
        toks = _check_tokens(tokens, name)
        size = len(toks)
        names = dict(special_names or {})
        for text in names:
            if not isinstance(text, str):
                raise VocabularyError(f"vocabulary {name!r}: special name {text!r} is not a str")
        eos = tuple(sorted(set(_check_ids(eos_ids, size, "eos id", name))))
        special = set(_check_ids(special_ids, size, "special id", name))
        special.update(eos)
        names = dict(zip(names, _check_ids(names.values(), size, "special_names id", name)))
        special.update(names.values())
        special.update(i for i, t in enumerate(toks) if not t)
        _set = object.__setattr__
        _set(self, "tokens", toks)
        _set(self, "special_ids", frozenset(special))
        _set(self, "eos_ids", eos)
        _set(self, "name", str(name))
        _set(self, "_special_names", names)
        _set(self, "_fingerprint", None)

    # -- derived facts ---------------------------------------------------------------------

    @property
    def size(self) -> int:
        """The number of token ids, ``len(tokens)``."""
        return len(self.tokens)

    @property
    def special_names(self) -> dict[str, int]:
        """Text of each named special token -> id (a copy; the vocabulary stays immutable)."""
        return dict(self._special_names)

    @property
    def fingerprint(self) -> str:
        """Hex SHA-256 of the canonical encoding of the vocabulary's content (cached).

        The hashed bytes are, with every integer a little-endian ``u32``::

            b"gramc.vocab.fingerprint.v1\\n"
            size
            len(tokens[0]) tokens[0]  len(tokens[1]) tokens[1]  ...  (every id, in id order)
            len(special_ids)  special ids in increasing order
            len(eos_ids)      eos ids in increasing order

        ``name`` and ``special_names`` are not hashed. The encoding is fixed (a change would
        be a new magic line), so the value is stable across machines, Python and gramc
        versions; artifacts store it to check that they are used with their vocabulary.
        """
        fp = self._fingerprint
        if fp is None:
            fp = _fingerprint(self.tokens, self.special_ids, self.eos_ids)
            object.__setattr__(self, "_fingerprint", fp)
        return fp

    # -- value semantics ---------------------------------------------------------------------

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Vocab is immutable (cannot set {key!r})")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"Vocab is immutable (cannot delete {key!r})")

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocab):
            return NotImplemented
        return self is other or (
            self.eos_ids == other.eos_ids
            and self.special_ids == other.special_ids
            and self.tokens == other.tokens
        )

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return (
            f"Vocab(name={self.name!r}, size={self.size}, "
            f"special={len(self.special_ids)}, eos_ids={self.eos_ids})"
        )

    def __reduce__(self):
        return (
            _restore,
            (
                self.tokens,
                tuple(sorted(self.special_ids)),
                self.eos_ids,
                self._special_names,
                self.name,
            ),
        )

    def with_eos(self, eos: int | str | Iterable[int | str]) -> Vocab:
        """The same vocabulary with ``eos`` (ids and/or special-token texts) as its only
        end-of-sequence tokens (a new fingerprint: artifacts record their EOS ids).

        >>> Vocab.from_list(["a", "<end>"], special_names={"<end>": 1}).with_eos("<end>").eos_ids
        (1,)

        Raises:
            VocabularyError: a text that names no special token, or an id out of range.
        """
        from gramc.vocab.pieces import resolve_eos

        ids = resolve_eos(eos, self._special_names, f"vocabulary {self.name!r}")
        return Vocab(self.tokens, self.special_ids, ids or (), self._special_names, self.name)

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def from_list(
        cls,
        tokens: Iterable[bytes | str | None],
        special_ids: Iterable[int] = (),
        eos_ids: Iterable[int] = (),
        name: str = "custom",
        special_names: Mapping[str, int] | None = None,
    ) -> Vocab:
        """A vocabulary from a list indexed by id: ``str`` is UTF-8 encoded, ``None`` is a hole.

        >>> Vocab.from_list(["x", b"\\xff", None]).tokens
        (b'x', b'\\xff', b'')
        """
        if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__iter__"):
            raise TypeError(f"tokens are a list of bytes, str or None by id, got {type(tokens).__name__}")
        return cls(
            [_as_bytes(t, i, name) for i, t in enumerate(tokens)],
            special_ids,
            eos_ids,
            special_names,
            name,
        )

    @classmethod
    def from_dict(
        cls,
        mapping: Mapping[bytes | str, int],
        special_ids: Iterable[int] = (),
        eos_ids: Iterable[int] = (),
        name: str = "custom",
        special_names: Mapping[str, int] | None = None,
    ) -> Vocab:
        """A vocabulary from token -> id; ids missing below the largest one become holes.

        >>> v = Vocab.from_dict({"a": 0, "c": 2})
        >>> v.tokens, sorted(v.special_ids)
        ((b'a', b'', b'c'), [1])

        Raises:
            VocabularyError: two tokens with one id, or an id that is not a non-negative int.
        """
        ids = _check_ids(mapping.values(), None, "token id", name)
        if not ids:
            raise VocabularyError(f"vocabulary {name!r} has no tokens")
        slots: list[bytes | str | None] = [None] * (max(ids) + 1)
        for token, i in zip(mapping.keys(), ids):
            if slots[i] is not None:
                raise VocabularyError(
                    f"vocabulary {name!r}: id {i} is given to both {slots[i]!r} and {token!r}"
                )
            slots[i] = token
        return cls.from_list(slots, special_ids, eos_ids, name, special_names)

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike,
        special_tokens: Mapping[str, int] | None = None,
        eos: int | str | Iterable[int | str] | None = None,
        name: str | None = None,
    ) -> Vocab:
        """A tiktoken ``.tiktoken`` file (``base64(token bytes) rank`` per line).

        The file holds no special tokens: pass them as ``special_tokens`` (text -> id), e.g.
        ``{"<|endoftext|>": 50256}`` for GPT-2. ``eos`` takes ids and/or special texts; left
        ``None``, the specials named like an end-of-sequence token are used
        (:data:`gramc.vocab.pieces.EOS_TOKEN_NAMES`).
        """
        from gramc.vocab.tiktoken_file import load_tiktoken

        return load_tiktoken(path, special_tokens, eos, name)

    @classmethod
    def from_tokenizer_json(
        cls,
        path: str | os.PathLike,
        eos_ids: Iterable[int] | None = None,
        name: str | None = None,
    ) -> Vocab:
        """A Hugging Face ``tokenizer.json`` (byte-level BPE, SentencePiece-style, WordLevel).

        See :mod:`gramc.vocab.hf_json` for how token text becomes bytes and how EOS ids are
        found when ``eos_ids`` is not given.
        """
        from gramc.vocab.hf_json import load_tokenizer_json

        return load_tokenizer_json(path, eos_ids=eos_ids, name=name)

    @classmethod
    def from_gguf(
        cls,
        path: str | os.PathLike,
        eos_ids: Iterable[int] | None = None,
        name: str | None = None,
    ) -> Vocab:
        """The vocabulary of a GGUF file (``tokenizer.ggml.*`` metadata; needs ``gguf``).

        See :mod:`gramc.vocab.gguf_file` for the token-type rules.
        """
        from gramc.vocab.gguf_file import load_gguf

        return load_gguf(path, eos_ids=eos_ids, name=name)

    @classmethod
    def from_hf(cls, tokenizer: Any, eos_ids: Iterable[int] | None = None) -> Vocab:
        """The vocabulary of a ``transformers`` tokenizer object (fast or slow).

        See :mod:`gramc.vocab.hf_tokenizer`.
        """
        from gramc.vocab.hf_tokenizer import vocab_from_hf

        return vocab_from_hf(tokenizer, eos_ids=eos_ids)

    @classmethod
    def from_llama_cpp(cls, llm: Any) -> Vocab:
        """The vocabulary of a ``llama_cpp.Llama`` model (control/unused tokens special, the
        end-of-generation ids as EOS). See :mod:`gramc.vocab.llama_cpp`."""
        from gramc.vocab.llama_cpp import vocab_from_llama_cpp

        return vocab_from_llama_cpp(llm)

    @classmethod
    def gpt2(cls) -> Vocab:
        """The bundled GPT-2 vocabulary: 50,257 ids, 50256 ``<|endoftext|>`` (special, EOS).

        >>> v = Vocab.gpt2()
        >>> v.size, v.tokens[50256], v.eos_ids, v.tokens[220]
        (50257, b'<|endoftext|>', (50256,), b' ')
        """
        from gramc.vocab.bundled import load_bundled

        return load_bundled("gpt2")


def _restore(tokens, special_ids, eos_ids, special_names, name) -> Vocab:
    return Vocab(tokens, special_ids, eos_ids, special_names, name)


def _as_bytes(token: bytes | str | None, i: int, name: str) -> bytes:
    if token is None:
        return b""
    if isinstance(token, str):
        return token.encode("utf-8")
    if isinstance(token, (bytes, bytearray, memoryview)):
        return bytes(token)
    raise VocabularyError(
        f"vocabulary {name!r}: token {i} is {type(token).__name__}, expected bytes, str or None"
    )


def _check_tokens(tokens: Iterable[bytes], name: str) -> tuple[bytes, ...]:
    if isinstance(tokens, (bytes, str)):
        raise VocabularyError(
            f"vocabulary {name!r}: tokens must be a sequence of bytes, not one {type(tokens).__name__}"
        )
    toks = tuple(tokens)
    if not toks:
        raise VocabularyError(f"vocabulary {name!r} has no tokens")
    if not all(type(t) is bytes for t in toks):
        for i, t in enumerate(toks):
            if not isinstance(t, bytes):
                raise VocabularyError(
                    f"vocabulary {name!r}: token {i} is {type(t).__name__}, expected bytes"
                    " (use Vocab.from_list for str tokens)"
                )
        toks = tuple(bytes(t) for t in toks)
    return toks


def _check_ids(ids: Iterable[int], size: int | None, what: str, name: str) -> list[int]:
    out = []
    for i in ids:
        try:
            if isinstance(i, bool):
                raise TypeError
            j = operator.index(i)
        except TypeError:
            raise VocabularyError(f"vocabulary {name!r}: {what} {i!r} is not an int") from None
        if j < 0 or (size is not None and j >= size):
            bound = f"range(0, {size})" if size is not None else "non-negative ints"
            raise VocabularyError(f"vocabulary {name!r}: {what} {j} is out of {bound}")
        out.append(j)
    return out


def _fingerprint(tokens: tuple[bytes, ...], special: frozenset[int], eos: tuple[int, ...]) -> str:
    pack = _U32.pack
    h = hashlib.sha256(_FINGERPRINT_MAGIC)
    h.update(pack(len(tokens)))
    h.update(b"".join([part for t in tokens for part in (pack(len(t)), t)]))
    ordered = sorted(special)
    h.update(struct.pack(f"<{len(ordered) + 1}I", len(ordered), *ordered))
    h.update(struct.pack(f"<{len(eos) + 1}I", len(eos), *eos))
    return h.hexdigest()
