"""Token masks against the brute-force definition, eager vs lazy binding, the Matcher API."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracle
from gramc.automata import bind
from gramc.automata.bind import bind_state, bind_states, forced_lengths
from gramc.automata.trie import trie_for
from gramc.automata.walk import WalkBuffers
from gramc.compiler.dfa import build_dfa
from gramc.compiler.ir import Grammar, Token, alt, byte_class, byte_range, literal, repeat, seq
from gramc.errors import GramcError, VocabularyError
from gramc.runtime.dfa_artifact import DFAArtifact
from gramc.bitmask import apply_bitmask, n_words, unpack_row
from gramc.vocab import Vocab
from strategies import exprs, small_vocabs, strings

EOS = "<eos>"


def make_vocab(tokens: list[bytes]) -> Vocab:
    """The tokens plus one special EOS at the end."""
    return Vocab.from_list(list(tokens) + [EOS.encode()], special_ids=[len(tokens)], eos_ids=[len(tokens)])


def artifact_for(e, vocab: Vocab, lazy: bool = False) -> DFAArtifact:
    return DFAArtifact.bound(build_dfa(Grammar.single(e)), {"format": "ir"}, vocab, lazy=lazy)


def brute_force_mask(e, vocab: Vocab, prefix: bytes) -> np.ndarray:
    """The correctness contract, literally: prefix + token is a viable prefix."""
    mask = np.zeros(vocab.size, dtype=bool)
    for i, tok in enumerate(vocab.tokens):
        if i in vocab.special_ids:
            mask[i] = i in vocab.eos_ids and oracle.fullmatch(e, prefix)
        else:
            mask[i] = oracle.is_viable_prefix(e, prefix + tok)
    return mask


@settings(max_examples=200, deadline=None)
@given(exprs(), small_vocabs(), st.data())
def test_masks_equal_brute_force_on_random_walks(e, tokens, data):
    vocab = make_vocab(tokens)
    art = artifact_for(e, vocab)
    m = art.matcher()
    prefix = b""
    for _ in range(6):
        expected = brute_force_mask(e, vocab, prefix)
        assert np.array_equal(m.mask(), expected), prefix
        assert m.is_complete() == oracle.fullmatch(e, prefix)
        allowed = np.flatnonzero(expected[: len(tokens)])
        if not len(allowed):
            break
        t = int(data.draw(st.sampled_from(allowed.tolist())))
        assert m.commit_token(t)
        prefix += vocab.tokens[t]


@settings(max_examples=100, deadline=None)
@given(exprs(), small_vocabs(), st.lists(strings(4), max_size=5))
def test_lazy_binding_equals_eager(e, tokens, prefixes):
    vocab = make_vocab(tokens)
    eager, lazy = artifact_for(e, vocab), artifact_for(e, vocab, lazy=True)
    assert lazy.is_lazy and not eager.is_lazy
    for p in prefixes:
        a, b = eager.matcher(), lazy.matcher()
        if a.commit_bytes(p):
            assert b.commit_bytes(p)
            assert np.array_equal(a.mask(), b.mask())
            assert a.forced_tokens() == b.forced_tokens()
    assert eager.to_bytes() == lazy.to_bytes()


@settings(max_examples=100, deadline=None)
@given(exprs(), small_vocabs())
def test_lazy_masks_from_node_slices_and_unbound_commits_equal_the_eager_rows(e, tokens):
    """A lazy table's mask row comes from the state's node slice with its exits walked on
    (no row bound), and a commit from an unbound state walks the token's bytes: for every
    state and token, the same as the eager table's row, next state included."""
    vocab = make_vocab(tokens)
    # A loop left by "c" into e (its slice has exits), and a special token's column.
    g = alt(e, seq(Token(len(tokens)), e), seq(repeat(byte_class(b"ab"), 0, None), literal(b"c"), e))
    eager, lazy = artifact_for(g, vocab), artifact_for(g, vocab, lazy=True)
    et, lt = eager.token_table, lazy.token_table
    for q in range(eager.dfa.n_states):
        assert np.array_equal(lt.words(q), et.words(q)), q
        assert lt._ids[q] is None  # the mask bound nothing
        for t in range(vocab.size):
            assert lt.next_state(q, t) == et.next_state(q, t), (q, t)


