"""NFA/DFA construction against the derivative oracle, canonical form, limits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracle
from gramc.automata.tables import DEAD
from gramc.compiler.dfa import (
    _refine_exact,
    _refine_incremental,
    _bfs_numbers_by_level,
    _subsets_in_python,
    build_dfa,
    byte_classes,
    canonical,
    merge_byte_columns,
    minimize,
    subset_table,
)
from gramc.compiler.hopcroft import hopcroft_blocks
from gramc.compiler.ir import (
    EMPTY,
    NOTHING,
    Grammar,
    Ref,
    Token,
    alt,
    any_byte,
    byte_range,
    literal,
    repeat,
    seq,
)
from gramc.errors import LimitExceededError, UnsupportedFeatureError
from gramc.limits import Deadline, Limits
from strategies import exprs, strings


@settings(max_examples=300, deadline=None)
@given(exprs(), st.lists(strings(), max_size=8))
def test_dfa_language_equals_oracle(e, samples):
    dfa = build_dfa(Grammar.single(e))
    for s in samples:
        assert dfa.fullmatch(s) == oracle.fullmatch(e, s), s
        # Not dead <=> viable prefix: the property the token masks rely on.
        assert (dfa.step_bytes(dfa.start, s) != DEAD) == oracle.is_viable_prefix(e, s), s


@settings(max_examples=150, deadline=None)
@given(exprs())
def test_every_live_state_can_accept(e):
    dfa = build_dfa(Grammar.single(e))
    reach = dfa.accept.copy()
    for _ in range(dfa.n_states):
        reach = reach | reach[dfa.delta].any(axis=1)
    assert reach[1:].all() or dfa.start == DEAD
    assert not dfa.accept[DEAD] and not dfa.delta[DEAD].any()


@settings(max_examples=100, deadline=None)
@given(exprs())
def test_dfa_is_minimal_and_canonical(e):
    """Equivalent expressions give identical tables; the table is minimal (Myhill-Nerode)."""
    dfa = build_dfa(Grammar.single(e))
    again = build_dfa(Grammar.single(alt(e, e)))  # same language, different NFA
    assert np.array_equal(dfa.delta, again.delta) and np.array_equal(dfa.accept, again.accept)
    assert np.array_equal(dfa.byte_class, again.byte_class)
    rows = {(bool(dfa.accept[s]), tuple(dfa.delta[s])) for s in range(dfa.n_states)}
    assert len(rows) == dfa.n_states  # no two states with identical rows


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_refinements_equal_plain_moore(data):
    """The worklist refinement and Hopcroft's algorithm find exactly the Myhill-Nerode
    classes of plain Moore rounds, on arbitrary tables (cycles, unreachable states, several
    accepting classes) and on the long chains that counted repetitions make, where only a
    few states move per round."""
    n = data.draw(st.integers(1, 60))
    k = data.draw(st.integers(1, 4))
    delta = np.array(data.draw(st.lists(st.lists(st.integers(0, n - 1), min_size=k, max_size=k),
                                        min_size=n, max_size=n)), dtype=np.int32)
    accept = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    if data.draw(st.booleans()):  # append a chain of m states ending in the first one
        m = data.draw(st.integers(1, 200))
        chain = np.zeros((m, k), dtype=np.int32)
        chain[:, 0] = np.arange(n + 1, n + m + 1)
        chain[-1, 0] = 0
        delta, accept = np.vstack([delta, chain]), np.concatenate([accept, np.zeros(m, dtype=bool)])
    deadline = Deadline(60)
    exact = _refine_exact(delta, accept, deadline)
    assert _same_partition(_refine_incremental(delta, accept, deadline), exact)
    assert _same_partition(hopcroft_blocks(delta, accept), exact)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_breadth_first_numberings_agree(data):
    """The compiled breadth-first numbering and the numpy one, level by level, number every
    reachable state alike (cycles, self-loops, unreachable states, start = dead)."""
    from gramc.compiler.bfs import bfs_numbers

    n = data.draw(st.integers(1, 40))
    k = data.draw(st.integers(1, 4))
    delta = np.array(data.draw(st.lists(st.lists(st.integers(0, n - 1), min_size=k, max_size=k),
                                        min_size=n, max_size=n)), dtype=np.int32)
    start, dead = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    numbers = bfs_numbers(delta, start, dead)
    assert np.array_equal(numbers, _bfs_numbers_by_level(delta, start, dead))
    reached = numbers[numbers >= 0]
    assert sorted(reached.tolist()) == list(range(len(reached)))


def test_empty_language_has_only_the_dead_state():
    dfa = build_dfa(Grammar.single(NOTHING))
    assert dfa.start == DEAD and dfa.n_states == 1 and not dfa.fullmatch(b"")


def test_empty_string_language():
    dfa = build_dfa(Grammar.single(EMPTY))
    assert dfa.fullmatch(b"") and not dfa.fullmatch(b"a")


def test_byte_classes_are_coarsest_partition():
    classes = byte_classes({byte_range(0x30, 0x39).mask, byte_range(0x35, 0x40).mask})
    groups = {}
    for b in range(256):
        groups.setdefault(int(classes[b]), []).append(b)
    spans = sorted((min(v), max(v)) for v in groups.values())
    assert (0x30, 0x34) in spans and (0x35, 0x39) in spans and (0x3A, 0x40) in spans
    assert len(groups) == 4  # the rest of the bytes form one class
    assert int(classes[0]) == 0  # classes are numbered by their smallest byte


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(1, 2**256 - 1), max_size=12))
def test_byte_classes_group_the_bytes_every_mask_treats_alike(masks):
    """Two bytes share a class exactly when each mask holds both or neither; classes are
    numbered by their smallest byte."""
    classes = byte_classes(masks).tolist()
    signature = [tuple(m >> b & 1 for m in sorted(masks)) for b in range(256)]
    for a in range(256):
        for b in range(a + 1, 256, 17):
            assert (classes[a] == classes[b]) == (signature[a] == signature[b])
    firsts = [classes.index(c) for c in range(max(classes) + 1)]
    assert firsts == sorted(firsts) and set(classes) == set(range(max(classes) + 1))


def _calls_and_tokens(children: st.SearchStrategy) -> st.SearchStrategy:
    """Expressions over :func:`strategies.exprs`' leaves, special tokens and calls."""
    return st.recursive(
        st.one_of(exprs(4), st.sampled_from([Token(7), Token(9), Ref("r"), Ref("s")])),
        lambda kids: st.one_of(st.lists(kids, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
                               st.lists(kids, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
                               st.tuples(kids, st.integers(0, 2)).map(lambda t: repeat(t[0], t[1], None))),
        max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(_calls_and_tokens(exprs()))
def test_compiled_and_python_subset_constructions_agree(e):
    """The two subset constructions find the same sets (as many states, as many accepting)
    and so the same minimal DFA, over bytes, special tokens and calls."""
    from gramc.compiler.nfa import build_nfa

    nfa = build_nfa(Grammar({"root": e, "r": EMPTY, "s": EMPTY}, "root"), Limits(), {"r": 0, "s": 1})
    classes = byte_classes(set(nfa.cls) - {0})
    tokens = sorted({t for t in nfa.tok if t >= 0})
    calls = sorted({c for c in nfa.call if c >= 0})
    compiled = subset_table(nfa, classes, tokens, calls, Limits(), Deadline(60))
    python = _subsets_in_python(nfa, classes, tokens, calls, Limits(), Deadline(60))
    assert len(compiled[1]) == len(python[1]) and compiled[1].sum() == python[1].sum()
    assert compiled[0].shape == python[0].shape
    minimal = [canonical(delta, accept, minimize(delta, accept, Deadline(60)), start=1)
               for delta, accept in (compiled, python)]
    assert all(np.array_equal(a, b) for a, b in zip(*minimal))


def test_non_recursive_rules_are_inlined():
    g = Grammar({"root": seq(Ref("d"), literal(b"-"), Ref("d")), "d": byte_range(0x30, 0x39)}, "root")
    dfa = build_dfa(g)
    assert dfa.fullmatch(b"1-2") and not dfa.fullmatch(b"1-")


def test_recursive_rules_are_refused_with_the_cycle():
    g = Grammar({"root": alt(literal(b"x"), seq(literal(b"("), Ref("root"), literal(b")")))}, "root")
    with pytest.raises(UnsupportedFeatureError, match="root -> root"):
        build_dfa(g)


def test_special_token_columns():
    e = seq(literal(b"a"), Token(7), repeat(literal(b"b"), 0, None))
    dfa = build_dfa(Grammar.single(e))
    assert dfa.token_ids.tolist() == [7]
    s = dfa.step_bytes(dfa.start, b"a")
    assert dfa.step_bytes(s, b"b") == DEAD
    s = dfa.step_token(s, 7)
    assert dfa.accept[s] and dfa.step_token(s, 7) == DEAD and dfa.accept[dfa.step_bytes(s, b"bb")]


def test_forced_bytes_follow_the_grammar():
    dfa = build_dfa(Grammar.single(seq(literal(b'{"name": "'), repeat(byte_range(97, 122), 1, None), literal(b'"}'))))
    assert dfa.forced_bytes(dfa.start) == b'{"name": "'
    s = dfa.step_bytes(dfa.start, b'{"name": "x')
    assert dfa.forced_bytes(s) == b""  # a letter or the closing quote: a choice


def test_state_limit_is_enforced():
    e = seq(repeat(alt(literal(b"a"), literal(b"b")), 0, None), literal(b"a"), repeat(any_byte(), 14, 14))
    with pytest.raises(LimitExceededError, match="max_dfa_states"):
        build_dfa(Grammar.single(e), Limits(max_dfa_states=5000))


def test_nfa_limit_is_enforced():
    with pytest.raises(LimitExceededError, match="max_nfa_states"):
        build_dfa(Grammar.single(repeat(literal(b"abc"), 5000, 5000)), Limits(max_nfa_states=10_000))


@settings(max_examples=200, deadline=None)
@given(exprs(), exprs(), st.lists(strings(), max_size=8), st.booleans())
def test_product_is_intersection_or_difference(a, b, samples, both):
    """``combine`` (the level-at-a-time product, then minimise and state elimination back to
    IR) matches exactly the strings of ``a`` that ``b`` does (or does not) match."""
    from gramc.compiler.regular import combine

    try:
        da, db = build_dfa(Grammar.single(a)), build_dfa(Grammar.single(b))
    except UnsupportedFeatureError:  # special tokens: products are over bytes only
        return
    out = combine(da, db, both, Limits())
    for s in samples + [b"", b"a", b"ab"]:
        want = oracle.fullmatch(a, s) and (oracle.fullmatch(b, s) == both)
        assert oracle.fullmatch(out, s) == want, s


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_merged_byte_columns_are_the_distinct_columns_in_first_order(data):
    """Byte classes whose columns are equal become one, numbered by first column; the
    other columns (special tokens, calls) are kept as they are; bytes keep their column."""
    n = data.draw(st.integers(1, 12))
    c = data.draw(st.integers(1, 10))
    extra = data.draw(st.integers(0, 3))
    cell = st.integers(0, 3)
    delta = np.array(data.draw(st.lists(st.lists(cell, min_size=c + extra, max_size=c + extra),
                                        min_size=n, max_size=n)), dtype=np.int32)
    if data.draw(st.booleans()):  # equal columns on purpose
        delta[:, : c] = delta[:, data.draw(st.lists(st.integers(0, c - 1), min_size=c, max_size=c))]
    classes = np.array(data.draw(st.lists(st.integers(0, c - 1), min_size=256, max_size=256)))
    merged, new_classes = merge_byte_columns(delta, classes, c)
    firsts = []
    for j in range(c):
        if not any(np.array_equal(delta[:, j], delta[:, f]) for f in firsts):
            firsts.append(j)
    assert merged.dtype == np.int32 and new_classes.dtype == np.uint8
    assert np.array_equal(merged, np.concatenate([delta[:, firsts], delta[:, c:]], axis=1))
    for b in range(256):  # every byte reads the same column as before
        assert np.array_equal(merged[:, new_classes[b]], delta[:, classes[b]])
