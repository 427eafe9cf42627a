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
from gramc.bitmask import n_words, set_bits
from gramc.limits import DEFAULT_LIMITS, Deadline, Limits

#: States walked together; bounds the walk's output to a few hundred MB on big vocabularies.
STATE_CHUNK = 64
#: Distinct keys (token ids) are put in order by scattering them into a table of the whole
#: key range when more than 1 / this of it is present, and by sorting them below that.
SCATTER_SHARE = 16
#: A walk without marked states.
_NO_MARKER = np.zeros(0, dtype=np.bool_)


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

    def stored(self) -> dict[str, np.ndarray]:
        """The rows as an artifact stores them (``tokens.*``, in the file's dtypes)."""
        return {
            "tokens.indptr": self.indptr.astype(np.int64),
            "tokens.ids": self.token_ids.astype(np.int32),
            "tokens.next": self.next_state.astype(np.int32),
            "tokens.forced": self.forced_token.astype(np.int32),
        }


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


#: Bytes per allowed (state, token) pair in :class:`TokenRows`: an int32 id and an int32
#: next state.
ROW_ENTRY_BYTES = 8


def bind_states(dfa: DFATable, trie: TokenTrie, states, forced_len: np.ndarray | None = None,
                limits: Limits = DEFAULT_LIMITS, deadline: Deadline | None = None) -> TokenRows:
    """Allowed tokens and their next states for each of ``states`` (see :class:`TokenRows`).

    States are walked and their rows put in order a chunk at a time. The rows' size is only
    known as they are walked, so after each chunk the bytes the finished arrays will need at
    least (the rows so far, held and then copied into the result) are checked against
    ``limits.max_memory``; ``deadline`` is checked between chunks."""
    from gramc.automata.walk import walk_tokens  # numba: imported only where tokens are walked

    states = np.asarray(states, dtype=np.int64)
    if forced_len is None:
        forced_len = forced_lengths(dfa)
    chunks, held = [], 0
    for lo in range(0, len(states), STATE_CHUNK):
        if deadline is not None:
            deadline.check()
        chunk = states[lo : lo + STATE_CHUNK]
        w = walk_tokens(dfa.delta, dfa.byte_class, trie, chunk)
        parts = [(w.row, w.token, w.next_state, w.depth), *_special_tokens(dfa, chunk)]
        rows, tokens, nxt, depth = (np.concatenate(p) for p in zip(*parts))
        order = _argsort_distinct(rows * trie.vocab_size + tokens, len(chunk) * trie.vocab_size)
        rows, tokens, nxt, depth = rows[order], tokens[order], nxt[order], depth[order]
        chunks.append((np.bincount(rows, minlength=len(chunk)), tokens.astype(np.int32), nxt.astype(np.int32),
                       _forced_tokens(rows, tokens, depth, forced_len[chunk], len(chunk))))
        held += ROW_ENTRY_BYTES * len(tokens)
        done = lo + len(chunk)
        if 2 * held > limits.max_memory:
            projected = 2 * held * len(states) // done
            limits.check_memory(projected, f"the token rows of {len(states):,} DFA states, projected from "
                                           f"the first {done:,} walked")
    if not chunks:
        empty = np.zeros(0, dtype=np.int32)
        chunks.append((np.zeros(0, dtype=np.int64), empty, empty, empty))
    counts, tokens, nxt, forced = (np.concatenate(p) for p in zip(*chunks))
    return TokenRows(
        states=states,
        indptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        token_ids=tokens,
        next_state=nxt,
        forced_token=forced,
    )


def bind_state(dfa: DFATable, trie: TokenTrie, q: int, forced_len: np.ndarray,
               buf) -> tuple[TokenRows, np.ndarray, np.ndarray | None]:
    """The row of one state as :func:`bind_states` gives it, its packed mask row (uint32, no
    EOS), and its dense next-state row (int32 per token id, DEAD where not allowed) where one
    was made on the way (most of the vocabulary survives), else None. Walked in ``buf`` (a
    :class:`~gramc.automata.walk.WalkBuffers` sized for the trie).

    A lazy table binds states one at a time, and in a string body most of a 128k vocabulary
    survives, where :func:`bind_states`'s batch bookkeeping (per-token row numbers, keys
    sorted across rows) cost as much as the walk."""
    from gramc.automata.walk import scatter_walked, set_walked, walk  # numba: imported on first use

    buf.ranges[0] = (0, len(trie.sorted_ids), 0, q)
    delta = np.require(dfa.delta, np.int32, ["C", "W"])
    ne, _, n_pending, _ = walk(delta, np.ascontiguousarray(dfa.byte_class, dtype=np.int64), trie.blob,
                               trie.offsets, trie.lengths, trie.lcp, trie.skip, trie.max_len, buf.ranges, 1,
                               _NO_MARKER, False, buf.pos, buf.next, 0, buf.hits, buf.pending, buf.missing)
    if n_pending:
        raise ValueError("bind_state: the transition table has unbuilt (negative) entries")
    pos = buf.pos[:ne]
    (_, special, special_next, _), = _special_tokens(dfa, np.array([q], dtype=np.int64))
    words = np.zeros(n_words(trie.vocab_size), dtype=np.uint32)
    dense = None
    if trie.vocab_size > SCATTER_SHARE * ne:  # few survive: sort them
        set_walked(words, trie.sorted_ids, pos, ne)
        tokens = np.concatenate([trie.sorted_ids[pos], special])
        order = np.argsort(tokens)
        ids, nxt = tokens[order].astype(np.int32), np.concatenate([buf.next[:ne], special_next])[order]
    else:  # most survive: scatter them into a dense row (~50x faster than sorting 100k ids)
        dense = np.zeros(trie.vocab_size, dtype=np.int32)
        scatter_walked(dense, words, trie.sorted_ids, pos, buf.next)  # alive: never DEAD
        dense[special] = special_next
        ids = np.flatnonzero(dense).astype(np.int32)
        nxt = dense[ids]
    set_bits(words, special)
    forced = np.full(1, -1, dtype=np.int32)
    if forced_len[q] > 0:
        depth = trie.lengths[pos]
        fits = depth <= forced_len[q]
        if fits.any():
            forced = _forced_tokens(np.zeros(int(fits.sum()), dtype=np.int64), trie.sorted_ids[pos[fits]],
                                    depth[fits], forced_len[[q]], 1)
    rows = TokenRows(states=np.array([q], dtype=np.int64), indptr=np.array([0, len(ids)], dtype=np.int64),
                     token_ids=ids, next_state=nxt.astype(np.int32), forced_token=forced)
    return rows, words, dense


def _argsort_distinct(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """The sorting permutation of distinct keys in ``range(n_keys)``: a scatter into a
    table of all keys when they fill a good part of that range (most of a vocabulary
    survives: a scatter is linear), an ``argsort`` otherwise (a few surviving tokens: the
    table alone would cost more than sorting them)."""
    if n_keys > SCATTER_SHARE * len(keys):
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