def test_lazy_masks_of_string_loops_on_gpt2_equal_the_bound_rows():
    """On a real vocabulary, the states of JSON-like string loops (sliced by their shared
    shape, exits walked per state) give the rows binding gives."""
    import gramc

    vocab = gramc.load_vocab("gpt2")
    art = gramc.compile(r'\{"name":"[^"\\]*","tags":\["[^"\\]*"(,"[^"\\]*")*\],"id":[0-9]{1,5}\}', format="regex",
                        vocab=vocab, lazy=True)
    table = art.token_table
    sliced = {q: table.words(q).copy() for q in range(art.dfa.n_states)}
    assert all(table._ids[q] is None for q in sliced)
    assert sum(table._slices.slice_for(q).exit_tokens for q in sliced if table._slices.reads(q)) > 100
    for q, words in sliced.items():
        table._bind(q)
        assert np.array_equal(words, table._word_rows.get(q)), q


def test_lazy_binding_of_an_artifact_read_from_bytes_walks_its_read_only_table():
    """An unbound artifact read back from bytes has read-only arrays; bound lazily, its masks
    (slices walked through a writeable copy of the table) are the eager ones."""
    import gramc
    from gramc.runtime.reader import from_bytes

    vocab = gramc.load_vocab("gpt2")
    pattern = r'\{"a":"[^"\\]*","b":[0-9]+\}'
    loaded = from_bytes(gramc.compile(pattern, format="regex").to_bytes())
    assert not loaded.dfa.delta.flags.writeable
    lazy, eager = loaded.bind(vocab, lazy=True).matcher(), gramc.compile(pattern, format="regex", vocab=vocab).matcher()
    for piece in [b'{"', b"a", b'":"', b"hello", b" world", b'",', b'"b', b'":', b"12", b"}"]:
        assert np.array_equal(lazy.mask(), eager.mask())
        assert lazy.commit_bytes(piece) and eager.commit_bytes(piece)
    assert lazy.is_complete()


@settings(max_examples=100, deadline=None)
@given(exprs(), small_vocabs())
def test_one_state_binding_equals_the_batch(e, tokens):
    """A lazy table binds one state at a time (bind_state): the same ids, next states and
    forced token as the batch binding of every state, a packed row of those ids, and a dense
    row that says the same, whether the row is sorted or scattered."""
    vocab = make_vocab(tokens)
    dfa = build_dfa(Grammar.single(alt(e, seq(Token(len(tokens)), e))))  # and a special token
    trie = trie_for(vocab)
    forced_len = forced_lengths(dfa)
    batch = bind_states(dfa, trie, np.arange(dfa.n_states), forced_len)
    buf = WalkBuffers(len(trie.sorted_ids))
    for share, scattered in ((0, False), (10**9, True)):
        with mock.patch.object(bind, "SCATTER_SHARE", share):
            for q in range(dfa.n_states):
                one, words, dense = bind_state(dfa, trie, q, forced_len, buf)
                ids, nxt = batch.token_ids[batch.indptr[q] : batch.indptr[q + 1]], \
                    batch.next_state[batch.indptr[q] : batch.indptr[q + 1]]
                assert np.array_equal(one.token_ids, ids) and np.array_equal(one.next_state, nxt)
                assert one.forced_token[0] == batch.forced_token[q]
                assert np.array_equal(np.flatnonzero(unpack_row(words, vocab.size)), ids)
                assert scattered or dense is None
                if dense is not None:
                    assert np.array_equal(np.flatnonzero(dense), ids) and np.array_equal(dense[ids], nxt)


@settings(max_examples=100, deadline=None)
@given(exprs(), small_vocabs(), st.lists(st.integers(0, 20), max_size=8))
def test_validate_tokens_matches_commits(e, tokens, seq_ids):
    vocab = make_vocab(tokens)
    m = artifact_for(e, vocab).matcher(max_rollback=0)
    ids = [i % vocab.size for i in seq_ids]
    n = m.validate_tokens(ids)
    assert m.state == artifact_for(e, vocab).dfa.start  # unchanged
    assert m.commit_tokens(ids) == n


