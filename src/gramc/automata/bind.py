"""Binding a DFA to a vocabulary: which tokens each state allows, and where they lead.

For a batch of DFA states the token trie is walked level by level: every live (state, trie
node) pair expands into its children with one numpy gather (``delta[state, class[byte]]``),
and pairs that reach the dead state are dropped, pruning their whole sub-tree. A token is
allowed in a state exactly when the walk reaches the token's node alive, which (because every
live DFA state can still reach acceptance) is exactly the correctness contract: the bytes so
far plus the token's bytes are a prefix of some string of the language.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gramc.automata.tables import DEAD, DFATable
from gramc.automata.trie import TokenTrie

#: States walked together; bounds the temporary arrays to a few hundred MB on big vocabularies.
STATE_CHUNK = 64
#: A state with at least this many bytes leading back to itself is walked with
#: :func:`_walk_loop_state` (a JSON string body loops on ~90 ASCII bytes).
LOOP_MIN_BYTES = 32
#: :func:`walk_trie` runs the remaining tokens one by one once at most this many are alive.
RUN_SWITCH = 256


@dataclass(frozen=True, eq=False)
class TokenRows:
    """Allowed tokens of some DFA states in CSR form.

    Row ``i`` (for ``states[i]``) is ``token_ids[indptr[i]:indptr[i+1]]`` (ascending) with the
    state each token leads to in ``next_state``; ``forced_token[i]`` is the longest token that
    stays inside the state's forced (jump-forward) bytes, or -1.
    """

    states: np.ndarray
    indptr: np.ndarray
    token_ids: np.ndarray
    next_state: np.ndarray
    forced_token: np.ndarray


def _expand(counts: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs ``starts[i] .. starts[i]+counts[i]``: (owner index, item) of every item."""
    total = int(counts.sum())
    owner = np.repeat(np.arange(len(counts)), counts)
    first = np.cumsum(counts) - counts
    return owner, starts[owner] + (np.arange(total) - first[owner])


def walk_trie(delta: np.ndarray, byte_class: np.ndarray, trie: TokenTrie, states: np.ndarray,
              marker: np.ndarray | None = None):
    """Walk every token from each of ``states`` through the automaton ``delta``.

    Returns ``(emits, hits)``: ``emits`` lists ``(row, token, next state, depth)`` arrays of
    the tokens read to their end without dying; ``hits`` (only with a ``marker`` array over
    states) lists ``(row, tok_lo, tok_hi)`` arrays: a marked state was reached after a proper
    prefix shared by the tokens at sorted positions ``tok_lo..tok_hi``.
    """
    origin = np.arange(len(states))
    state = states.astype(np.int64)
    node = np.zeros(len(states), dtype=np.int64)
    emits, hits = [], []
    if marker is not None:
        at_root = np.flatnonzero(marker[state])
        hits.append((at_root, np.zeros(len(at_root), np.int64), np.full(len(at_root), len(trie.sorted_ids))))
    for depth, level in enumerate(trie.levels, start=1):
        owner, child = _expand(level.child_count[node], level.child_start[node])
        if not len(child):
            break
        nxt = delta[state[owner], byte_class[level.byte[child]]]
        alive = nxt != DEAD
        origin, state, node = origin[owner][alive], nxt[alive].astype(np.int64), child[alive]
        if not len(node):
            break
        t_owner, t_index = _expand(level.term_count[node], level.term_start[node])
        if len(t_index):
            tokens = level.term_ids[t_index]
            emits.append((origin[t_owner], tokens, state[t_owner], np.full(len(tokens), depth)))
        if marker is not None:
            m = marker[state]
            hits.append((origin[m], level.tok_lo[node[m]], level.tok_hi[node[m]]))
        below = level.tok_hi[node] - level.tok_lo[node]
        if below.sum() <= RUN_SWITCH:
            # Few tokens left under the live nodes: run them on their bytes rather than
            # stepping through (up to 256) sparse trie levels.
            owner, positions = _expand(below, level.tok_lo[node])
            longer = trie.lengths[positions] > depth
            owner, positions = owner[longer], positions[longer]
            e, h = _run_tokens(delta, byte_class, trie, origin[owner], state[owner], positions,
                               trie.offsets[positions] + depth, marker)
            return emits + e, hits + h
    return emits, hits


