"""The token walk: every token of a vocabulary run from some automaton states, in compiled code.

Binding an automaton to a vocabulary (a DFA's states, a PDA's node regions) asks, for each
state and token, whether the token's bytes can be read from the state without dying, where
they lead, and, for expanded PDA automata, whether a *marked* state was met on the way.

The tokens are visited in byte order, which makes the work a trie walk without trie nodes: a
token shares its first ``lcp[p]`` bytes with the one before it, so its walk resumes from the
state that prefix reached (kept on a stack by depth). When a prefix dies, every later token
sharing it is dead too, and is skipped with ``skip`` (the next token sharing fewer bytes with
its predecessor), so a state that allows little costs little. The loop runs under numba (a
numpy version needs one array operation per trie level, each with a fixed overhead); numba
is the one compiled dependency, and its kernels are cached on disk after the first run.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from gramc.automata.jit import numba
from gramc.automata.tables import DEAD
from gramc.automata.trie import TokenTrie


@dataclass(frozen=True, eq=False)
class Walk:
    """What a walk found, as parallel arrays.

    ``row[i]`` (an index into the walked states) reads token ``token[i]`` to its end and
    reaches ``next_state[i]`` (alive); ``depth[i]`` is the token's length. With a marker, hit
    ``j`` says that from ``hit_row[j]`` a marked state was reached (alive, before or at the
    end of the token) by every token at sorted positions ``hit_lo[j]..hit_hi[j]``.
    """

    row: np.ndarray
    token: np.ndarray
    next_state: np.ndarray
    depth: np.ndarray
    hit_row: np.ndarray
    hit_lo: np.ndarray
    hit_hi: np.ndarray


def walk_tokens(delta: np.ndarray, byte_class: np.ndarray, trie: TokenTrie, states,
                marker: np.ndarray | None = None) -> Walk:
    """Run every token of ``trie`` from each of ``states`` through ``delta`` (see :class:`Walk`).

    ``delta`` is indexed ``[state, byte_class[byte]]`` (extra columns, e.g. special tokens, are
    never read; every entry a state); ``marker`` is a bool per state, or None for no hits.
    """
    states = np.asarray(states, dtype=np.int64)
    # The kernel can write requests into a table built on demand, so numba needs a writeable
    # one: a table read from a file is copied (binding at load walks 64 states per copy).
    delta = np.require(delta, np.int32, ["C", "W"])
    cls = np.ascontiguousarray(byte_class, dtype=np.int64)
    marks = np.zeros(0, dtype=np.bool_) if marker is None else np.ascontiguousarray(marker, dtype=np.bool_)
    buf = WalkBuffers(len(trie.sorted_ids))
    parts = []
    for r, start in enumerate(states.tolist()):
        buf.ranges[0] = (0, len(trie.sorted_ids), 0, start)
        ne, nh, n_pending, _ = walk(delta, cls, trie.blob, trie.offsets, trie.lengths, trie.lcp, trie.skip,
                                    trie.max_len, buf.ranges, 1, marks, marker is not None, buf.pos, buf.next,
                                    0, buf.hits, buf.pending, buf.missing)
        if n_pending:
            raise ValueError("walk_tokens: the transition table has unbuilt (negative) entries")
        if ne or nh:
            parts.append((np.full(ne, r, dtype=np.int64), buf.pos[:ne].copy(), buf.next[:ne].copy(),
                          np.full(nh, r, dtype=np.int64), buf.hits[:nh, 0].copy(), buf.hits[:nh, 1].copy()))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return Walk(empty, trie.sorted_ids[empty], empty, empty, empty, empty, empty)
    row, p, next_state, hit_row, lo, hi = (np.concatenate(c) for c in zip(*parts))
    return Walk(row, trie.sorted_ids[p], next_state, trie.lengths[p], hit_row, lo, hi)


class WalkBuffers:
    """Output buffers of :func:`walk` sized for one walk of every token: each token is emitted,
    deferred or hit at most once, so nothing grows inside the kernel (a numba kernel that
    grows its arrays pays reference counting on every access, ~20x slower)."""

    def __init__(self, n_tok: int):
        self.n_tok = n_tok
        self.pos, self.next = (np.empty(n_tok + 1, dtype=np.int64) for _ in range(2))
        self.ranges, self.pending, self.hits = (np.empty((n_tok + 1, 4), dtype=np.int64) for _ in range(3))
        self.missing = np.empty((n_tok + 1, 2), dtype=np.int64)


#: Vocabulary sizes a thread keeps buffers for (16 bytes x 16 per token each: 32 MB for Llama 3).
MAX_SHARED_BUFFERS = 4
_THREAD = threading.local()


def shared_buffers(n_tok: int) -> WalkBuffers:
    """This thread's :class:`WalkBuffers` for ``n_tok`` tokens, shared by every table: one
    set per thread, not one per table (each table's would be vocabulary-sized). A caller
    consumes what a walk wrote before it walks again or returns, so walks never overlap."""
    by_size = getattr(_THREAD, "by_size", None)
    if by_size is None:
        by_size = _THREAD.by_size = {}
    buf = by_size.get(n_tok)
    if buf is None:
        if len(by_size) >= MAX_SHARED_BUFFERS:
            by_size.clear()
        buf = by_size[n_tok] = WalkBuffers(n_tok)
    return buf


@numba.njit(cache=True, nogil=True)
def walk(trans, cls, blob, offsets, lengths, lcp, skip, max_len, ranges, n_ranges, marker, use_marker,
         out_pos, out_next, ne, hits, pending, missing):
    """The token walk, through a table that may be built on demand (negative: not built yet).

    Each of ``ranges[:n_ranges]`` (rows of lo, hi, depth, state) is a run of sorted positions
    whose tokens share their first ``depth`` bytes, read into ``state`` (a whole walk from a
    state is the range ``(0, n_tok, 0, state)``); nothing outside a range is walked, deferred
    or hit, even where the tokens around it share more bytes. Tokens read alive to their end
    are appended to ``out_pos``/``out_next`` (position, end state) from index ``ne``. With
    ``use_marker``, the positions under a marked state met alive go to ``hits`` as disjoint
    ranges, laid out as ``ranges`` (the depth and the marked state where they were met: a
    range to walk on from there); a range already covering a token covers its sub-trees. A
    token stopped by an unbuilt transition defers every token sharing that prefix: one row of
    ``pending`` (laid out as ``ranges``, to walk again once built), and the transition is
    written once to ``missing`` (and set to -2 in ``trans``: the caller must build it).

    Returns (ne, n_hits, n_pending, n_missing).
    """
    stack = np.empty(max_len + 1, np.int64)
    nh = 0
    npend = 0
    nmiss = 0
    for k in range(n_ranges):
        lo, hi, depth = ranges[k, 0], ranges[k, 1], ranges[k, 2]
        stack[depth] = ranges[k, 3]
        if stack[depth] == DEAD:
            continue
        covered = lo  # positions before this one are in a recorded hit range
        if use_marker and marker[stack[depth]]:
            hits[nh, 0], hits[nh, 1], hits[nh, 2], hits[nh, 3] = lo, hi, depth, stack[depth]
            nh += 1
            covered = hi
        dead = max_len + 1  # every token sharing this many bytes with the last walked one dies
        p = lo
        while p < hi:
            shared = depth if p == lo else lcp[p]
            if shared >= dead:
                while p < hi and lcp[p] >= dead:
                    p = skip[p]
                continue
            dead = max_len + 1
            st = stack[shared]
            o = offsets[p]
            n = lengths[p]
            i = shared
            while i < n:
                c = cls[blob[o + i]]
                nxt = trans[st, c]
                if nxt < 0:
                    nmiss = _request(trans, st, c, nxt, missing, nmiss)
                    pending[npend, 0] = p
                    pending[npend, 1] = min(_subtree_end(lcp, skip, p, i + 1), hi)
                    pending[npend, 2] = i
                    pending[npend, 3] = st
                    npend += 1
                    st = DEAD
                elif nxt != DEAD:
                    st = nxt
                    i += 1
                    stack[i] = st
                    if use_marker and p >= covered and marker[st]:
                        covered = min(_subtree_end(lcp, skip, p, i), hi)
                        hits[nh, 0], hits[nh, 1], hits[nh, 2], hits[nh, 3] = p, covered, i, st
                        nh += 1
                    continue
                else:
                    st = DEAD
                dead = i + 1
                break
            if st != DEAD:
                out_pos[ne], out_next[ne] = p, st
                ne += 1
            p += 1
    return ne, nh, npend, nmiss


@numba.njit(cache=True, nogil=True)
def set_walked(words, sorted_ids, pos, n):
    """Set in the packed row ``words`` the bits of the tokens at sorted positions
    ``pos[:n]`` (what :func:`walk` emitted): no vocabulary-wide scratch per walk."""
    for i in range(n):
        t = sorted_ids[pos[i]]
        words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


@numba.njit(cache=True, nogil=True)
def scatter_walked(dense, words, sorted_ids, pos, nxt):
    """For each token :func:`walk` emitted (sorted position ``pos[i]``, end state ``nxt[i]``):
    its entry in the dense next-state row ``dense`` and its bit in the packed row ``words``."""
    for i in range(len(pos)):
        t = sorted_ids[pos[i]]
        dense[t] = nxt[i]
        words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


@numba.njit(cache=True, nogil=True)
def _request(trans, state, c, entry, missing, n_missing):
    """Ask for the unbuilt transition ``(state, c)`` (its table ``entry`` is negative): written
    to ``missing`` and set to -2 the first time, so it is asked for once. Returns the count."""
    if entry == -1:
        trans[state, c] = -2
        missing[n_missing, 0] = state
        missing[n_missing, 1] = c
        n_missing += 1
    return n_missing


@numba.njit(cache=True, nogil=True)
def _subtree_end(lcp, skip, p, d):
    """One past the last sorted position whose token shares the first ``d`` bytes of token ``p``."""
    n = len(lcp)
    q = p + 1
    while q < n and lcp[q] >= d:
        q = skip[q]
    return q


@numba.njit(cache=True, nogil=True)
def run_tokens(trans, byte_class, blob, offsets, lengths, ids, state, read, missing):
    """Advance token ``ids[i]`` through ``trans`` (indexed ``[state, class]``; negative: not
    built yet) from ``state[i]`` after ``read[i]`` of its bytes (``blob[offsets[t] + k]`` is
    byte ``k`` of token ``t``, ``byte_class`` its class), until it ends, dies or meets an
    unbuilt transition.

    ``state`` and ``read`` are updated in place. The unbuilt transitions met are written to
    ``missing`` (rows of state, class), each once: they are set to -2 in ``trans``, so the
    caller must build them all. Returns how many were written."""
    n_missing = 0
    for i in range(len(ids)):
        t = ids[i]
        s = state[i]
        k = read[i]
        o = offsets[t]
        n = lengths[t]
        while k < n and s != DEAD:
            c = byte_class[blob[o + k]]
            nxt = trans[s, c]
            if nxt < 0:
                n_missing = _request(trans, s, c, nxt, missing, n_missing)
                break
            s = nxt
            k += 1
        state[i] = s
        read[i] = k
    return n_missing


@numba.njit(cache=True, nogil=True)
def common_prefixes(blob, offsets, lengths):
    """``lcp[p]``: bytes token ``p`` shares with token ``p - 1`` (0 for the first)."""
    n_tok = len(offsets)
    out = np.zeros(n_tok, np.int64)
    for p in range(1, n_tok):
        a, b = offsets[p - 1], offsets[p]
        n = min(lengths[p - 1], lengths[p])
        i = 0
        while i < n and blob[a + i] == blob[b + i]:
            i += 1
        out[p] = i
    return out


@numba.njit(cache=True, nogil=True)
def next_smaller(lcp):
    """``skip[p]``: the first position after ``p`` whose ``lcp`` is below ``lcp[p]`` (or the
    end): every token between shares at least ``lcp[p]`` bytes with token ``p - 1``."""
    n_tok = len(lcp)
    out = np.full(n_tok, n_tok, np.int64)
    stack = np.empty(n_tok, np.int64)
    sp = 0
    for p in range(n_tok):
        while sp and lcp[stack[sp - 1]] > lcp[p]:
            sp -= 1
            out[stack[sp]] = p
        stack[sp] = p
        sp += 1
    return out
