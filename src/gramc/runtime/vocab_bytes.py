"""The vocabulary of artifacts whose masks read token bytes at run time (PDA, counted, and
DFA with a ``uniqueItems`` plan).

Layout 5 binds it by fingerprint only (:func:`bound_vocab`): the decoder's vocabulary when
its fingerprint is the recorded one, else one this process knows by that fingerprint, else
none (the artifact then awaits it). Hundreds of artifacts of one model so share one
:class:`~gramc.vocab.Vocab`, and with it the token trie, and loading one costs no per-token
work. Layouts up to 4 stored every token's bytes (``vocab.*``), read back by
:func:`read_token_bytes`, which checks them against the recorded fingerprint and shares the
decoder's vocabulary where they are its bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gramc.runtime.cache import LRUCache
from gramc.runtime.validate import ArraySpec, check_arrays, in_range, require
from gramc.vocab import Vocab, known_vocab

#: The arrays of the stored vocabulary: all token bytes back to back, each token's length
#: (uint16: small, compresses well), the special ids.
VOCAB_BYTES_ARRAYS: ArraySpec = {
    "vocab.bytes": (np.uint8, 1),
    "vocab.lengths": (np.uint16, 1),
    "vocab.special_ids": (np.int32, 1),
}

#: Stored forms and layouts kept, by vocabulary fingerprint (for as many vocabularies as
#: token tries are kept).
_STORED: LRUCache = LRUCache(16)


def vocab_arrays(vocab: Vocab) -> dict[str, np.ndarray]:
    """The ``vocab.*`` arrays of ``vocab`` (read-only; made once per fingerprint while kept)."""
    arrays = _STORED.get(vocab.fingerprint)
    if arrays is None:
        arrays = {"vocab.bytes": np.frombuffer(b"".join(vocab.tokens), dtype=np.uint8),
                  "vocab.lengths": np.array([len(t) for t in vocab.tokens], dtype=np.uint16),
                  "vocab.special_ids": np.array(sorted(vocab.special_ids), dtype=np.int32)}
        for a in arrays.values():
            a.flags.writeable = False
        _STORED.put(vocab.fingerprint, arrays)
    return arrays


def token_layout(vocab: Vocab) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All token bytes back to back (uint8), and each token's offset and length (int64) by
    token id: the layout the compiled token walks read (shared per fingerprint while kept)."""
    key = ("layout", vocab.fingerprint)
    layout = _STORED.get(key)
    if layout is None:
        stored = vocab_arrays(vocab)
        lengths = stored["vocab.lengths"].astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        layout = _STORED.put(key, (stored["vocab.bytes"], offsets, lengths))
    return layout


def unpack_tokens(blob: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    """Token byte strings from the ``vocab.bytes`` / ``vocab.lengths`` arrays."""
    data = blob.tobytes()
    bounds = [0] + np.cumsum(lengths, dtype=np.int64).tolist()
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def bound_vocab(info: Any, known: Vocab | None = None) -> Vocab | None:
    """The vocabulary a layout-5 artifact binds by ``info``'s fingerprint: ``known`` (the
    decoder's) when it has it, else one this process knows (:func:`~gramc.vocab.known_vocab`),
    else None. A vocabulary of that fingerprint must agree with the header on its size and
    EOS ids, which the artifact's rows were checked against."""
    vocab = known if known is not None and known.fingerprint == info.fingerprint else \
        known_vocab(info.fingerprint, info.name) if known is None else None
    if vocab is not None:
        require(vocab.size == info.size and tuple(vocab.eos_ids) == tuple(info.eos_ids),
                f"metadata.vocab says {info.size} tokens and EOS {list(info.eos_ids)[:8]}, the vocabulary with "
                f"its fingerprint has {vocab.size} and {list(vocab.eos_ids)[:8]}")
    return vocab


def read_token_bytes(arrays: dict, info: Any, known: Vocab | None = None) -> Vocab:
    """The vocabulary stored as token bytes, checked against ``info``'s fingerprint.

    ``known`` is the decoder's vocabulary, if it passed one: when the stored arrays are
    exactly its stored form, it is returned itself."""
    check_arrays(arrays, VOCAB_BYTES_ARRAYS)
    lengths, blob = arrays["vocab.lengths"], arrays["vocab.bytes"]
    require(lengths.shape == (info.size,) and int(lengths.sum(dtype=np.int64)) == len(blob),
            "vocab.lengths must have one entry per token and add up to len(vocab.bytes)")
    special = arrays["vocab.special_ids"]
    in_range("vocab.special_ids", special, 0, info.size)
    if known is not None and known.fingerprint == info.fingerprint and known.eos_ids == tuple(info.eos_ids):
        mine = vocab_arrays(known)
        if all(np.array_equal(arrays[name], mine[name]) for name in VOCAB_BYTES_ARRAYS):
            return known
    vocab = Vocab(unpack_tokens(blob, lengths), special_ids=special.tolist(), eos_ids=info.eos_ids)
    require(vocab.fingerprint == info.fingerprint,
            "the stored token bytes do not match the recorded vocabulary fingerprint")
    return vocab
