"""Budget-aware masks (``mask(budget=n)``) against brute force, and ``generate(finish=True)``.

DFA artifacts must equal the exact answer, enumerated with the IR oracle (Brzozowski
derivatives) over the tokens of small vocabularies. PDA artifacts must equal the documented
bound (the fewest single-byte and special tokens that complete, found by a breadth-first
search with the independent Earley recogniser) and so be sound: every token they allow has
such a completion, which the search exhibits. Generation with ``finish=True`` must end
complete within ``max_tokens`` on every one of 200 random-logits runs.
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import gramc
import oracle
from earley import EarleyOracle
from gramc.compiler.counted import build_counted_dfa
from gramc.compiler.dfa import build_dfa
from gramc.bitmask import n_words, unpack_row
from gramc.compiler.frontends.gbnf import parse_gbnf
from gramc.compiler.ir import NOTHING, Grammar, Ref, alt, byte_range, literal, repeat, seq
from gramc.compiler.passes import optimize
from gramc.compiler.pda import build_pda
from gramc.generation import generate
from gramc.runtime.budget import budget_of
from gramc.runtime.counted import CountedArtifact
from gramc.runtime.dfa_artifact import DFAArtifact
from gramc.runtime.pda_artifact import PDAArtifact
from strategies import exprs, small_vocabs

# ------------------------------------------------------------ DFA: exact, by brute force


def dfa_vocab(tokens: list[bytes], eos: bool) -> gramc.Vocab:
    if not eos:
        return gramc.Vocab.from_list(list(tokens))
    return gramc.Vocab.from_list(list(tokens) + [b"<eos>"], special_ids=[len(tokens)], eos_ids=[len(tokens)])


def finisher(vocab: gramc.Vocab):
    """``finishes(d, k)``: can the language ``d`` (a derivative) be completed within ``k``
    tokens of ``vocab``, EOS counted where it has one?"""
    tokens = [t for i, t in enumerate(vocab.tokens) if i not in vocab.special_ids]
    has_eos = bool(vocab.eos_ids)

    @lru_cache(maxsize=None)
    def finishes(d, k: int) -> bool:
        if oracle.nullable(d) and (k >= 1 or not has_eos):
            return True
        return k >= 1 and any((d2 := oracle.derive_bytes(d, t)) is not NOTHING and finishes(d2, k - 1)
                              for t in tokens)

    return finishes


def exact_mask(e, vocab: gramc.Vocab, prefix: bytes, n: int) -> np.ndarray:
    """With ``n`` tokens left (EOS counted): the tokens after which some token sequence of
    the vocabulary completes the output in time, enumerated over derivatives."""
    finishes = finisher(vocab)
    here = oracle.derive_bytes(e, prefix)
    mask = np.zeros(vocab.size, dtype=bool)
    for i, t in enumerate(vocab.tokens):
        if i in vocab.eos_ids:
            mask[i] = n >= 1 and oracle.nullable(here)
        elif i not in vocab.special_ids and n >= 1:
            d = oracle.derive_bytes(here, t)
            mask[i] = d is not NOTHING and finishes(d, n - 1)
    return mask


def fewest(e, vocab: gramc.Vocab, prefix: bytes, limit: int = 8) -> int | None:
    """The fewest tokens (EOS included) that complete ``prefix``, if at most ``limit``."""
    finishes, here = finisher(vocab), oracle.derive_bytes(e, prefix)
    return next((k for k in range(limit + 1) if finishes(here, k)), None)


@settings(max_examples=150, deadline=None)
@given(exprs(), small_vocabs(), st.booleans(), st.booleans(), st.data())
def test_dfa_budget_masks_equal_brute_force(e, tokens, eos, lazy, data):
    vocab = dfa_vocab(tokens, eos)
    art = DFAArtifact.bound(build_dfa(Grammar.single(e)), {"format": "ir"}, vocab, lazy=lazy)
    m = art.matcher()
    prefix = b""
    row = np.zeros(n_words(vocab.size), dtype=np.uint32)
    for _ in range(4):
        for n in range(5):
            expected = exact_mask(e, vocab, prefix, n)
            assert np.array_equal(m.mask(budget=n), expected), (prefix, n)
            m.fill_bitmask(row, budget=n)
            assert np.array_equal(unpack_row(row, vocab.size), expected)
            assert np.array_equal(m.allowed_tokens(budget=n), np.flatnonzero(expected))
        found, expect = m.tokens_to_finish(), fewest(e, vocab, prefix)
        assert found == expect if expect is not None else (found is None or found > 8)
        allowed = np.flatnonzero(m.mask()[: len(tokens)])
        if not len(allowed):
            break
        t = int(data.draw(st.sampled_from(allowed.tolist())))
        assert m.commit_token(t)
        prefix += vocab.tokens[t]


def test_dfa_budget_cut_is_by_distance():
    """"aab" reaches the end in one token, "a" in three ("a", "a", "b"): a budget of 2 (one
    token, then EOS) or 3 keeps only "aab"; 4 both; 0 nothing; 1 nothing until complete."""
    vocab = dfa_vocab([b"a", b"b", b"aab"], eos=True)
    m = gramc.compile("aab", vocab=vocab).matcher()
    assert m.allowed_tokens(budget=0).tolist() == []
    assert m.allowed_tokens(budget=1).tolist() == []
    assert m.allowed_tokens(budget=2).tolist() == [2]
    assert m.allowed_tokens(budget=3).tolist() == [2]
    assert m.allowed_tokens(budget=4).tolist() == [0, 2]
    assert m.tokens_to_finish() == 2
    assert m.commit_token(2)
    assert m.allowed_tokens(budget=1).tolist() == [3]
    assert m.allowed_tokens(budget=0).tolist() == []


def test_without_eos_a_budget_counts_the_tokens_to_an_accepting_state():
    vocab = dfa_vocab([b"a", b"b", b"aab"], eos=False)
    m = gramc.compile("aab", vocab=vocab).matcher()
    assert m.allowed_tokens(budget=1).tolist() == [2]
    assert m.allowed_tokens(budget=2).tolist() == [2]
    assert m.allowed_tokens(budget=3).tolist() == [0, 2]
    assert m.tokens_to_finish() == 1


def test_without_a_budget_masks_are_unchanged():
    vocab = gramc.Vocab.gpt2()
    art = gramc.compile(r"[a-z]{1,6}( [a-z]{1,6}){0,3}\.", vocab=vocab)
    m = art.matcher()
    assert m.mask(budget=None) is m.mask()
    assert np.array_equal(m.mask(budget=100), m.mask())  # a loose budget cuts nothing
    assert not m.mask(budget=2).any() and m.mask().any()  # a word, ".", EOS: 3 at least


def test_budget_rows_are_a_bounded_cache():
    vocab = dfa_vocab([b"a", b"b", b"aab", b"ab"], eos=True)
    art = gramc.compile("(a|b)*aab", vocab=vocab, runtime_limits=gramc.RuntimeLimits(budget_rows=1))
    assert "budget_rows" not in art.cache_stats()
    m = art.matcher()
    cuts = [m.allowed_tokens(budget=n).tolist() for n in (2, 1, 2, 3)]
    assert cuts == [[2], [], [2], [0, 1, 2, 3]]  # "b" then "aab" then EOS: 3
    stats = art.cache_stats()["budget_rows"]
    assert stats["entries"] == 1 and stats["evictions"] >= 2


@pytest.mark.parametrize("bad, error", [(-1, ValueError), (2.0, TypeError), ("3", TypeError), (True, TypeError)])
def test_bad_budgets_are_refused(bad, error):
    vocab = dfa_vocab([b"a", b"b"], eos=True)
    for art in (gramc.compile("ab", vocab=vocab), gramc.compile('root ::= "a" root | "b"', format="gbnf", vocab=vocab)):
        m = art.matcher()
        with pytest.raises(error, match="budget"):
            m.mask(budget=bad)
        with pytest.raises(error, match="budget"):
            m.fill_bitmask(np.zeros(1, dtype=np.uint32), budget=bad)
        with pytest.raises(error, match="budget"):
            m.allowed_tokens(budget=bad)


# ------------------------------------------------------------ counted DFAs: exact

#: Tokens around a counted item: "<" and ">" frame it, ";" ends each iteration, and some
#: tokens span several iterations or leave the repetition.
COUNTED_TOKENS = [b"<", b";", b">", b"a;", b";a", b";>", b"<a", b"a;a;", b"b;<", b"a;b;c;", b";>\x00", b"c;c"]


def counted_pair(body, vocab: gramc.Vocab):
    """The counted artifact of ``body`` (every repetition counted that can be) and its
    unrolled DFA, whose budget masks are exact by the brute-force test above."""
    g = optimize(Grammar.single(body))
    cdfa = build_counted_dfa(g, min_states=1)
    assert cdfa is not None
    counted = CountedArtifact.bound(cdfa, {"format": "ir"}, vocab)
    assert counted.kind == "counted"
    return counted, DFAArtifact.bound(build_dfa(g), {"format": "ir"}, vocab)


@settings(max_examples=60, deadline=None)
@given(exprs(max_leaves=4), small_vocabs(), st.booleans(), st.integers(0, 3), st.integers(2, 4), st.data())
def test_counted_budget_masks_equal_brute_force(item, tokens, eos, lo, hi, data):
    body = seq(literal(b"<"), repeat(seq(item, literal(b";")), min(lo, hi), hi), literal(b">"))
    assume(build_counted_dfa(optimize(Grammar.single(body)), min_states=1) is not None)
    vocab = dfa_vocab(tokens + [t for t in COUNTED_TOKENS if t not in tokens], eos)
    art, _ = counted_pair(body, vocab)
    m = art.matcher()
    prefix = b""
    row = np.zeros(n_words(vocab.size), dtype=np.uint32)
    for _ in range(5):
        for n in range(5):
            expected = exact_mask(body, vocab, prefix, n)
            assert np.array_equal(m.mask(budget=n), expected), (prefix, n)
            m.fill_bitmask(row, budget=n)
            assert np.array_equal(unpack_row(row, vocab.size), expected)
        found, expect = m.tokens_to_finish(), fewest(body, vocab, prefix)
        assert found == expect if expect is not None else (found is None or found > 8)
        allowed = np.flatnonzero(m.mask()[: vocab.size - eos])
        if not len(allowed):
            break
        t = int(data.draw(st.sampled_from(allowed.tolist())))
        assert m.commit_token(t)
        prefix += vocab.tokens[t]


COUNTED_ITEMS = {
    "one_byte": (literal(b"a"), 0, 300),
    "exact_count": (literal(b"a"), 60, 60),
    "two_ways": (alt(literal(b"a"), literal(b"bc")), 40, 200),
    "optional_tail": (seq(alt(literal(b"a"), literal(b"c")), repeat(literal(b"b"), 0, 2)), 50, 120),
}


@pytest.mark.parametrize("name", sorted(COUNTED_ITEMS))
def test_counted_budget_masks_equal_the_unrolled_dfa_on_long_bounds(name):
    """Bounds far longer than the longest token (6 bytes) take the periodic stretches; the
    outer loop makes sites and outer states depend on each other (rounds)."""
    item, lo, hi = COUNTED_ITEMS[name]
    rep = seq(literal(b"<"), repeat(seq(item, literal(b";")), lo, hi), literal(b">"))
    vocab = dfa_vocab(COUNTED_TOKENS + [b"a", b"b", b"c", b"a;a;a;", b"bc;"], eos=True)
    counted, unrolled = counted_pair(repeat(rep, 1, None), vocab)
    assert counted.matcher().tokens_to_finish() is not None
    assert any(layers.periodic for layers in budget_of(counted.token_table)._layers)
    rng = np.random.default_rng(len(name))
    for _ in range(6):
        a, b = counted.matcher(), unrolled.matcher()
        for _ in range(120):
            need = b.tokens_to_finish()
            assert a.tokens_to_finish() == need
            for n in {0, 1, 2, 3, need - 1, need, need + 1, need + 4} - {-1}:
                assert np.array_equal(a.mask(budget=n), b.mask(budget=n)), n
            allowed = np.flatnonzero(b.mask()[: vocab.size - 1])
            if not len(allowed):
                break
            t = int(rng.choice(allowed))
            assert a.commit_token(t) and b.commit_token(t)


def test_counted_distances_on_gpt2_are_the_least_over_the_next_tokens():
    """No unrolled DFA of a 3,000-character minimum binds quickly: the distances are checked
    by their own equation instead, at states inside the string: the fewest tokens to finish
    is one more than the least over the allowed tokens of the fewest after it."""
    vocab = gramc.Vocab.gpt2()
    art = gramc.compile(json.dumps({"type": "string", "minLength": 3000, "maxLength": 5000}),
                        format="json_schema", vocab=vocab)
    assert art.kind == "counted"
    m = art.matcher()
    rng = np.random.default_rng(0)
    for step in range(30):
        if step in (0, 1, 29):
            allowed = np.flatnonzero(m.mask()[:GPT2_EOS])
            after = []
            for t in allowed.tolist():
                f = m.fork()
                assert f.commit_token(t)
                after.append(f.tokens_to_finish())
            assert m.tokens_to_finish() == 1 + min(after)
            need = m.tokens_to_finish()
            cut = np.flatnonzero(m.mask(budget=need)[:GPT2_EOS])
            assert set(cut.tolist()) == {t for t, d in zip(allowed.tolist(), after) if d <= need - 1}
        assert m.commit_token(int(rng.choice(np.flatnonzero(m.mask()[:GPT2_EOS]))))


# ------------------------------------------------------------ PDA: the documented bound

GBNF = {
    "parens": 'root ::= "(" root ")" root | ""',
    "nested": 'root ::= "[" ( item ( "," item )* )? "]"\nitem ::= [0-2] | root',
    "arith": ('root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= factor ("*" factor)*\n'
              'factor ::= [0-2]+ | "(" expr ")"'),
    "nullable_mutual": 'root ::= a "z"\na ::= "" | "x" b\nb ::= "" | "y" a',
}
#: Left recursion, which GBNF refuses, as an IR grammar: its bounds come from the chart.
LEFT_RECURSIVE = Grammar({"root": alt(Ref("num"), seq(Ref("root"), literal(b"+"), Ref("num"))),
                          "num": seq(byte_range(0x30, 0x32), repeat(byte_range(0x30, 0x32), 0, 1))}, "root")
PDA_TOKENS = [b"(", b")", b"()", b"((", b"))", b"[", b"]", b"[]", b"[[", b"]]", b",", b",[", b"0", b"1", b"2",
              b"12", b"+", b"+1", b"-", b"*", b"(1", b"1)", b"x", b"y", b"z", b"xy", b"yz", b"xyz"]


def pda_grammar(name: str) -> Grammar:
    return LEFT_RECURSIVE if name == "left_recursive" else parse_gbnf(GBNF[name])


def pda_artifact(name: str, vocab: gramc.Vocab, lazy: bool = False):
    art = PDAArtifact.bound(build_pda(optimize(pda_grammar(name))), {"format": "ir"}, vocab, lazy=lazy)
    assert art.kind == "pda"
    return art


def pda_vocab(drop: tuple[bytes, ...] = ()) -> gramc.Vocab:
    tokens = [t for t in PDA_TOKENS if t not in drop]
    return gramc.Vocab.from_list(tokens + [b"<eos>"], special_ids=[len(tokens)], eos_ids=[len(tokens)])


def bound_search(orc: EarleyOracle, chart, steps: list[int], limit: int) -> list[int] | None:
    """The shortest byte string over ``steps`` (the single-byte tokens) that completes
    ``chart``, if one of at most ``limit`` bytes exists (breadth first)."""
    frontier = [(chart, [])]
    for _ in range(limit + 1):
        for c, path in frontier:
            if orc.is_complete(c):
                return path
        frontier = [(c2, path + [b]) for c, path in frontier for b in steps
                    if orc.is_viable(c2 := orc.step(c, b))]
    return None


def bound_mask(orc: EarleyOracle, chart, vocab: gramc.Vocab, n: int) -> np.ndarray:
    """The documented PDA budget mask, with a witness checked for every allowed token."""
    steps = sorted(t[0] for i, t in enumerate(vocab.tokens) if len(t) == 1 and i not in vocab.special_ids)
    mask = np.zeros(vocab.size, dtype=bool)
    for i, t in enumerate(vocab.tokens):
        if i in vocab.eos_ids:
            mask[i] = n >= 1 and orc.is_complete(chart)
        elif n >= 2:  # the token, then at least EOS
            after = orc.feed(chart, t)
            if orc.is_viable(after):
                path = bound_search(orc, after, steps, n - 2)
                if path is not None:
                    assert orc.is_complete(orc.feed(after, path))  # the witness: tokens, then EOS
                    mask[i] = True
    return mask


@pytest.mark.parametrize("name", sorted(GBNF) + ["left_recursive"])
@pytest.mark.parametrize("lazy", [False, True])
def test_pda_budget_masks_equal_the_documented_bound(name, lazy):
    vocab = pda_vocab()
    orc = EarleyOracle(pda_grammar(name))
    art = pda_artifact(name, vocab, lazy)
    rng = np.random.default_rng(len(name))
    for _ in range(4):
        m, chart = art.matcher(), orc.initial()
        for _ in range(6):
            for n in range(6):
                assert np.array_equal(m.mask(budget=n), bound_mask(orc, chart, vocab, n)), (name, n)
            allowed = np.flatnonzero(m.mask()[: len(PDA_TOKENS)])
            if not len(allowed):
                break
            t = int(rng.choice(allowed))
            assert m.commit_token(t)
            chart = orc.feed(chart, vocab.tokens[t])


@pytest.mark.parametrize("name", ["parens", "nested", "arith", "nullable_mutual"])
def test_pda_bounds_from_the_stack_dfa_equal_those_from_the_chart(name):
    vocab = pda_vocab()
    art = gramc.compile(GBNF[name], format="gbnf", vocab=vocab)
    other = gramc.compile(GBNF[name], format="gbnf", vocab=vocab)
    budget_of(other.token_table).use_stack = False
    rng = np.random.default_rng(7)
    for _ in range(6):
        a, b = art.matcher(), other.matcher()
        for _ in range(10):
            for n in range(8):
                assert np.array_equal(a.mask(budget=n), b.mask(budget=n)), (name, n)
            assert a.tokens_to_finish() == b.tokens_to_finish()
            allowed = np.flatnonzero(a.mask()[: len(PDA_TOKENS)])
            if not len(allowed):
                break
            t = int(rng.choice(allowed))
            assert a.commit_token(t) and b.commit_token(t)


def test_the_pda_bound_may_refuse_a_token_that_could_finish():
    """"((((" closes in 3 tokens ("))" twice, EOS) but the bound counts single bytes: 5.
    With 4 tokens left, ")" could still finish (")", "))", ")", EOS) but is refused, and with
    3 nothing is allowed: the documented price of soundness."""
    vocab = pda_vocab()
    m = gramc.compile(GBNF["parens"], format="gbnf", vocab=vocab).matcher()
    assert m.commit_bytes(b"((((")
    assert m.tokens_to_finish() == 5  # four ")" and EOS
    assert m.allowed_tokens(budget=5).tolist() == [PDA_TOKENS.index(b")"), PDA_TOKENS.index(b"))")]
    assert m.allowed_tokens(budget=4).tolist() == [PDA_TOKENS.index(b"))")]
    assert m.allowed_tokens(budget=3).tolist() == []


def test_a_pda_without_a_needed_single_byte_token_has_no_bound():
    vocab = pda_vocab(drop=(b")",))
    m = gramc.compile(GBNF["parens"], format="gbnf", vocab=vocab).matcher()
    assert m.commit_bytes(b"(")
    assert m.tokens_to_finish() is None
    assert m.mask(budget=50).sum() == 0
    assert m.mask().sum() > 0


# ------------------------------------------------------------ generate(finish=True)

GPT2_EOS = 50256
WIDTH = 50304
SEEDS = range(200)
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 2}},
    "required": ["name", "age"], "additionalProperties": False,
}
#: A string long enough to be a counter: the artifact is counted.
COUNTED_SCHEMA = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 3000}},
                  "required": ["note"], "additionalProperties": False}
TREE = {"$ref": "#/$defs/node", "$defs": {"node": {
    "type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v"], "additionalProperties": False}}}
#: (source, format, max_tokens): max_tokens fits the shortest completion, not most random ones.
FINISH = {
    "regex": (r"[a-z]{1,6}( [a-z]{1,6}){0,3}\.", "regex", 6),
    "gbnf": ('root ::= "[" ( item ( ", " item )* )? "]"\nitem ::= [0-9]{1,3} | root', "gbnf", 6),
    "json_schema": (json.dumps(SCHEMA), "json_schema", 10),
    "json_schema_recursive": (json.dumps(TREE), "json_schema", 10),
    "regex_counted": (r"[a-z ]{1,3000}\.", "regex", 6),
    "json_schema_counted": (json.dumps(COUNTED_SCHEMA), "json_schema", 10),
}


def model(seed: int):
    """Random logits keyed by the ids, EOS favoured a little, padding past the vocabulary."""
    def logits(ids):
        rng = np.random.default_rng(hash((seed, tuple(ids))) & 0xFFFFFFFF)
        x = rng.standard_normal(WIDTH, dtype=np.float32)
        x[GPT2_EOS] += 4.0
        x[GPT2_EOS + 1:] = -np.inf
        return x
    return logits


@pytest.fixture(scope="module")
def finish_artifacts():
    vocab = gramc.Vocab.gpt2()
    return {name: gramc.compile(src, format=fmt, vocab=vocab) for name, (src, fmt, _) in FINISH.items()}


@pytest.mark.parametrize("name", sorted(FINISH))
def test_finish_ends_every_generation_complete_within_max_tokens(name, finish_artifacts):
    art = finish_artifacts[name]
    assert (art.kind == "counted") == name.endswith("_counted")
    max_tokens = FINISH[name][2]
    assert art.matcher().tokens_to_finish() <= max_tokens + 1  # the shortest completion fits
    for seed in SEEDS:
        r = generate(art, model(seed), max_tokens=max_tokens, temperature=1.0, seed=seed, finish=True)
        assert r.complete and len(r.tokens) <= max_tokens, (seed, r.text, r.stop_reason)


@pytest.mark.parametrize("name", ["regex", "gbnf", "regex_counted", "json_schema_counted"])
def test_without_finish_the_same_runs_are_cut(name, finish_artifacts):
    art = finish_artifacts[name]
    cut = sum(not generate(art, model(seed), max_tokens=FINISH[name][2], temperature=1.0, seed=seed).complete
              for seed in SEEDS)
    assert cut > 0


def test_finish_with_beam_search_and_jump_forward():
    vocab = gramc.Vocab.gpt2()
    art = gramc.compile(r'\{"name": "[a-z]{1,12}", "age": [0-9]{1,3}\}', vocab=vocab)
    need = art.matcher().tokens_to_finish()
    for seed in range(10):
        for kw in (dict(beam_size=3), dict(temperature=1.0, seed=seed)):
            r = generate(art, model(seed), max_tokens=need - 1, finish=True, **kw)
            assert r.complete and len(r.tokens) <= need - 1, (seed, kw, r.text)


def test_finish_where_no_completion_fits_generates_as_without():
    vocab = gramc.Vocab.gpt2()
    art = gramc.compile(r"[a-z]{3}\.[a-z]{3}\.[a-z]{3}", vocab=vocab)
    a = generate(art, model(1), max_tokens=1, finish=True, temperature=1.0, seed=1)
    b = generate(art, model(1), max_tokens=1, temperature=1.0, seed=1)
    assert a.tokens == b.tokens and not a.complete