def walk_states(delta: np.ndarray, byte_class: np.ndarray, trie: TokenTrie, states: np.ndarray,
                marker: np.ndarray | None = None):
    """:func:`walk_trie` for ``states``, with looping states walked by :func:`_walk_loop_state`.

    Same results as :func:`walk_trie` (rows index ``states``); a state qualifies when at least
    :data:`LOOP_MIN_BYTES` bytes lead from it back to itself and it is not marked.
    """
    states = np.asarray(states, dtype=np.int64)
    loops = delta[states[:, None], byte_class[None, :]] == states[:, None]
    looping = (loops.sum(axis=1) >= LOOP_MIN_BYTES) & (states != DEAD)
    if marker is not None:
        looping &= ~marker[states]
    walked = np.flatnonzero(~looping)
    emits, hits = walk_trie(delta, byte_class, trie, states[walked], marker)
    emits = [(walked[rows], *rest) for rows, *rest in emits]
    hits = [(walked[rows], lo, hi) for rows, lo, hi in hits]
    for k in np.flatnonzero(looping):
        e, h = _walk_loop_state(delta, byte_class, trie, int(states[k]), loops[k], marker)
        emits += [(np.full(len(tokens), k), tokens, *rest) for _, tokens, *rest in e]
        hits += [(np.full(len(lo), k), lo, hi) for _, lo, hi in h]
    return emits, hits


def _walk_loop_state(delta: np.ndarray, byte_class: np.ndarray, trie: TokenTrie, q: int,
                     loop: np.ndarray, marker: np.ndarray | None):
    """:func:`walk_trie` from one unmarked state ``q`` whose ``loop`` bytes lead back to ``q``.

    In a string body almost every token stays alive, so a trie walk visits the whole trie
    (~60 ms on a 128k vocabulary). Tokens made only of loop bytes end in ``q`` without a
    walk; every other token is in ``q`` up to its first byte outside the loop and is run
    from there on its own bytes: tens of thousands of short suffixes instead of the trie.
    """
    inside, exits, exit_at = trie.loop_split(loop)
    zeros = lambda n: np.zeros(n, dtype=np.int64)  # noqa: E731
    emits = [(zeros(len(inside)), trie.sorted_ids[inside], np.full(len(inside), q), trie.lengths[inside])]
    e, hits = _run_tokens(delta, byte_class, trie, zeros(len(exits)), np.full(len(exits), q),
                          exits, trie.offsets[exits] + exit_at, marker)
    return emits + e, hits


def _run_tokens(delta, byte_class, trie: TokenTrie, origin, state, positions, pos, marker):
    """Run the tokens at sorted ``positions`` through ``delta`` on their own bytes, each from
    its ``state`` at blob offset ``pos``, to their end: emits and hits as :func:`walk_trie`.

    One numpy step per byte; a self-loop on a byte skips the rest of its run of equal bytes
    (Llama 3 has tokens of 256 spaces or dashes), so the step count is the number of byte
    runs, not the token length.
    """
    emits, hits = [], []
    end = trie.offsets[positions] + trie.lengths[positions]
    state = np.asarray(state, dtype=np.int64)
    while len(positions):
        nxt = delta[state, byte_class[trie.blob[pos]]].astype(np.int64)
        pos = np.where(nxt == state, trie.run_end[pos], pos + 1)
        alive = nxt != DEAD
        origin, state, positions, pos, end = origin[alive], nxt[alive], positions[alive], pos[alive], end[alive]
        if marker is not None:
            m = marker[state]
            hits.append((origin[m], positions[m], positions[m] + 1))
        done = pos == end
        if done.any():
            emits.append((origin[done], trie.sorted_ids[positions[done]], state[done],
                          trie.lengths[positions[done]]))
            keep = ~done
            origin, state, positions, pos, end = origin[keep], state[keep], positions[keep], pos[keep], end[keep]
    return emits, hits


