"""Counted repetitions in regular grammars (:mod:`gramc.compiler.counted`,
:mod:`gramc.automata.counted`, :mod:`gramc.runtime.counted`).

The oracle is the unrolled DFA of the same grammar (what the compiler built before counters,
and still builds for small repetitions): at every position of random walks, a counted artifact
must give its masks, completeness, forced tokens and commits, on random small grammars and
vocabularies and on gpt2. Long bounds are checked at their boundaries against a byte-level
oracle (``.{1,100000}``) or against the unrolled DFA of a shorter bound with as many
characters left (a JSON string's residual language depends only on what is left). Files are
read back exactly, and corrupt ones are refused.
"""

from __future__ import annotations

import codecs
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gramc
from gramc.automata.tables import DEAD
from gramc.compiler.counted import build_counted_dfa
from gramc.compiler.dfa import build_dfa
from gramc.compiler.ir import Grammar, literal, repeat, seq
from gramc.compiler.passes import optimize
from gramc.compiler.pipeline import lower
from gramc.errors import ArtifactFormatError
from gramc.formats import container
from gramc.runtime.dfa_artifact import DFAArtifact as Artifact
from gramc.runtime.reader import from_bytes
from gramc.runtime.batch import BatchMatcher
from gramc.bitmask import n_words
from gramc.runtime.counted import CountedArtifact
from strategies import ALPHABET, exprs

def _vocab_gpt2():
    from gramc.vocab import load_vocab

    return load_vocab("gpt2")


def counted_and_unrolled(grammar: Grammar, vocab, lazy_unrolled: bool = False):
    """The counted artifact (every repetition counted that can be) and the unrolled one."""
    g = optimize(grammar)
    cdfa = build_counted_dfa(g, min_states=1)
    assert cdfa is not None, "expected a countable grammar"
    counted = CountedArtifact.bound(cdfa, {"format": "ir"}, vocab)
    unrolled = Artifact.bound(build_dfa(g), {"format": "ir"}, vocab, lazy=lazy_unrolled)
    return counted, unrolled


def same_state(a, b, vocab) -> None:
    """The two matchers allow the same tokens, agree on completeness and forced tokens."""
    ma, mb = a.mask(), b.mask()
    if not np.array_equal(ma, mb):
        bad = np.flatnonzero(ma != mb)[:8].tolist()
        raise AssertionError(f"masks differ at {[(t, vocab.tokens[t], bool(ma[t])) for t in bad]}")
    words_a = np.zeros(n_words(vocab.size), dtype=np.uint32)
    a.fill_bitmask(words_a)
    words_b = np.zeros_like(words_a)
    b.fill_bitmask(words_b)
    assert np.array_equal(words_a, words_b)
    assert a.is_complete() == b.is_complete()
    assert a.is_finished() == b.is_finished()
    assert a.forced_tokens() == b.forced_tokens()


def random_walks(counted, unrolled, vocab, rng: random.Random, walks: int, steps: int) -> None:
    """Walk both artifacts with the same random allowed tokens (and now and then raw bytes,
    a rollback, a fork, a refused token), comparing them at every position."""
    for _ in range(walks):
        a, b = counted.matcher(), unrolled.matcher()
        for _ in range(steps):
            same_state(a, b, vocab)
            allowed = np.flatnonzero(b.mask())
            if not len(allowed):
                break
            roll = rng.random()
            if roll < 0.1:
                refused = np.flatnonzero(~b.mask())
                if len(refused):
                    t = int(rng.choice(refused.tolist()))
                    assert not a.commit_token(t) and not b.commit_token(t)
                continue
            if roll < 0.2:
                tokens = [int(rng.choice(allowed.tolist()))]
                assert a.validate_tokens(tokens) == b.validate_tokens(tokens) == 1
                fork = a.fork()
                assert fork.commit_token(tokens[0])
                same_state(a, b, vocab)  # the fork moved, not the original
            if roll < 0.3:
                data = bytes(rng.choice(ALPHABET + b"<;>") for _ in range(rng.randint(1, 3)))
                assert a.commit_bytes(data) == b.commit_bytes(data)
                continue
            t = int(rng.choice(allowed.tolist()))
            assert a.commit_token(t) and b.commit_token(t)
            if rng.random() < 0.1:
                a.rollback()
                b.rollback()
            if b.is_finished():
                break
        same_state(a, b, vocab)


# ---------------------------------------------------------------- random grammars


