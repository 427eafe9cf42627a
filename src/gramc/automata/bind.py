"""Binding a DFA to a vocabulary: which tokens each state allows, and where they lead.

For a batch of DFA states every token is run from each state by the compiled walk of
:mod:`gramc.automata.walk`, which skips every token under a dead prefix. A token is allowed
in a state exactly when its bytes are read to the end alive, which (because every live DFA
state can still reach acceptance) is exactly the correctness contract: the bytes so far plus
the token's bytes are a prefix of some string of the language.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gramc.automata.tables import DEAD, DFATable
from gramc.automata.trie import TokenTrie

#: States walked together; bounds the walk's output to a few hundred MB on big vocabularies.
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
    from gramc.automata.walk import walk_tokens  # numba: imported only where tokens are walked

    states = np.asarray(states, dtype=np.int64)
    if forced_len is None:
        forced_len = forced_lengths(dfa)
    parts = []
    for lo in range(0, len(states), STATE_CHUNK):
        chunk = states[lo : lo + STATE_CHUNK]
        w = walk_tokens(dfa.delta, dfa.byte_class, trie, chunk)
        for rows, tokens, nxt, depth in [(w.row, w.token, w.next_state, w.depth), *_special_tokens(dfa, chunk)]:
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
    table of all keys when they fill a good part of that range (one state where most of a
    128k vocabulary survives: ~50x faster than a sort), an ``argsort`` otherwise (a few
    surviving tokens: the table alone would cost ~100 µs)."""
    if n_keys > 16 * len(keys):
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
