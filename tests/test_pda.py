"""PDA artifacts against an independent Earley oracle: exact masks on random walks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gramc
from earley import EarleyOracle
from gramc.compiler.ir import (
    EMPTY,
    Grammar,
    Ref,
    Token,
    alt,
    byte_class,
    byte_range,
    literal,
    optional,
    repeat,
    seq,
)
from gramc.compiler.passes import optimize
from gramc.compiler.pda import build_pda
from gramc.runtime.pda_artifact import PDAArtifact


def _json_like() -> Grammar:
    ws = repeat(byte_class(b" "), 0, 1)
    string = seq(literal(b'"'), repeat(byte_class(b"ab"), 0, None), literal(b'"'))
    num = seq(optional(literal(b"-")), repeat(byte_range(0x30, 0x32), 1, None))
    member = seq(string, ws, literal(b":"), ws, Ref("value"))
    obj = seq(literal(b"{"), ws, optional(seq(member, ws, repeat(seq(literal(b","), ws, member, ws), 0, None))), literal(b"}"))
    arr = seq(literal(b"["), ws, optional(seq(Ref("value"), ws, repeat(seq(literal(b","), ws, Ref("value"), ws), 0, None))), literal(b"]"))
    value = alt(string, num, literal(b"true"), Ref("object"), Ref("array"))
    return Grammar({"root": seq(ws, Ref("value"), ws), "value": value, "object": obj, "array": arr}, "root")


GRAMMARS = {
    "parens": Grammar({"root": alt(EMPTY, seq(literal(b"("), Ref("root"), literal(b")"), Ref("root")))}, "root"),
    "left_recursive_sum": Grammar({
        "root": alt(Ref("num"), seq(Ref("root"), literal(b"+"), Ref("num"))),
        "num": repeat(byte_range(0x30, 0x39), 1, 2),
    }, "root"),
    "arith": Grammar({
        "root": Ref("expr"),
        "expr": seq(Ref("term"), repeat(seq(byte_class(b"+-"), Ref("term")), 0, None)),
        "term": seq(Ref("factor"), repeat(seq(byte_class(b"*"), Ref("factor")), 0, None)),
        "factor": alt(repeat(byte_range(0x30, 0x39), 1, None), seq(literal(b"("), Ref("expr"), literal(b")"))),
    }, "root"),
    "json_like": _json_like(),
    "nullable_mutual": Grammar({
        "root": seq(Ref("a"), literal(b"z")),
        "a": alt(EMPTY, seq(literal(b"x"), Ref("b"))),
        "b": alt(EMPTY, seq(literal(b"y"), Ref("a"))),
    }, "root"),
    # A counted repetition longer than the vocabulary's longest token: its far positions
    # share one horizon class (see gramc.runtime.pda_horizon), its last ones do not.
    "counted": Grammar({
        "root": alt(seq(literal(b"["), repeat(alt(literal(b"a"), literal(b"bb")), 0, 12), literal(b"]")),
                    seq(literal(b"("), Ref("root"), literal(b")"))),
    }, "root"),
    # The same with its item a rule (recursive, so kept): a chain of call nodes, as a JSON
    # string with a maxLength is.
    "counted_calls": Grammar({
        "root": alt(seq(literal(b"["), repeat(Ref("item"), 0, 12), literal(b"]")),
                    seq(literal(b"("), Ref("root"), literal(b")"))),
        "item": alt(literal(b"a"), literal(b"bb"), seq(literal(b"<"), Ref("root"), literal(b">"))),
    }, "root"),
    "special_tokens": Grammar({
        "root": seq(Token(0), Ref("body"), Token(1)),
        "body": alt(EMPTY, seq(literal(b"<"), Ref("body"), literal(b">"))),
    }, "root"),
}

BASE_TOKENS = [b"(", b")", b"()", b"((", b"))", b")(", b"1", b"2", b"12", b"+", b"+1", b"*", b"-", b"(1",
               b"1)", b"{", b"}", b'{"', b'"', b'"a', b"a", b"b", b'":', b":", b" ", b", ", b",", b"[", b"]",
               b"[]", b"{}", b"true", b"tr", b"0", b"x", b"y", b"z", b"xy", b"yz", b"<", b">", b"<>", b"><",
               b"]}", b"}]", b"},", b"],", b'"}', b'"]', b"aa", b"ab", b"bba", b"abba", b"a]", b"[a"]


def make_vocab(extra: list[bytes] = ()) -> gramc.Vocab:
    tokens = BASE_TOKENS + [t for t in extra if t not in BASE_TOKENS]
    specials = [b"<s>", b"</s>", b"<eos>"]
    # ids 0 and 1 are the special tokens the grammars name; the last id is EOS.
    return gramc.Vocab.from_list(specials[:2] + tokens + specials[2:], special_ids=[0, 1, len(tokens) + 2],
                                 eos_ids=[len(tokens) + 2])


def pda_artifact(g: Grammar, vocab, lazy=False):
    return PDAArtifact.bound(build_pda(optimize(g)), {"format": "ir"}, vocab, lazy=lazy)


def oracle_mask(oracle: EarleyOracle, chart, vocab) -> np.ndarray:
    mask = np.zeros(vocab.size, dtype=bool)
    for i, tok in enumerate(vocab.tokens):
        if i in vocab.eos_ids:
            mask[i] = oracle.is_complete(chart)
        elif i in vocab.special_ids:
            mask[i] = oracle.is_viable(oracle.step(chart, ("token", i)))
        else:
            mask[i] = oracle.is_viable(oracle.feed(chart, tok))
    return mask


def oracle_item(vocab, t):
    return [("token", t)] if t in vocab.special_ids else list(vocab.tokens[t])


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("lazy", [False, True])
def test_masks_equal_the_earley_oracle_on_random_walks(name, lazy):
    g, vocab = GRAMMARS[name], make_vocab()
    oracle = EarleyOracle(g)
    art = pda_artifact(g, vocab, lazy=lazy)
    rng = np.random.default_rng(len(name))
    for walk in range(12):
        walk_against_oracle(art.matcher(), oracle.initial(), oracle, vocab, rng, 14, (name, walk))


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("strategies", [("stored_configs", "rows"), ("stored_rows", "rows"), ("walk", "rows"), ("rows",)])
def test_each_mask_strategy_of_a_loaded_artifact_equals_the_oracle(name, strategies):
    """A loaded artifact serves masks by an ordered list of strategies; each one alone (the
    walk only where the grammar allows it) gives the oracle's masks."""
    g, vocab = GRAMMARS[name], make_vocab()
    art = gramc.from_bytes(pda_artifact(g, vocab).to_bytes(), vocab=vocab)
    table = art.token_table
    wanted = tuple(s for s in strategies if s in table.strategies)
    table.restrict_strategies(wanted)
    assert table.strategies == wanted
    oracle = EarleyOracle(g)
    rng = np.random.default_rng(len(name) + 7)
    for walk in range(6):
        walk_against_oracle(art.matcher(), oracle.initial(), oracle, vocab, rng, 14, (name, walk, strategies))
    assert table.served[wanted[0]] > 0, table.served


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_an_artifact_storing_some_node_rows_equals_the_oracle(name, monkeypatch):
    """A large grammar's artifact stores the rows of its first nodes only (in reading order);
    the others are walked or bound when needed. The file round-trips, and masks are exact."""
    from gramc.runtime import pda_artifact

    monkeypatch.setattr(pda_artifact, "MAX_STORED_NODES", 3)
    g, vocab = GRAMMARS[name], make_vocab()
    art = pda_artifact.PDAArtifact.bound(build_pda(optimize(g)), {"format": "ir"}, vocab)
    meta, arrays = art.to_arrays()
    row_of = arrays["nodes.row_of"]
    assert np.count_nonzero(row_of >= 0) == min(3, len(row_of)) and art.describe()["stored_node_rows"] <= 3
    data = art.to_bytes()
    back = gramc.from_bytes(data, vocab=vocab)
    assert back.to_bytes() == data
    assert pda_artifact.PDAArtifact.bound(art.pda, art.meta, vocab, lazy=True).to_bytes() == data
    oracle = EarleyOracle(g)
    rng = np.random.default_rng(len(name) + 11)
    for walk in range(6):
        walk_against_oracle(back.matcher(), oracle.initial(), oracle, vocab, rng, 14, (name, walk))


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_nodes_whose_regions_exceed_every_budget_still_give_exact_masks(name, monkeypatch):
    """Bound at run time with an expansion budget too small for some nodes even at their
    own rule (a huge rule of a real schema), those nodes get no row: every token is checked
    on the real parse. No limit surfaces while a mask is filled, and masks stay exact."""
    import functools

    from gramc.automata.pda_bind import LazyExpansion
    from gramc.runtime import pda_tokens

    monkeypatch.setattr(pda_tokens, "LazyExpansion", functools.partial(LazyExpansion, max_states=3))
    g, vocab = GRAMMARS[name], make_vocab()
    art = pda_artifact(g, vocab, lazy=True)
    oracle = EarleyOracle(g)
    rng = np.random.default_rng(len(name) + 13)
    for walk in range(6):
        walk_against_oracle(art.matcher(), oracle.initial(), oracle, vocab, rng, 14, (name, walk))
    table = art.token_table
    bound = [len(table.node_row(n)[1]) for n in range(1, art.pda.n_nodes)]
    assert max(bound) >= vocab.size - len(vocab.special_ids), "no node went without a row"


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_an_artifact_whose_regions_do_not_fit_stores_no_rows(name, monkeypatch):
    """Where the stored nodes' regions pass max_expanded_states even at their own rules, a
    compile does not fail: the artifact stores no node rows, round-trips, and its masks
    (every node bound at run time) equal the oracle's."""
    from gramc.errors import LimitExceededError
    from gramc.runtime import pda_artifact

    def too_large(*args, **kwargs):
        raise LimitExceededError("max_expanded_states", 50_000, 50_000, "stand-in")

    monkeypatch.setattr(pda_artifact, "expand", too_large)
    g, vocab = GRAMMARS[name], make_vocab()
    art = pda_artifact.PDAArtifact.bound(build_pda(optimize(g)), {"format": "ir"}, vocab)
    assert art.describe()["stored_node_rows"] == 0
    back = gramc.from_bytes(art.to_bytes(), vocab=vocab)
    oracle = EarleyOracle(g)
    rng = np.random.default_rng(len(name) + 17)
    for walk in range(4):
        walk_against_oracle(back.matcher(), oracle.initial(), oracle, vocab, rng, 14, (name, walk))