def test_eos_only_when_complete_and_then_finished():
    vocab = make_vocab([b"a", b"b", b"ab"])
    m = artifact_for(seq(literal(b"a"), repeat(literal(b"b"), 0, 1)), vocab).matcher()
    eos = vocab.eos_ids[0]
    assert not m.mask()[eos] and not m.commit_token(eos)
    assert m.commit_token(0)  # "a": complete, "b" still allowed
    assert m.mask()[eos] and m.mask()[1] and not m.is_finished()
    assert m.commit_token(eos)
    assert m.is_finished() and m.is_complete() and not m.mask().any()
    assert not m.commit_token(1)


def test_finished_when_nothing_more_is_allowed():
    vocab = Vocab.from_list([b"a", b"b"])  # no EOS at all
    m = artifact_for(literal(b"ab"), vocab).matcher()
    assert m.commit_tokens([0, 1]) == 2
    assert m.is_complete() and m.is_finished() and not m.is_failed()


def test_failed_when_the_vocabulary_cannot_continue():
    vocab = make_vocab([b"a", b"c"])
    m = artifact_for(literal(b"ab"), vocab).matcher()
    assert m.commit_token(0)
    assert m.is_failed() and m.is_finished() and not m.is_complete()


def test_mask_padding_for_wide_logits():
    vocab = make_vocab([b"a", b"b"])
    m = artifact_for(repeat(literal(b"a"), 1, None), vocab).matcher()
    wide = m.mask(size=40)
    assert wide.shape == (40,) and wide.tolist()[:3] == [True, False, False] and not wide[3:].any()
    with pytest.raises(ValueError, match="smaller than the vocabulary"):
        m.mask(size=1)  # would drop allowed ids silently
    assert m.logits_mask(1).tolist() == [True] and m.logits_mask(40).tolist() == wide.tolist()
    with pytest.raises(ValueError):
        m.mask()[0] = False  # cached masks are read-only


def test_fill_bitmask_and_apply_match_the_bool_mask():
    tokens = [bytes([b]) for b in range(97, 123)] + [b"ab", b"zz", b"a1"]
    vocab = make_vocab(tokens)
    m = artifact_for(repeat(byte_range(97, 122), 1, None), vocab).matcher()
    row = np.full(n_words(vocab.size) + 2, 0xFFFFFFFF, dtype=np.uint32)
    m.fill_bitmask(row)
    assert not row[n_words(vocab.size):].any()
    logits = np.zeros((1, vocab.size + 5), dtype=np.float32)
    apply_bitmask(logits, row[None, : n_words(vocab.size)])
    assert np.array_equal(np.isfinite(logits[0]), m.mask(size=vocab.size + 5))
    with pytest.raises(ValueError):
        m.fill_bitmask(np.zeros(0, dtype=np.uint32))



