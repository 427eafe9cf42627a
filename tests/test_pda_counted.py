"""Counted repetitions priced by count (:mod:`gramc.runtime.pda_counted`).

Which items qualify is checked on small grammars (an item whose end is ambiguous, or whose
repetition may be followed by a byte that starts it, is refused). The masks of the chains are
compared with the Earley oracle at every position, on random walks and on long tokens that
cross the repetition's end; on gpt2, JSON strings with ``maxLength`` give the same masks as
the stack walk the pricing replaces.
"""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gramc
from earley import EarleyOracle
from gramc.compiler.ir import Grammar, Ref, alt, byte_class, literal, repeat, seq
from gramc.compiler.passes import optimize, outline_shared
from gramc.compiler.pda import build_pda
from gramc.runtime.pda_artifact import PDAArtifact
from gramc.bitmask import unpack_row
from gramc.runtime.pda_counted import CountedItems, CountedSlice
from gramc.schemas.strings import json_string_ir
from test_pda import make_vocab, oracle_mask, walk_against_oracle

# An item of one, two or three bytes ("<" then a byte is read in two steps: a node inside it).
ITEM = alt(literal(b"a"), literal(b"bb"), seq(literal(b"<"), byte_class(b"ab")))

GRAMMARS = {
    # Chains inside the rule that reads what follows them; one with a lower bound.
    "inline": Grammar({
        "root": alt(seq(literal(b"["), repeat(Ref("item"), 0, 12), literal(b"]")),
                    seq(literal(b"{"), repeat(Ref("item"), 3, 9), literal(b"}")),
                    seq(literal(b"("), Ref("root"), literal(b")"))),
        "item": ITEM,
    }, "root"),
    # The repetition a rule of its own, as outline_shared makes a string body's: its chain
    # nodes accept, and the byte after it is read where it returns.
    "outlined": Grammar({
        "root": alt(seq(literal(b"["), Ref("body"), literal(b"]")),
                    seq(literal(b"("), Ref("root"), literal(b")"), Ref("body"), literal(b"."))),
        "body": repeat(Ref("item"), 0, 12),
        "item": ITEM,
    }, "root"),
    # Loops of calls: item* and (item item)* kept as calls return to where they started.
    "looped": Grammar({
        "root": alt(seq(literal(b"["), repeat(Ref("item"), 0, None), literal(b"]")),
                    seq(literal(b"{"), repeat(seq(Ref("item"), Ref("item")), 1, None), literal(b"}")),
                    seq(literal(b"("), Ref("root"), literal(b")"))),
        "item": ITEM,
    }, "root"),
    # The same loop as a rule of its own: the loop node accepts, and what may follow it is
    # read where the rule returns.
    "looped_outlined": Grammar({
        "root": alt(seq(literal(b"["), Ref("body"), literal(b"]")),
                    seq(literal(b"("), Ref("root"), literal(b")"))),
        "body": repeat(Ref("item"), 0, None),
        "item": ITEM,
    }, "root"),
}

# Where the walks start: chain heads, nested, near the end, inside an item.
PREFIXES = {
    "inline": [b"[", b"((", b"{", b"[" + b"a" * 9, b"[" + b"<a" * 10, b"{bb<"],
    "outlined": [b"[", b"((", b"([a])", b"[" + b"a" * 9, b"[" + b"<a" * 10, b"(([])bb<"],
    "looped": [b"[", b"((", b"{", b"[" + b"a" * 9, b"{" + b"<a" * 7, b"{bb<"],
    "looped_outlined": [b"[", b"((", b"[" + b"a" * 9, b"([" + b"<a" * 7, b"[bb<"],
}

REFUSED = {
    # "a" may follow the repetition and start an item: a boundary is not a count.
    "exit_starts_an_item": Grammar({
        "root": seq(literal(b"["), repeat(Ref("item"), 0, 12), alt(literal(b"]"), literal(b"a]"))),
        "item": ITEM,
    }, "root"),
    # "a" ends an item or goes on to "ab": where an item ends is ambiguous.
    "item_end_reads": Grammar({
        "root": seq(literal(b"["), repeat(Ref("item"), 0, 12), literal(b"]")),
        "item": alt(literal(b"a"), literal(b"ab"), literal(b"bb")),
    }, "root"),
}

LONG_TOKENS = [b"aaaa", b"aaaaaaaa", b"<a", b"<b", b"a<", b"bb<a", b"a<b]", b"aa]", b"bb]", b"a}", b"aaa}",
               b"{a", b"bbbb", b"<aaa", b"a]"]


def kept(g: Grammar) -> PDAArtifact:
    """A lazy artifact of ``g`` with its rules kept (as the JSON Schema pipeline keeps a
    string's character when it has a long maxLength)."""
    return PDAArtifact.bound(build_pda(optimize(g, inline=False), collapse=False), {"format": "ir"},
                             make_vocab(LONG_TOKENS),
                             lazy=True)


def counted_items(art: PDAArtifact) -> CountedItems:
    table = art.token_table
    return CountedItems(table.table, table.trie.max_len)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_chains_of_a_deterministic_item_are_priced(name):
    art = kept(GRAMMARS[name])
    items = counted_items(art)
    names = {art.token_table.table.rule_names[r] for r in items.rets}
    assert names == {"item"}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_items_whose_boundaries_are_not_counts_are_refused(name):
    assert counted_items(kept(REFUSED[name])).rets == {}