@pytest.mark.parametrize("name", ["json_like", "arith", "counted_calls"])
def test_an_expansion_past_its_configuration_budget_is_made_shallower(name, monkeypatch):
    """The configurations the expanded states hold together are bounded as their number is
    (the work grows with them): past the budget the expansion is retried with fewer calls
    expanded, and the stored rows it gives keep masks exact."""
    from gramc.automata import pda_bind

    table = build_pda(optimize(GRAMMARS[name]))
    depths = []
    real = pda_bind.Expansion

    def recording(*args, **kwargs):
        grown = real(*args, **kwargs)
        depths.append(grown.depth)
        return grown

    monkeypatch.setattr(pda_bind, "Expansion", recording)
    pda_bind.expand(table, 2)
    assert depths == [2]  # fits the default budget
    depths.clear()
    monkeypatch.setattr(pda_bind, "MAX_EXPANDED_CONFIGS", 12)
    g, vocab = GRAMMARS[name], make_vocab()
    art = pda_artifact(g, vocab)
    assert depths[0] == 2 and len(depths) > 1, depths  # retried shallower
    oracle = EarleyOracle(g)
    rng = np.random.default_rng(len(name) + 19)
    for walk in range(4):
        walk_against_oracle(art.matcher(), oracle.initial(), oracle, vocab, rng, 14, (name, walk))