@pytest.mark.parametrize("n_tokens", [5, 29, 40, 100])
def test_fill_bitmask_takes_only_rows_it_can_fill(n_tokens):
    """Every width of row, one word or several: the exact width gets the packed mask, a wider
    row the mask and zeros after it; a narrower, 2-d, read-only or wrongly typed row is a
    ValueError and is left as it was (numpy would broadcast a one-word row into any width)."""
    tokens = [bytes([97 + i % 26]) * (1 + i // 26) for i in range(n_tokens)]
    vocab = make_vocab(tokens)
    m = artifact_for(repeat(byte_range(97, 99), 1, None), vocab).matcher()
    w = n_words(vocab.size)
    want = np.packbits(m.mask(size=32 * w), bitorder="little").view("<u4")
    for dtype in (np.int32, np.uint32):
        exact, wide = np.zeros(w, dtype), np.full(w + 2, -1).astype(dtype)
        m.fill_bitmask(exact)
        m.fill_bitmask(wide)
        assert np.array_equal(exact.view(np.uint32), want) and np.array_equal(wide[:w].view(np.uint32), want)
        assert not wide[w:].any()
        locked = np.full(w, 7, dtype)
        locked.flags.writeable = False
        for bad in (np.full(w - 1, 7, dtype), np.full((1, w), 7, dtype), np.full((2, w), 7, dtype),
                    np.full(w, 7, np.int64), locked):
            with pytest.raises(ValueError):
                m.fill_bitmask(bad)
            assert (bad == 7).all()

def test_rollback_fork_reset():
    vocab = make_vocab([b"a", b"b", b"c"])
    art = artifact_for(repeat(alt(literal(b"ab"), literal(b"c")), 1, None), vocab)
    m = art.matcher(max_rollback=2)
    start_mask = m.mask().copy()
    assert m.commit_tokens([0, 1, 2]) == 3
    f = m.fork()
    m.rollback(2)
    assert m.mask()[1] and not m.mask()[0]  # back after "a": only "b"
    assert f.is_complete() and f.mask()[0]  # the fork kept its own state
    with pytest.raises(GramcError, match="max_rollback=2"):
        m.rollback(1)
    m.reset()
    assert np.array_equal(m.mask(), start_mask)


def test_commit_bytes_all_or_nothing():
    vocab = make_vocab([b"x"])
    m = artifact_for(literal(b"hello"), vocab).matcher()
    assert not m.commit_bytes(b"help")
    assert m.commit_bytes(b"hel") and m.commit_bytes(b"lo") and m.is_complete()
    m.rollback(1)
    assert not m.is_complete()


def test_forced_tokens_jump_forward():
    vocab = make_vocab([b'{"', b'{"na', b"name", b'":', b" ", b'"', b"a", b"me"])
    e = seq(literal(b'{"name": "'), repeat(byte_range(97, 122), 1, None), literal(b'"'))
    m = artifact_for(e, vocab).matcher()
    forced = m.forced_tokens()
    assert b"".join(vocab.tokens[t] for t in forced) == b'{"name": "'
    assert forced[0] == 1  # longest first: '{"na' beats '{"'
    assert m.commit_tokens(forced) == len(forced) and m.forced_tokens() == []


@pytest.mark.parametrize("lazy", [False, True])
def test_special_token_terminal_in_grammar(lazy):
    vocab = Vocab.from_list([b"a", b"<tool>", b"b"], special_ids=[1])
    m = artifact_for(seq(literal(b"a"), Token(1), literal(b"b")), vocab, lazy=lazy).matcher()
    assert m.allowed_tokens().tolist() == [0]
    assert m.commit_token(0) and m.allowed_tokens().tolist() == [1]
    assert m.commit_token(1) and m.allowed_tokens().tolist() == [2]


def test_unbound_artifact_needs_a_vocabulary():
    art = DFAArtifact(build_dfa(Grammar.single(literal(b"a"))), {})
    with pytest.raises(VocabularyError, match="not bound"):
        art.matcher()
    bound = art.bind(make_vocab([b"a"]))
    assert bound.matcher().allowed_tokens().tolist() == [0]


def _reference_walk(delta, byte_class, trie, states, marker):
    """The walk's definition, token by token with no shared prefixes (vectorised over
    tokens): (row, token, end state, length) of the tokens read alive to their end, and the
    (row, sorted position) pairs where a marked state is met alive, at any prefix."""
    blob, offsets, lengths = trie.blob, trie.offsets, trie.lengths
    ends, covered = set(), set()
    for r, s in enumerate(states.tolist()):
        state = np.full(len(lengths), s, dtype=np.int64)
        alive = np.full(len(lengths), s != 0)
        hit = alive & (marker[s] if marker is not None else False)
        for i in range(int(lengths.max())):
            active = np.flatnonzero(alive & (lengths > i))
            state[active] = delta[state[active], byte_class[blob[offsets[active] + i]]]
            alive[active] = state[active] != 0
            if marker is not None:
                hit[active] |= alive[active] & marker[state[active]]
        ends |= {(r, int(trie.sorted_ids[p]), int(state[p]), int(lengths[p])) for p in np.flatnonzero(alive)}
        covered |= {(r, int(p)) for p in np.flatnonzero(hit)}
    return ends, covered


def _walk_sets(w):
    ends = {(int(r), int(t), int(s), int(d)) for r, t, s, d in zip(w.row, w.token, w.next_state, w.depth)}
    covered = {(int(r), p) for r, a, b in zip(w.hit_row, w.hit_lo, w.hit_hi) for p in range(a, b)}
    return ends, covered


def _random_automaton(data, n_max: int = 8):
    n = data.draw(st.integers(2, n_max))
    n_classes = data.draw(st.integers(1, 6))
    byte_class = np.array(data.draw(st.lists(st.integers(0, n_classes - 1), min_size=256, max_size=256)),
                          dtype=np.uint8)
    delta = np.array(data.draw(st.lists(st.lists(st.integers(0, n - 1), min_size=n_classes,
                                                 max_size=n_classes), min_size=n, max_size=n)), dtype=np.int32)
    delta[0] = 0  # the dead state
    for q in data.draw(st.lists(st.integers(1, n - 1), max_size=3)):
        delta[q, data.draw(st.integers(0, n_classes - 1))] = q  # self-loops: string-body-like states
    marker = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n))) if data.draw(st.booleans()) else None
    return delta, byte_class, marker