SMALL_TOKENS = [bytes([c]) for c in ALPHABET + b"<;>"] + [b"ab", b"a;", b";a", b"b;<", b";>", b"aa;", b"c;c",
                                                         b"<a", b"a;b;", b";;", b"\x00;", b";\xff>", b"abc;a"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item=exprs(max_leaves=5), m=st.integers(0, 30), n=st.integers(2, 30), seed=st.integers(0, 2**16))
def test_random_items_mask_like_the_unrolled_dfa(item, m, n, seed):
    # An item ending in ";" (read nowhere else) is counted; "<" and ">" around it are not in
    # any item, so the repetition reads unambiguously.
    m = min(m, n)
    body = seq(literal(b"<"), repeat(seq(item, literal(b";")), m, n), literal(b">"))
    vocab = gramc.Vocab.from_list(SMALL_TOKENS + [b"<eos>"], special_ids=[len(SMALL_TOKENS)],
                                  eos_ids=[len(SMALL_TOKENS)])
    g = optimize(Grammar.single(body))
    assume(build_counted_dfa(g, min_states=1) is not None)
    counted, unrolled = counted_and_unrolled(Grammar.single(body), vocab)
    assert counted.kind == "counted"
    random_walks(counted, unrolled, vocab, random.Random(seed), walks=3, steps=40)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item=exprs(max_leaves=4), m=st.integers(0, 30), n=st.integers(2, 30), seed=st.integers(0, 2**16))
def test_random_items_on_gpt2_mask_like_the_unrolled_dfa(item, m, n, seed):
    m = min(m, n)
    body = seq(literal(b"<"), repeat(seq(item, literal(b";")), m, n), literal(b">"))
    assume(build_counted_dfa(optimize(Grammar.single(body)), min_states=1) is not None)
    vocab = _vocab_gpt2()
    counted, unrolled = counted_and_unrolled(Grammar.single(body), vocab)
    random_walks(counted, unrolled, vocab, random.Random(seed), walks=2, steps=30)


def test_ambiguous_repetitions_are_unrolled():
    # "a" may follow the repetition and start an iteration; the item "a" | "ab" reads on from
    # an accepting state; two counters may start at one place: none is counted.
    for body in (seq(repeat(literal(b"a"), 0, 3000), literal(b"a")),
                 repeat(seq(literal(b"a"), repeat(literal(b"b"), 0, 1)), 0, 3000),
                 seq(repeat(literal(b"x;"), 0, 3000), repeat(literal(b"y;"), 0, 3000))):
        assert build_counted_dfa(optimize(Grammar.single(body))) is None


def test_small_repetitions_stay_a_plain_dfa():
    art = gramc.compile("[a-z]{1,20}", vocab=gramc.Vocab.from_list([b"a", b"bc"]))
    assert art.kind == "dfa"
    art = gramc.compile("[a-z]{1,2000}", vocab=gramc.Vocab.from_list([b"a", b"bc"]))
    assert art.kind == "counted"


# ---------------------------------------------------------------- gpt2


GPT2_SOURCES = [
    (".{1,30}", "regex"),
    (r"(\w{1,4} ){1,9}", "regex"),
    ('{"type": "string", "minLength": 3, "maxLength": 20}', "json_schema"),
    ('{"type": "object", "properties": {"a": {"type": "string", "maxLength": 12}, '
     '"b": {"type": "string", "maxLength": 5}}, "required": ["a", "b"], "additionalProperties": false}',
     "json_schema"),
]


@pytest.mark.parametrize("source,fmt", GPT2_SOURCES)
def test_gpt2_masks_like_the_unrolled_dfa(source, fmt):
    vocab = _vocab_gpt2()
    counted, unrolled = counted_and_unrolled(lower(source, fmt), vocab)
    random_walks(counted, unrolled, vocab, random.Random(7), walks=12, steps=40)


# ---------------------------------------------------------------- boundaries

MULTI = ["a", "é", "€", "😀"]  # one to four UTF-8 bytes


def _text(k: int, rng: random.Random) -> str:
    return "".join(rng.choice(MULTI) for _ in range(k))


def _boundaries(n: int) -> list[int]:
    return [0, 1, 2, n - 2, n - 1, n]