@pytest.mark.parametrize("name", ["json_like", "counted_calls"])
def test_stored_configurations_stop_at_the_mask_budget(name, monkeypatch):
    """The exploration stops at the first configuration whose mask would pass the budget of
    distinct masks: the artifact stores that many, the same bytes every time, and masks stay
    exact (the other configurations are computed)."""
    from gramc.runtime import pda_configs

    g, vocab = GRAMMARS[name], make_vocab()
    every = pda_artifact(g, vocab).token_table.configs
    monkeypatch.setattr(pda_configs, "MAX_STORED_MASKS", 2)
    art = pda_artifact(g, vocab)
    configs = art.token_table.configs
    assert len(configs.row_complement) == 2 and 0 < len(configs) < len(every)
    assert art.to_bytes() == pda_artifact(g, vocab).to_bytes()
    oracle = EarleyOracle(g)
    rng = np.random.default_rng(len(name) + 23)
    for walk in range(4):
        walk_against_oracle(art.matcher(), oracle.initial(), oracle, vocab, rng, 14, (name, walk))


def _continuation_height(enc: list[int], i: int) -> tuple[int, int]:
    """The height of the continuation set encoded at ``enc[i:]`` (docs/format/gmask-v1.md,
    11.12: only the top, 0; else one more than its highest inner continuation), and where
    its encoding ends."""
    highest = -1
    n, i = enc[i], i + 1
    for _ in range(n):
        if enc[i] == 0:  # the top
            i += 1
            continue
        h, i = _continuation_height(enc, i + 1)
        highest = max(highest, h)
    return highest + 1, i