#: Tokens over a 3-letter alphabet: every token shares prefixes with its neighbours.
DENSE_TOKENS = st.lists(st.binary(min_size=1, max_size=6).map(lambda b: bytes(x % 3 + 97 for x in b)),
                        min_size=1, max_size=40)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_token_walk_equals_the_per_token_definition_on_gpt2(data):
    """The compiled walk (prefixes shared, dead sub-trees skipped) finds exactly the tokens,
    end states and marker hits of running every token on its own, on random automata over
    the real gpt2 vocabulary (tokens of 64 spaces, long shared prefixes)."""
    from gramc.automata.walk import walk_tokens
    from gramc.vocab import load_vocab

    trie = trie_for(load_vocab("gpt2"))
    delta, byte_class, marker = _random_automaton(data)
    delta[1, byte_class[ord("a")]] = 1
    delta[1, byte_class[ord(" ")]] = 1
    states = np.arange(len(delta))
    assert _walk_sets(walk_tokens(delta, byte_class, trie, states, marker)) == \
        _reference_walk(delta, byte_class, trie, states, marker)


@settings(max_examples=200, deadline=None)
@given(st.data(), DENSE_TOKENS)
def test_token_walk_on_dense_prefix_vocabularies(data, tokens):
    """Tiny alphabets make every token share prefixes with its neighbours (and repeat
    bytes under several ids): the skips over dead sub-trees are where a walk goes wrong."""
    from gramc.automata.trie import TokenTrie
    from gramc.automata.walk import walk_tokens

    trie = TokenTrie.from_vocab(Vocab.from_list(tokens))
    delta, byte_class, marker = _random_automaton(data, n_max=5)
    states = np.array(data.draw(st.lists(st.integers(0, len(delta) - 1), min_size=1, max_size=4)))
    assert _walk_sets(walk_tokens(delta, byte_class, trie, states, marker)) == \
        _reference_walk(delta, byte_class, trie, states, marker)


@settings(max_examples=200, deadline=None)
@given(st.data(), DENSE_TOKENS)
def test_walk_of_cut_ranges_through_a_table_built_on_demand(data, tokens):
    """Ranges that cut through sub-trees (the tokens leaving a byte loop) are walked alone:
    each of their tokens ends once, none outside them, also when unbuilt transitions defer
    part of a range to a later round."""
    from gramc.automata.trie import TokenTrie
    from gramc.automata.walk import WalkBuffers, walk

    trie = TokenTrie.from_vocab(Vocab.from_list(tokens))
    n_tok = len(trie.sorted_ids)
    delta, byte_class, _ = _random_automaton(data, n_max=5)
    start = data.draw(st.integers(1, len(delta) - 1))
    cuts = sorted(set(data.draw(st.lists(st.integers(0, n_tok), min_size=2, max_size=8))))
    ranges = [(a, b) for a, b in zip(cuts, cuts[1:]) if data.draw(st.booleans())]
    trans = delta.copy()
    unbuilt = np.array(data.draw(st.lists(st.booleans(), min_size=trans.size, max_size=trans.size)))
    trans.reshape(-1)[unbuilt] = -1
    trans[0] = 0
    buf = WalkBuffers(n_tok)
    for k, (a, b) in enumerate(ranges):
        buf.ranges[k] = (a, b, 0, start)
    todo, pending, n_ranges, ne = buf.ranges, buf.pending, len(ranges), 0
    while n_ranges:
        ne, _, n_pending, n_missing = walk(trans, byte_class.astype(np.int64), trie.blob, trie.offsets,
                                           trie.lengths, trie.lcp, trie.skip, trie.max_len, todo,
                                           n_ranges, np.zeros(0, np.bool_), False, buf.pos, buf.next, ne,
                                           buf.hits, pending, buf.missing)
        for q, c in buf.missing[:n_missing].tolist():
            trans[q, c] = delta[q, c]
        todo, pending, n_ranges = pending, todo, n_pending
    got = sorted(zip(buf.pos[:ne].tolist(), buf.next[:ne].tolist()))
    ends, _ = _reference_walk(delta, byte_class, trie, np.array([start]), None)
    inside = {p for a, b in ranges for p in range(a, b)}
    position = {int(t): p for p, t in enumerate(trie.sorted_ids)}
    assert got == sorted((position[t], s) for _, t, s, _ in ends if position[t] in inside)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sets(st.integers(0, 5), max_size=4), st.booleans()), max_size=30))