@pytest.mark.parametrize("source,fmt,prefix,suffix", [
    (".{1,300}", "regex", "", ""),
    ('{"type": "string", "maxLength": 300}', "json_schema", '"', '"'),
])
def test_boundaries_against_the_unrolled_dfa(source, fmt, prefix, suffix):
    vocab = _vocab_gpt2()
    counted, unrolled = counted_and_unrolled(lower(source, fmt), vocab, lazy_unrolled=True)
    rng = random.Random(3)
    for k in _boundaries(300):
        text = prefix + _text(k, rng)
        a, b = counted.matcher(), unrolled.matcher()
        assert a.commit_bytes(text.encode()) and b.commit_bytes(text.encode())
        same_state(a, b, vocab)
        more = _text(1, rng).encode()
        assert a.commit_bytes(more) == b.commit_bytes(more) == (k < 300)
        same_state(a, b, vocab)
        # Tokens crossing the bound: a 3-character token from two characters before it.
        for token_text in ("abc", "aé€", suffix + " x"):
            ids = [t for t, data in enumerate(vocab.tokens) if data == token_text.encode()]
            for t in ids:
                assert a.validate_tokens([t]) == b.validate_tokens([t])


def test_words_boundaries_against_the_unrolled_dfa():
    vocab = _vocab_gpt2()
    counted, unrolled = counted_and_unrolled(lower(r"(\w{1,40} ){1,50}", "regex"), vocab, lazy_unrolled=True)
    rng = random.Random(5)
    for words in (0, 1, 49, 50):
        for length in (1, 39, 40):
            text = " ".join("x" * rng.randint(1, 40) for _ in range(words)) + (" " if words else "")
            text += "y" * length
            a, b = counted.matcher(), unrolled.matcher()
            assert a.commit_bytes(text.encode()) == b.commit_bytes(text.encode())
            if b.commit_bytes(b""):
                same_state(a, b, vocab)
                for tail in (b" ", b"z", b" z"):
                    assert a.validate_tokens([vocab.tokens.index(tail)] if tail in vocab.tokens else []) == \
                        b.validate_tokens([vocab.tokens.index(tail)] if tail in vocab.tokens else [])


def _dot_oracle_mask(vocab, count: int, n: int) -> np.ndarray:
    """The tokens allowed after ``count`` whole characters of ``.{1,n}`` (unicode dialect: any
    code point but the line terminators), by decoding each token's bytes."""
    mask = np.zeros(vocab.size, dtype=bool)
    for t, data in enumerate(vocab.tokens):
        if t in vocab.special_ids or not data:
            continue
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            chars = decoder.decode(data, final=False)
        except UnicodeDecodeError:
            continue
        pending = 1 if decoder.getstate()[0] else 0
        if any(c in "\n\r\u2028\u2029" for c in chars):
            continue
        mask[t] = count + len(chars) + pending <= n
    if count >= 1:
        mask[list(vocab.eos_ids)] = True
    return mask


def test_dot_100000_against_a_byte_oracle():
    vocab = _vocab_gpt2()
    n = 100_000
    art = gramc.compile(".{1,100000}", vocab=vocab)
    assert art.kind == "counted"
    rng = random.Random(11)
    for k in _boundaries(n):
        m = art.matcher()
        assert m.commit_bytes(_text(k, rng).encode())
        assert np.array_equal(m.mask(), _dot_oracle_mask(vocab, k, n)), k
        assert m.commit_bytes(b"a") == (k < n)


def test_json_10000_equals_a_short_bound_with_as_much_left():
    # After '"' and k characters the residual language is that of n - k characters more: the
    # unrolled DFA of maxLength 300 at 300 - (n - k) characters is the oracle. (10,000 is
    # schemas.strings.MAX_COUNTED_LENGTH, above which maxLength is still over-approximated.)
    vocab = _vocab_gpt2()
    art = gramc.compile('{"type": "string", "maxLength": 10000}', "json_schema", vocab=vocab)
    assert art.kind == "counted"
    short = Artifact.bound(build_dfa(optimize(lower('{"type": "string", "maxLength": 300}', "json_schema"))),
                           {}, vocab, lazy=True)
    rng = random.Random(13)
    for left in (300, 299, 2, 1, 0):
        a, b = art.matcher(), short.matcher()
        assert a.commit_bytes(('"' + _text(10_000 - left, rng)).encode())
        assert b.commit_bytes(('"' + _text(300 - left, rng)).encode())
        same_state(a, b, vocab)


# ---------------------------------------------------------------- files


def _small_counted():
    vocab = gramc.Vocab.from_list([b"a", b"b", b";", b"a;", b"<", b">", b";>", b"<a", b"ab;a", b"<eos>"],
                                  special_ids=[9], eos_ids=[9])
    return gramc.compile("<(ab?;){2,3000}>", vocab=vocab), vocab


