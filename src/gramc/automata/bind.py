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
        emits, _ = walk_trie(dfa.delta, dfa.byte_class, trie, chunk)
        for rows, tokens, nxt, depth in emits + _special_tokens(dfa, chunk):
            parts.append((rows + lo, tokens, nxt, depth))
    if parts:
        rows, tokens, nxt, depth = (np.concatenate(p) for p in zip(*parts))
    else:
        rows = tokens = nxt = depth = np.zeros(0, dtype=np.int64)
    order = np.lexsort((tokens, rows))
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