def _config_height(enc: list[int]) -> int:
    """The height of a stored configuration's deepest continuation."""
    out, i = 0, 1
    for _ in range(enc[0]):
        if enc[i] == 0:
            i += 1
            continue
        h, i = _continuation_height(enc, i + 1)
        out = max(out, h)
    return out


def _stored_heights(configs) -> list[int]:
    return [_config_height(configs.enc[a:b].tolist()) for a, b in zip(configs.enc_indptr[:-1], configs.enc_indptr[1:])]


def test_stored_configurations_are_the_shallowest_first():
    """Within its budget the exploration stores shallow stacks before deep ones: beside a long
    word at the top and a nesting reached in one byte, a budget about the word's length holds
    nothing nested more than one call deep, where a breadth-first walk by bytes would spend
    it nesting ever deeper."""
    from gramc.runtime.pda_configs import StoredConfigs

    word = b"abcdefghijklmnop"
    g = Grammar({"root": alt(literal(word), seq(literal(b"("), Ref("root"), literal(b")")))}, "root")
    table = pda_artifact(g, make_vocab()).token_table
    full = _stored_heights(table.configs)
    assert max(full) >= 6  # nesting is explored where the budget allows
    budget = len(word) + 2
    heights = _stored_heights(StoredConfigs.explore(table, max_configs=budget))
    assert len(heights) == budget and max(heights) <= 1, heights


def test_stored_configurations_skip_escapes_and_step_characters_whole():
    """The exploration does not step into a backslash escape, and steps a multi-byte
    character whole: no configuration inside either is stored (the masks there are computed,
    the same as a lazy artifact's), while those after a whole character are."""
    vocab = make_vocab()
    source = json.dumps({"type": "object", "properties": {
        "a": {"type": "array", "items": {"$ref": "#"}}, "b": {"type": "string"}, "名前": {"type": "integer"}}})
    art = gramc.compile(source, format="json_schema", vocab=vocab)
    lazy = gramc.compile(source, format="json_schema", vocab=vocab, lazy=True)
    table = art.token_table
    assert table.configs is not None and len(table.configs)
    name = "名前".encode()
    for prefix, stored in [(b'{"b": "\\', False), (b'{"b": "x\\u00', False), (b'{"a": [{"b": "\\', False),
                           (b'{"' + name[:1], False), (b'{"' + name[:4], False), (b'{"' + name[:3], True),
                           (b'{"' + name + b'": 1', True), (b'{"b": "\xc3\xa9', True), (b'{"b": "\xc3', False)]:
        m, ref = art.matcher(), lazy.matcher()
        assert m.commit_bytes(prefix) and ref.commit_bytes(prefix), prefix
        served = table.served["stored_configs"]
        assert np.array_equal(m.mask(), ref.mask()), prefix
        assert (table.served["stored_configs"] > served) == stored, prefix


def test_strategies_are_a_subsequence_ending_in_rows():
    table = pda_artifact(GRAMMARS["json_like"], make_vocab()).token_table
    every = ("stored_configs", "stored_rows", "walk", "rows")
    assert table.strategies == every
    for bad in [(), ("walk",), ("rows", "walk"), ("rows", "rows"), ("nope", "rows"), ("walk", "stored_rows", "rows"),
                ("stored_rows", "stored_configs", "rows")]:
        with pytest.raises(ValueError, match="ending in 'rows'"):
            table.restrict_strategies(bad)
    assert table.strategies == every
    assert pda_artifact(GRAMMARS["json_like"], make_vocab(), lazy=True).token_table.strategies == ("walk", "rows")
    # A left-recursive grammar has no key at its start (a cyclic continuation): nothing to
    # explore from, no configurations stored, no strategy for them.
    left = pda_artifact(GRAMMARS["left_recursive_sum"], make_vocab()).token_table
    assert left.configs is not None and not len(left.configs) and left.strategies == ("stored_rows", "rows")