def test_items_are_not_priced_past_the_counted_walk_bound():
    """A vocabulary with very long tokens would need a counted walk of one row per item node
    and iteration: past MAX_COUNTED_STATES the item is walked the general way."""
    from gramc.runtime.pda_counted import MAX_COUNTED_STATES

    table = kept(GRAMMARS["inline"]).token_table.table
    assert CountedItems(table, 16).rets
    assert CountedItems(table, MAX_COUNTED_STATES).rets == {}


def _check_walks(art: PDAArtifact, g: Grammar, prefixes: list[bytes], seed: int, walks: int = 10):
    """Masks equal the oracle's along each prefix (byte by byte), then along random token
    walks from it."""
    vocab = make_vocab(LONG_TOKENS)
    oracle = EarleyOracle(g)
    rng = np.random.default_rng(seed)
    for prefix in prefixes:
        for walk in range(walks):
            m, chart = art.matcher(), oracle.initial()
            for b in prefix:
                assert np.array_equal(m.mask(), oracle_mask(oracle, chart, vocab)), (prefix, b)
                assert m.commit_bytes(bytes([b]))
                chart = oracle.feed(chart, [b])
            walk_against_oracle(m, chart, oracle, vocab, rng, 16, (prefix, walk))


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_priced_masks_equal_the_oracle(name):
    """At every position of the chains, nested too, with tokens crossing their end: the
    priced slices are used (and the oracle agrees)."""
    g = GRAMMARS[name]
    art = kept(g)
    with mock.patch.object(CountedItems, "slice_for", autospec=True, side_effect=CountedItems.slice_for) as used:
        _check_walks(art, g, PREFIXES[name], seed=len(name))
    assert used.called


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_an_eager_artifact_stores_no_rows_of_chain_nodes_and_masks_exactly(name):
    """Writing an artifact precomputes node rows, but not the chain nodes' (one per
    iteration, priced by count at run time): the file round-trips and its masks equal the
    oracle's along the chains."""
    g = GRAMMARS[name]
    eager = PDAArtifact.bound(kept(g).pda, {"format": "ir"}, make_vocab(LONG_TOKENS))
    chains = counted_items(eager).chain_nodes()
    assert len(chains)
    row_of = eager.token_table.stored.row_of
    assert row_of is not None and (row_of[chains - 1] < 0).all() and (row_of >= 0).any()
    back = gramc.from_bytes(eager.to_bytes(), vocab=make_vocab(LONG_TOKENS))
    _check_walks(back, g, PREFIXES[name], seed=len(name) + 1, walks=4)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_items_still_mask_exactly(name):
    g = REFUSED[name]
    _check_walks(kept(g), g, [b"[", b"[" + b"a" * 10], seed=3, walks=4)


def _json_strings() -> Grammar:
    """An object of two JSON strings with long maxLength, kept as the pipeline keeps it."""
    g = Grammar({"root": seq(literal(b'{"s":'), json_string_ir(max_length=150), literal(b',"t":'),
                             json_string_ir(min_length=3, max_length=140), literal(b"}"))}, "root")
    return outline_shared(optimize(g, inline=False))


def test_json_strings_on_gpt2_mask_as_the_stack_walk_does():
    """Random documents on gpt2 (strings filled to their maxLength, mostly): at every
    position the priced masks equal those of the stack walk alone (its own tests compare it
    with the oracle)."""
    vocab = gramc.load_vocab("gpt2")
    table = build_pda(_json_strings(), collapse=False)
    priced = PDAArtifact.bound(table, {"format": "ir"}, vocab, lazy=True)
    walked = PDAArtifact.bound(table, {"format": "ir"}, vocab, lazy=True)
    assert CountedItems(table, priced.token_table.trie.max_len).rets
    rng = np.random.default_rng(0)
    for doc in range(3):
        a, b = priced.matcher(), walked.matcher()
        for step in range(400):
            got = a.mask()
            with mock.patch.object(CountedItems, "parts", return_value=None):
                expected = b.mask()
            assert np.array_equal(got, expected), (doc, step, np.flatnonzero(got != expected)[:5])
            choices = [t for t in np.flatnonzero(expected) if t not in vocab.eos_ids]
            if not choices:
                break
            quoted = [t for t in choices if b'"' in vocab.tokens[t]]
            t = int(rng.choice(quoted if quoted and rng.random() < 0.03 else choices))
            assert a.commit_token(t) and b.commit_token(t)
        assert a.is_complete()


@given(st.lists(st.integers(0, 9), min_size=1, max_size=60), st.lists(st.integers(0, 12), min_size=1, max_size=12))
@settings(max_examples=60, deadline=None)
def test_count_rows_in_any_order_hold_the_tokens_counting_at_most_that(counts, asked):
    """Rows are made from the nearest smaller cached row: in whatever order the counts are
    asked for, a row holds exactly the tokens whose count is at most it."""
    n = len(counts)
    trie = SimpleNamespace(vocab_size=n + 5, sorted_ids=np.arange(n, dtype=np.int32)[::-1].copy())
    order = np.argsort(counts, kind="stable")
    priced = CountedSlice(trie, order.astype(np.int64), np.array(counts, dtype=np.int16)[order],
                          np.zeros((0, 4), dtype=np.int64), max_u=9)
    for left in asked:
        row = unpack_row(priced.words(left), n + 5)
        expected = np.zeros(n + 5, dtype=bool)
        expected[trie.sorted_ids[[p for p in range(n) if counts[p] <= left]]] = True
        assert np.array_equal(row, expected), (left, sorted(priced._words))