def test_distinct_rows_groups_exactly_the_equal_rows(rows):
    from gramc.bitmask import csr_subset, distinct_rows

    ids = [sorted(r) for r, _ in rows]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in ids])]).astype(np.int64)
    flat = np.array([t for r in ids for t in r], dtype=np.int32)
    tags = np.array([t for _, t in rows], dtype=np.int64)
    row_of, reps = distinct_rows(indptr, flat, tags)
    key = [(tuple(r), t) for r, (_, t) in zip(ids, rows)]
    assert len(reps) == len(set(key))
    for i in range(len(rows)):
        assert reps[row_of[i]] <= i and key[reps[row_of[i]]] == key[i]  # the group's first row, equal
        assert all(key[reps[g]] != key[i] for g in range(len(reps)) if g != row_of[i])
    sub_indptr, sub_ids = csr_subset(indptr, flat, reps)
    assert [list(sub_ids[sub_indptr[g]:sub_indptr[g + 1]]) for g in range(len(reps))] == [ids[r] for r in reps]


def test_distinct_rows_never_merges_unequal_rows_whose_hashes_collide():
    from gramc.bitmask import distinct_rows

    indptr = np.array([0, 1, 2, 3], dtype=np.int64)
    flat = np.array([4, 7, 4], dtype=np.int32)
    with mock.patch("gramc.bitmask._id_hashes", lambda n: np.zeros((2, 8), np.uint64)):  # every row hashes alike
        row_of, reps = distinct_rows(indptr, flat, np.zeros(3, np.int64))
    assert len(set(row_of.tolist())) == 3 or (row_of[0] == row_of[2] and row_of[1] != row_of[0])


def test_distinct_rows_with_ids_past_the_hash_table_mix_them_instead():
    """A hostile artifact's ids far above any vocabulary's are not a table of their size
    (gigabytes): they are mixed one by one, and grouped as exactly."""
    from gramc.bitmask import MAX_HASHED_IDS, _id_hashes, distinct_rows

    big = 2**31 - 2
    indptr = np.array([0, 2, 4, 5], dtype=np.int64)
    flat = np.array([7, big, 7, big, MAX_HASHED_IDS], dtype=np.int32)
    before = _id_hashes.cache_info().currsize
    row_of, reps = distinct_rows(indptr, flat, np.zeros(3, np.int64))
    assert row_of.tolist() == [0, 0, 1] and reps.tolist() == [0, 2]
    assert _id_hashes.cache_info().currsize == before


def test_commits_search_a_row_until_a_dense_one_pays_then_index_it():
    """A state's commits search its sorted row until they have cost about what a dense
    next-state row does (runtime.token_table.dense_after), then index one; both give the
    row's next state for every token, DEAD for the others, and no budget means no row."""
    import gramc
    from gramc.automata.tables import DEAD
    from gramc.runtime.token_table import dense_after

    gpt2 = gramc.load_vocab("gpt2")
    art = gramc.compile('"[a-z ]{0,40}"', vocab=gpt2)  # a string state: ~10,000 tokens allowed
    for budget, dense_expected in ((None, True), (0, False)):
        loaded = art if budget is None else gramc.from_bytes(
            art.to_bytes(), gpt2, runtime_limits=gramc.RuntimeLimits(dense_row_bytes=budget))
        table = loaded.token_table
        q = art.dfa.step_bytes(art.dfa.start, b'"ab')
        ids, nxt = table.row(q)
        expected = np.full(gpt2.size, DEAD, np.int64)
        expected[ids] = nxt
        after = dense_after(len(ids))
        assert after > 5  # a large row waits for more commits than a small one
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, gpt2.size, after + 50).tolist()
        for i, t in enumerate(tokens):
            assert table.next_state(q, t) == expected[t], (i, t)
            assert (table._dense[q] is not None) == (dense_expected and i + 1 >= after), i