def test_round_trip():
    art, vocab = _small_counted()
    assert art.kind == "counted"
    data = art.to_bytes()
    assert container.unpack(data)[0]["artifact_version"] == 5  # the vocabulary by fingerprint
    waiting = from_bytes(data)  # a vocabulary this process does not know
    assert waiting.kind == "counted" and waiting.awaits_vocab
    back = waiting.bind(vocab)
    assert back.to_bytes() == data
    assert from_bytes(data, vocab, verify=True).to_bytes() == data
    unbound = gramc.compile("<(ab?;){2,3000}>")
    assert from_bytes(unbound.to_bytes()).bind(vocab).to_bytes() == data
    lazy = gramc.compile("<(ab?;){2,3000}>", vocab=vocab, lazy=True)
    assert lazy.to_bytes() == data
    a, b = art.matcher(), back.matcher()
    for text in (b"<", b"<a;", b"<ab;a;", b"<" + b"a;" * 2999, b"<" + b"a;" * 3000):
        a.reset(), b.reset()
        assert a.commit_bytes(text) and b.commit_bytes(text)
        assert np.array_equal(a.mask(), b.mask()) and a.is_complete() == b.is_complete()
    assert not a.commit_bytes(b"a;")  # past 3000


def _corrupt(data: bytes, edit) -> bytes:
    meta, arrays = container.unpack(data)
    arrays = {k: v.copy() for k, v in arrays.items()}
    edit(meta, arrays)
    return container.pack(meta, arrays)


def _set(name, index, value):
    def edit(meta, arrays):
        arrays[name][index] = value
    return edit


def _meta(path, value):
    def edit(meta, arrays):
        node = meta
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit", [
    _set("counted.call_next", 1, 99),
    _set("counted.call_kind", 1, 3),
    _set("counted.call_kind", 3, 0),  # a call without a return state
    _set("counted.item_delta", (1, 0), 77),
    _set("counted.item_offset", 1, 1),
    _set("counted.item_accept", 1, True),  # the item may be empty
    _set("counted.item_byte_class", (0, 0), 40),
    _set("tokens.next", 0, 2**31 - 1),
    _meta(["counted", "bounds"], [[5, 3]]),
    _meta(["counted", "bounds"], [[0, 3]]),
    _meta(["counted", "item_starts"], [9]),
    _meta(["artifact_version"], 1),
    _meta(["counted", "start"], 50),
])
def test_corrupt_counted_artifacts_are_refused(edit):
    art, _ = _small_counted()
    with pytest.raises(ArtifactFormatError):
        from_bytes(_corrupt(art.to_bytes(), edit))


def test_an_item_that_reads_on_when_complete_is_refused():
    art, _ = _small_counted()

    def edit(meta, arrays):
        offset = arrays["counted.item_offset"]
        delta, accept = arrays["counted.item_delta"], arrays["counted.item_accept"]
        final = int(np.flatnonzero(accept[offset[0]:offset[1]])[0])
        delta[final, :] = np.where(delta[final] == DEAD, final, delta[final])  # loops on itself

    with pytest.raises(ArtifactFormatError):
        from_bytes(_corrupt(art.to_bytes(), edit))


def test_batch_matcher_runs_counted_artifacts_per_request():
    art, vocab = _small_counted()
    batch = BatchMatcher([art], capacity=2)
    batch.add("x")
    m = art.matcher()
    rng = random.Random(1)
    for _ in range(30):
        words = batch.fill_masks()
        expect = np.zeros_like(words[0])
        m.fill_bitmask(expect)
        assert np.array_equal(words[0], expect)
        allowed = np.flatnonzero(m.mask())
        if not len(allowed):
            break
        t = int(rng.choice(allowed.tolist()))
        batch.commit(np.array([t]), ["x"])
        m.commit_token(t)


def test_check_reports_like_the_unrolled_dfa():
    from gramc.runtime.check import check_artifact, check_bytes

    g = optimize(Grammar.single(seq(literal(b"<"), repeat(seq(literal(b"a"), repeat(literal(b"b"), 0, 1),
                                                             literal(b";")), 2, 9), literal(b">"))))
    counted = CountedArtifact(build_counted_dfa(g, min_states=1), {})
    unrolled = build_dfa(g)
    rng = random.Random(2)
    for _ in range(300):
        data = b"<" + bytes(rng.choice(b"ab;>") for _ in range(rng.randint(0, 30)))
        assert check_artifact(counted, data) == check_bytes(unrolled, data), data


def test_text_form_names_the_counters():
    from gramc.automata.text import format_automaton

    art, _ = _small_counted()
    text = format_automaton(art)
    assert "counter0() -> " in text and "counter0 {2,3000} of:" in text