def _special_tokens(dfa: DFATable, states: np.ndarray):
    """(row, token, next state, depth 0) for the grammar's special-token columns."""
    nbc = dfa.n_byte_classes
    rows, cols = np.nonzero(dfa.delta[states][:, nbc:] != DEAD)
    nxt = dfa.delta[states[rows], nbc + cols]
    return [(rows, dfa.token_ids[cols], nxt, np.zeros(len(rows), dtype=np.int64))]


def forced_lengths(dfa: DFATable) -> np.ndarray:
    """Length of the forced byte string of every state."""
    byte, nxt = dfa.forced_steps()
    length = np.zeros(dfa.n_states, dtype=np.int64)
    # Forced chains never cycle; resolve them by walking each chain once from its top.
    for s in np.flatnonzero(byte >= 0)[::-1]:
        chain = []
        while byte[s] >= 0 and length[s] == 0:
            chain.append(s)
            s = nxt[s]
        base = length[s]
        for k, c in enumerate(reversed(chain), start=1):
            length[c] = base + k
    return length


def bind_states(dfa: DFATable, trie: TokenTrie, states, forced_len: np.ndarray | None = None) -> TokenRows:
    """Allowed tokens and their next states for each of ``states`` (see :class:`TokenRows`)."""
    states = np.asarray(states, dtype=np.int64)
    if forced_len is None:
        forced_len = forced_lengths(dfa)
    parts = []
    for lo in range(0, len(states), STATE_CHUNK):
        chunk = states[lo : lo + STATE_CHUNK]
        emits, _ = walk_states(dfa.delta, dfa.byte_class, trie, chunk)
        for rows, tokens, nxt, depth in emits + _special_tokens(dfa, chunk):
            parts.append((rows + lo, tokens, nxt, depth))
    if parts:
        rows, tokens, nxt, depth = (np.concatenate(p) for p in zip(*parts))
    else:
        rows = tokens = nxt = depth = np.zeros(0, dtype=np.int64)
    order = _argsort_distinct(rows * trie.vocab_size + tokens, len(states) * trie.vocab_size)
    rows, tokens, nxt, depth = rows[order], tokens[order], nxt[order], depth[order]
    counts = np.bincount(rows, minlength=len(states))
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return TokenRows(
        states=states,
        indptr=indptr,
        token_ids=tokens.astype(np.int32),
        next_state=nxt.astype(np.int32),
        forced_token=_forced_tokens(rows, tokens, depth, forced_len[states], len(states)),
    )


def _argsort_distinct(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """The sorting permutation of distinct keys in ``range(n_keys)``: a scatter into a
    table of all keys when that range is small (one state against a 128k vocabulary is
    ~50x faster than a sort), an ``argsort`` otherwise."""
    if n_keys > 8 * len(keys) + (1 << 20):
        return np.argsort(keys, kind="stable")
    slot = np.full(n_keys, -1, dtype=np.int64)
    slot[keys] = np.arange(len(keys))
    return slot[slot >= 0]


def _forced_tokens(rows, tokens, depth, limit, n_rows) -> np.ndarray:
    """Per row, the longest (then lowest-id) token whose depth fits the forced length."""
    forced = np.full(n_rows, -1, dtype=np.int32)
    fits = (depth > 0) & (depth <= limit[rows])
    if fits.any():
        r, t, d = rows[fits], tokens[fits], depth[fits]
        order = np.lexsort((t, -d, r))
        r, t = r[order], t[order]
        first = np.ones(len(r), dtype=bool)
        first[1:] = r[1:] != r[:-1]
        forced[r[first]] = t[first]
    return forced
