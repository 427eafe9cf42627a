"""The flat token trie: every byte-matched token of a vocabulary, laid out level by level.

Tokens are sorted by their bytes; each distinct prefix is one node. Level ``d`` holds the
nodes of depth ``d`` in sorted order, so the children of any node form one contiguous run of
the next level. That layout lets :mod:`gramc.automata.bind` walk all tokens from many
automaton states at once with one numpy gather per level, pruning dead prefixes (and with
them whole sub-trees) as it goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    #: The tokens' bytes back to back in ``sorted_ids`` order, with each token's offset
    #: and length (for walks that run whole tokens rather than the trie, see ``loop_split``).
    blob: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    #: For each byte of ``blob``: where the run of equal bytes it starts ends (within its token).
    run_end: np.ndarray
    _loop_cache: dict = field(default_factory=dict, repr=False, compare=False)

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
        boundary = np.ones(len(blob) + 1, dtype=bool)  # a run starts here (or the blob ends)
        boundary[1:-1] = blob[1:] != blob[:-1]
        boundary[offsets] = True
        starts = np.flatnonzero(boundary)
        run_end = starts[np.searchsorted(starts, np.arange(len(blob)), side="right")]
        return cls(vocab_size=vocab.size, levels=tuple(levels), sorted_ids=ids, blob=blob,
                   offsets=offsets, lengths=lens, run_end=run_end)

    def loop_split(self, loop: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Split the tokens by a set of bytes ``loop`` (bool ``[256]``).

        Returns ``(inside, exits, exit_at)``: the sorted positions of the tokens made only of
        ``loop`` bytes, of the others, and for each of the others the index of its first byte
        outside ``loop``. From a state whose ``loop`` bytes all lead back to itself, the
        inside tokens return to that state and the others need running only from ``exit_at``
        (see :func:`gramc.automata.bind.walk_states`). Cached per byte set.
        """
        key = np.packbits(loop).tobytes()
        hit = self._loop_cache.get(key)
        if hit is None:
            bad = np.flatnonzero(~loop[self.blob])
            owner = np.searchsorted(self.offsets, bad, side="right") - 1
            exits, first = np.unique(owner, return_index=True)
            exit_at = bad[first] - self.offsets[exits]
            inside = np.ones(len(self.sorted_ids), dtype=bool)
            inside[exits] = False
            hit = (np.flatnonzero(inside), exits, exit_at)
            if len(self._loop_cache) >= LOOP_CACHE_SIZE:
                self._loop_cache.pop(next(iter(self._loop_cache)))
            self._loop_cache[key] = hit
        return hit


#: Byte sets whose token split a trie keeps (JSON needs a handful: string bodies, patterns).
LOOP_CACHE_SIZE = 32


_TRIE_CACHE: dict[str, TokenTrie] = {}


def trie_for(vocab: "Vocab") -> TokenTrie:
    """The trie of ``vocab``, built once per vocabulary fingerprint in this process."""
    trie = _TRIE_CACHE.get(vocab.fingerprint)
    if trie is None:
        trie = _TRIE_CACHE[vocab.fingerprint] = TokenTrie.from_vocab(vocab)
    return trie