def walk_against_oracle(m, chart, oracle: EarleyOracle, vocab, rng, steps: int, label) -> None:
    """From matcher ``m`` and the oracle's ``chart`` (the same input read), commit up to
    ``steps`` random allowed tokens, checking the mask and completeness before each."""
    for step in range(steps):
        expected = oracle_mask(oracle, chart, vocab)
        got = m.mask()
        bad = np.flatnonzero(got != expected)
        assert not len(bad), (label, step, [(int(t), vocab.tokens[t], bool(got[t])) for t in bad[:6]])
        assert m.is_complete() == oracle.is_complete(chart)
        choices = [t for t in np.flatnonzero(expected) if t not in vocab.eos_ids]
        if not choices:
            break
        t = int(rng.choice(choices))
        assert m.commit_token(t)
        chart = oracle.feed(chart, oracle_item(vocab, t))


def test_serialised_artifact_behaves_identically():
    g, vocab = GRAMMARS["json_like"], make_vocab()
    art = pda_artifact(g, vocab)
    data = art.to_bytes()
    back = gramc.from_bytes(data, vocab=vocab)
    assert back.kind == "pda" and back.to_bytes() == data
    assert pda_artifact(g, vocab, lazy=True).to_bytes() == data  # lazy completes to the same tables
    a, b = art.matcher(), back.matcher()
    for t in [vocab.tokens.index(x) for x in [b"[", b"{", b'"a', b'":', b"1", b"}", b"]"]]:
        assert np.array_equal(a.mask(), b.mask())
        assert a.commit_token(t) and b.commit_token(t)
    assert a.is_complete() and b.is_complete()


def test_rollback_fork_and_validate():
    g, vocab = GRAMMARS["parens"], make_vocab()
    ids = {t: vocab.tokens.index(t) for t in [b"(", b")", b"((", b"))"]}
    m = pda_artifact(g, vocab).matcher(max_rollback=4)
    assert m.commit_tokens([ids[b"(("], ids[b")"]]) == 2
    f = m.fork()
    assert not m.is_complete() and m.commit_token(ids[b")"]) and m.is_complete()
    m.rollback(2)
    assert m.mask()[ids[b"))"]] and m.commit_token(ids[b"))"]) and m.is_complete()
    assert not f.is_complete() and f.validate_tokens([ids[b")"], ids[b")"], ids[b"("]]) == 1


def test_forced_tokens_in_a_recursive_grammar():
    vocab = make_vocab([b'{"na', b"me", b'": '])
    name = seq(literal(b'{"name": '), Ref("v"), literal(b"}"))
    g = Grammar({"root": name, "v": alt(literal(b"1"), Ref("root"))}, "root")
    m = pda_artifact(g, vocab).matcher()
    forced = m.forced_tokens()
    assert b"".join(vocab.tokens[t] for t in forced) == b'{"name": '
    assert m.commit_tokens(forced) == len(forced) and m.forced_tokens() == []


def test_eos_and_finish():
    g, vocab = GRAMMARS["parens"], make_vocab()
    eos = vocab.eos_ids[0]
    m = pda_artifact(g, vocab).matcher()
    assert m.mask()[eos]  # the empty string is in the language
    assert m.commit_token(vocab.tokens.index(b"("))
    assert not m.mask()[eos] and not m.commit_token(eos)
    assert m.commit_token(vocab.tokens.index(b")")) and m.commit_token(eos)
    assert m.is_finished() and not m.mask().any()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_strings_agree_with_the_oracle(data):
    name = data.draw(st.sampled_from(sorted(GRAMMARS)))
    g = GRAMMARS[name]
    text = data.draw(st.lists(st.sampled_from(list(b'()1+*-{}[]"ab: ,truexyz<>')), max_size=12).map(bytes))
    art = pda_artifact(g, make_vocab())
    m = art.matcher()
    oracle = EarleyOracle(g)
    ok = m.commit_bytes(text)
    assert ok == oracle.is_viable_prefix(text)
    if ok:
        assert m.is_complete() == oracle.fullmatch(text)


def test_deep_nesting_has_no_depth_limit():
    """Earley needs no stack bound: 5,000 nested brackets parse, mask and complete."""
    g, vocab = GRAMMARS["parens"], make_vocab()
    m = pda_artifact(g, vocab).matcher(max_rollback=0)
    assert m.commit_bytes(b"(" * 5000)
    assert m.mask()[vocab.tokens.index(b"))")] and not m.is_complete()
    assert m.commit_bytes(b")" * 5000) and m.is_complete()
