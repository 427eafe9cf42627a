"""The flat token trie: every byte-matched token of a vocabulary, laid out level by level.

Tokens are sorted by their bytes; each distinct prefix is one node. Level ``d`` holds the
nodes of depth ``d`` in sorted order, so the children of any node form one contiguous run of
the next level. That layout lets :mod:`gramc.automata.bind` walk all tokens from many
automaton states at once with one numpy gather per level, pruning dead prefixes (and with
them whole sub-trees) as it goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from os.path import commonprefix

import numpy as np

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gramc.vocab import Vocab


@dataclass(frozen=True, eq=False)
class Level:
    """The nodes at one depth ``d >= 1`` of the trie.

    Attributes:
        byte: uint8 ``[n]`` the byte on the edge into each node.
        child_start: int64 ``[n_prev]`` first child (an index into this level) of each node
            of the previous level; ``child_count`` says how many.
        child_count: int64 ``[n_prev]``.
        term_start: int64 ``[n]`` first entry of ``term_ids`` for tokens ending at each node.
        term_count: int64 ``[n]`` how many tokens end at each node (several ids may share
            the same bytes).
        term_ids: int32 token ids ending at this level, grouped by node.
        tok_lo: int64 ``[n]`` the node's sub-tree as a range ``tok_lo..tok_hi`` of positions
            in :attr:`TokenTrie.sorted_ids` (tokens sharing a prefix are contiguous there).
        tok_hi: int64 ``[n]``.
    """

    byte: np.ndarray
    child_start: np.ndarray
    child_count: np.ndarray
    term_start: np.ndarray
    term_count: np.ndarray
    term_ids: np.ndarray
    tok_lo: np.ndarray
    tok_hi: np.ndarray


@dataclass(frozen=True, eq=False)
class TokenTrie:
    """All byte-matched tokens of a vocabulary as a levelled trie (see the module doc)."""

    vocab_size: int
    levels: tuple[Level, ...]  # levels[0] is depth 1
    sorted_ids: np.ndarray  # int32: the byte-matched token ids in byte order

    @property
    def n_nodes(self) -> int:
        return 1 + sum(len(lvl.byte) for lvl in self.levels)

    @classmethod
    def from_vocab(cls, vocab: "Vocab") -> "TokenTrie":
        """Build the trie of every non-special, non-empty token of ``vocab``."""
        special = vocab.special_ids
        pairs = sorted((t, i) for i, t in enumerate(vocab.tokens) if t and i not in special)
        toks = [t for t, _ in pairs]
        ids = np.array([i for _, i in pairs], dtype=np.int32)
        lens = np.array([len(t) for t in toks], dtype=np.int64)
        lcp = np.array(
            [0] + [len(commonprefix((a, b))) for a, b in zip(toks, toks[1:])], dtype=np.int64
        )
        blob = np.frombuffer(b"".join(toks), dtype=np.uint8)
        offsets = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
        node = np.zeros(len(toks), dtype=np.int64)  # each token's node at the previous depth
        n_prev = 1
        levels = []
        max_len = int(lens.max()) if len(lens) else 0
        for d in range(1, max_len + 1):
            sel = np.flatnonzero(lens >= d)
            new = lcp[sel] < d
            nid = np.cumsum(new) - 1
            parent = node[sel[new]]
            count = np.bincount(parent, minlength=n_prev).astype(np.int64)
            ends = lens[sel] == d
            last = np.ones(len(sel), dtype=bool)
            last[:-1] = new[1:]
            term_nodes = nid[ends]
            term_count = np.bincount(term_nodes, minlength=len(parent)).astype(np.int64)
            levels.append(
                Level(
                    byte=blob[offsets[sel[new]] + d - 1].copy(),
                    child_start=np.cumsum(count) - count,
                    child_count=count,
                    term_start=np.cumsum(term_count) - term_count,
                    term_count=term_count,
                    term_ids=ids[sel[ends]],
                    tok_lo=sel[new].astype(np.int64),
                    tok_hi=sel[last].astype(np.int64) + 1,
                )
            )
            node[sel] = nid
            n_prev = len(parent)
        return cls(vocab_size=vocab.size, levels=tuple(levels), sorted_ids=ids)


_TRIE_CACHE: dict[str, TokenTrie] = {}


def trie_for(vocab: "Vocab") -> TokenTrie:
    """The trie of ``vocab``, built once per vocabulary fingerprint in this process."""
    trie = _TRIE_CACHE.get(vocab.fingerprint)
    if trie is None:
        trie = _TRIE_CACHE[vocab.fingerprint] = TokenTrie.from_vocab(vocab)
    return trie
