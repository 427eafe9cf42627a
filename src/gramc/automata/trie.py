"""The token trie, flat: every byte-matched token of a vocabulary in byte order.

Tokens sorted by their bytes are a trie read left to right: a token shares its first ``lcp[p]``
bytes with the token before it, and the tokens sharing any prefix are contiguous. The walk of
:mod:`gramc.automata.walk` runs them in this order, resuming each token from the state its
shared prefix reached and skipping (with ``skip``) every token under a dead prefix.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gramc.vocab import Vocab


@dataclass(frozen=True, eq=False)
class TokenTrie:
    """All byte-matched tokens of a vocabulary, sorted by their bytes (see the module doc).

    Attributes:
        vocab_size: ids range over ``0..vocab_size-1`` (specials and empty tokens are left out).
        sorted_ids: int32, the token ids in byte order; the arrays below follow this order.
        blob: uint8, the tokens' bytes back to back; ``offsets`` and ``lengths`` (int64) say
            where each token is.
        lcp: int64, bytes each token shares with the one before it (0 for the first).
        skip: int64, the first later position whose ``lcp`` is smaller than this one's (or
            the end): the tokens between share at least ``lcp[p]`` bytes with token ``p - 1``.
        max_len: the longest token's length (the depth of a walk's state stack).
    """

    vocab_size: int
    sorted_ids: np.ndarray
    blob: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    lcp: np.ndarray
    skip: np.ndarray
    max_len: int

    @cached_property
    def positions(self) -> np.ndarray:
        """Each token id's sorted position, -1 for the ids not in the trie (int64 ``[V]``)."""
        out = np.full(self.vocab_size, -1, dtype=np.int64)
        out[self.sorted_ids] = np.arange(len(self.sorted_ids))
        return out

    def token_bytes(self, token: int) -> bytes | None:
        """The bytes of token id ``token``, or None if it is not in the trie (special, empty)."""
        p = int(self.positions[token])
        if p < 0:
            return None
        o = int(self.offsets[p])
        return self.blob[o : o + int(self.lengths[p])].tobytes()

    @classmethod
    def from_vocab(cls, vocab: "Vocab") -> "TokenTrie":
        """The trie of every non-special, non-empty token of ``vocab``."""
        from gramc.automata.walk import common_prefixes, next_smaller

        special = vocab.special_ids
        pairs = sorted((t, i) for i, t in enumerate(vocab.tokens) if t and i not in special)
        ids = np.array([i for _, i in pairs], dtype=np.int32)
        lengths = np.array([len(t) for t, _ in pairs], dtype=np.int64)
        blob = np.frombuffer(b"".join(t for t, _ in pairs), dtype=np.uint8)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        lcp = common_prefixes(blob, offsets, lengths)
        return cls(vocab_size=vocab.size, sorted_ids=ids, blob=blob, offsets=offsets,
                   lengths=lengths, lcp=lcp, skip=next_smaller(lcp), max_len=int(lengths.max(initial=0)))


#: Tries kept (the most recently used), as many as vocabularies ``load_vocab`` keeps.
MAX_TRIES = 8
_TRIE_CACHE: "OrderedDict[str, TokenTrie]" = OrderedDict()


def trie_for(vocab: "Vocab") -> TokenTrie:
    """The trie of ``vocab``, built once per vocabulary fingerprint in this process (while it
    is among the :data:`MAX_TRIES` most recently used)."""
    trie = _TRIE_CACHE.get(vocab.fingerprint)
    if trie is None:
        trie = _TRIE_CACHE[vocab.fingerprint] = TokenTrie.from_vocab(vocab)
        while len(_TRIE_CACHE) > MAX_TRIES:
            _TRIE_CACHE.popitem(last=False)
    _TRIE_CACHE.move_to_end(vocab.fingerprint)
    return trie
