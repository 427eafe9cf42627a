"""RuntimeLimits: every runtime cache is bounded, and masks stay exact whatever it evicts.

Each test runs the same walks with caches of 1-4 entries (so nearly every mask evicts, and
the Earley parser's interned sets start a new generation under live matchers) and checks the
masks against the Earley oracle or against the same walks under the default limits, and that
eviction did happen.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gramc
from earley import EarleyOracle
from gramc.compiler.passes import optimize
from gramc.compiler.pda import build_pda
from gramc.errors import GramcError
from gramc.runtime.cache import LRUCache, RowPool
from gramc.runtime.pda_artifact import PDAArtifact
from paths import shared_path
from test_pda import GRAMMARS, make_vocab, oracle_item, oracle_mask, pda_artifact, walk_against_oracle

import soak  # bench/soak.py: bench/ is on pytest's pythonpath (pyproject.toml)

TINY = soak.tiny_limits()
#: Tinier still for small grammars: a new parser generation before nearly every mask.
TINIEST = dataclasses.replace(TINY, interned_sets=2, stack_dfa_states=2)


def _evicted(stats: dict) -> dict[str, int]:
    """Per cache, its evictions or fresh starts so far (those with some)."""
    out = {name: s.get("evictions", 0) + s.get("resets", 0) for name, s in stats.items()}
    return {name: n for name, n in out.items() if n}


# ---------------------------------------------------------------- the cache itself


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5), st.lists(st.tuples(st.booleans(), st.integers(0, 8)), max_size=60))
def test_lru_cache_keeps_the_most_recently_used_entries(bound, ops):
    """Against a list model: gets refresh, puts add, the least recently used goes first."""
    cache, model, evicted = LRUCache(bound, lambda k, v: evicted.append(k)), [], []
    for is_put, key in ops:
        if is_put:
            cache.put(key, -key)
            if key in model:
                model.remove(key)
            model.append(key)
            while len(model) > bound:
                assert evicted.pop(0) == model.pop(0)
        else:
            assert cache.get(key) == (-key if key in model else None)
            if key in model:
                model.remove(key)
                model.append(key)
        assert list(cache) == model and not evicted
    assert cache.stats()["entries"] == len(model) <= bound


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=2, max_size=2), max_size=30))
def test_row_pool_shares_equal_rows_only(rows):
    """Equal rows come back as one array, unequal ones as themselves; the pool holds no row
    alive on its own."""
    pool: RowPool = RowPool()
    held: list[np.ndarray] = []
    for values in rows:
        row = np.array(values, dtype=np.uint32)
        first = next((h for h in held if np.array_equal(h, row)), row)
        assert pool.shared(row) is first
        held.append(first)
    assert len(pool) == len({tuple(r) for r in rows})
    held.clear()
    row = first = None
    assert len(pool) == 0


def test_row_pool_keeps_rows_apart_on_a_hash_collision(monkeypatch):
    """Rows are compared whole: a hash every row shares only loses the sharing."""
    import gramc.runtime.cache as cache

    monkeypatch.setattr(cache, "hash", lambda _: 7, raising=False)
    pool = RowPool()
    a, b = np.array([1, 2], np.uint32), np.array([3, 4], np.uint32)
    assert pool.shared(a) is a and pool.shared(b) is b and pool.shared(np.array([3, 4], np.uint32)) is b


def test_equal_pda_masks_share_one_row():
    """Over a JSON document, configurations with equal masks hand out one array (and the
    masks stay the oracle's: see the tests above)."""
    art = pda_artifact(GRAMMARS["json_like"], make_vocab(), lazy=True)
    m = art.matcher(max_rollback=0)
    seen: dict[bytes, np.ndarray] = {}
    for ch in b'{"a":[1,{"b":true},["ab",2]],"ba":{"a":[true,[1]]}}':
        words = art.token_table.words(m._state)
        assert seen.setdefault(words.tobytes(), words) is words
        assert m.commit_bytes(bytes([ch]))
    assert len(seen) > 3


def test_runtime_limits_refuse_bounds_below_one():
    with pytest.raises(GramcError, match="RuntimeLimits.mask_rows"):
        gramc.RuntimeLimits(mask_rows=0)
    with pytest.raises(GramcError, match="interned_sets"):
        gramc.RuntimeLimits(interned_sets=-1)
    assert gramc.RuntimeLimits(dense_row_bytes=0).dense_row_bytes == 0  # no dense rows at all


# ---------------------------------------------------------------- PDA tables


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("limits", ["tiny", "tiniest"])
def test_pda_masks_equal_the_oracle_with_tiny_limits(name, lazy, limits):
    """Tiny: the memoised rows and masks are evicted; tiniest: the interned sets start a new
    generation (dropping every memo) before nearly every mask."""
    g, vocab = GRAMMARS[name], make_vocab()
    oracle = EarleyOracle(g)
    art = _limited(g, vocab, lazy, TINY if limits == "tiny" else TINIEST)
    rng = np.random.default_rng(len(name) + 7)
    for walk in range(6):
        walk_against_oracle(art.matcher(), oracle.initial(), oracle, vocab, rng, 14, (name, walk))
    evicted = _evicted(art.cache_stats())
    if name == "left_recursive_sum":  # its keys are cyclic: nothing is memoised
        assert art.cache_stats()["mask_rows"]["entries"] == 0
    elif limits == "tiny":
        assert evicted.get("mask_rows") and evicted.get("bool_masks"), evicted
    else:
        assert evicted.get("interned_sets") and evicted.get("stack_dfa_states" if lazy else "interned_sets"), evicted


def _limited(g, vocab, lazy, limits):
    return PDAArtifact.bound(build_pda(optimize(g)), {"format": "ir"}, vocab, lazy=lazy, runtime_limits=limits)


@pytest.mark.parametrize("name", ["json_like", "counted_calls", "parens"])
def test_interleaved_matchers_stay_exact_across_parser_generations(name):
    """Several matchers of one artifact, stepped in turn: each one's masks bring new
    generations of interned ids while the others hold charts keyed in older ones."""
    g, vocab = GRAMMARS[name], make_vocab()
    oracle = EarleyOracle(g)
    art = _limited(g, vocab, True, gramc.RuntimeLimits(interned_sets=1, mask_rows=1, walk_rows=1,
                                                                 stack_dfa_states=1, bool_masks=1))
    rng = np.random.default_rng(3)
    runs = [[art.matcher(), oracle.initial()] for _ in range(4)]
    runs.append([runs[0][0].fork(), runs[0][1]])
    for step in range(12):
        for i, run in enumerate(runs):
            m, chart = run
            expected = oracle_mask(oracle, chart, vocab)
            assert np.array_equal(m.mask(), expected), (name, step, i)
            choices = [t for t in np.flatnonzero(expected) if t not in vocab.eos_ids]
            if choices:
                t = int(rng.choice(choices))
                assert m.commit_token(t)
                run[1] = oracle.feed(chart, oracle_item(vocab, t))
    stats = art.cache_stats()
    assert stats["interned_sets"]["resets"] > 10 and stats["stack_dfa_states"]["resets"] > 10


def test_rolled_back_matcher_masks_after_a_new_generation():
    g, vocab = GRAMMARS["json_like"], make_vocab()
    art = _limited(g, vocab, False, gramc.RuntimeLimits(interned_sets=2))
    reference = pda_artifact(g, vocab)
    text = b'{"ab": [1, {"a": true}], "b": "ab"}'
    m, ref = art.matcher(max_rollback=64), reference.matcher(max_rollback=64)
    for b in text:
        assert m.commit_bytes(bytes([b])) and ref.commit_bytes(bytes([b]))
        assert np.array_equal(m.mask(), ref.mask())
    for _ in range(len(text)):
        m.rollback()
        ref.rollback()
        assert np.array_equal(m.mask(), ref.mask())
    assert art.cache_stats()["interned_sets"]["resets"] > 5


# ---------------------------------------------------------------- DFA tables


def test_lazy_dfa_masks_commits_and_bytes_with_tiny_limits():
    vocab = gramc.load_vocab("gpt2")
    source = r'\{"name":"[a-z ]{1,12}","tags":\[("[a-z]{1,5}"(,"[a-z]{1,5}")*)?\],"id":[0-9]{1,5}\}'
    eager = gramc.compile(source, vocab=vocab)
    tiny = gramc.compile(source, vocab=vocab, lazy=True, runtime_limits=TINY)
    rng = np.random.default_rng(0)
    for _ in range(6):
        m, ref = tiny.matcher(), eager.matcher()
        for _ in range(40):
            expected = ref.mask()
            assert np.array_equal(m.mask(), expected)
            assert np.array_equal(m.forced_tokens(), ref.forced_tokens())
            allowed = [t for t in np.flatnonzero(expected) if t not in vocab.eos_ids]
            if not allowed:
                break
            t = int(rng.choice(allowed))
            assert m.commit_token(t) and ref.commit_token(t)
    evicted = _evicted(tiny.cache_stats())
    assert evicted.get("dfa_rows") and evicted.get("bool_masks") and evicted.get("dfa_bound_rows"), evicted
    assert tiny.to_bytes() == eager.to_bytes()  # every state's rows, though most were evicted


def test_load_applies_runtime_limits(tmp_path):
    vocab = gramc.load_vocab("gpt2")
    path = tmp_path / "x.gmask"
    gramc.compile(r"[a-c]{2,6}", vocab=vocab).save(path)
    art = gramc.load(path, runtime_limits=gramc.RuntimeLimits(bool_masks=3))
    assert art.cache_stats()["bool_masks"]["max_entries"] == 3
    m = art.matcher()
    for width in range(vocab.size, vocab.size + 3):  # one bool mask per width
        assert m.mask(width)[vocab.tokens.index(b"a")]
    assert art.cache_stats()["bool_masks"] == {"entries": 3, "max_entries": 3, "evictions": 0}
    m.mask(vocab.size + 3)
    assert art.cache_stats()["bool_masks"]["evictions"] == 1


def test_vllm_processor_keeps_a_bounded_number_of_grammars(monkeypatch):
    from gramc.integrations import vllm as gv

    monkeypatch.setattr(gv.GramcProcessorCore, "runtime_limits", gramc.RuntimeLimits(compiled_grammars=2))
    monkeypatch.setattr(gv.GramcProcessorCore, "_artifacts", LRUCache(64))
    core = gv.GramcProcessorCore(None, vocab=make_vocab())
    arts = [core.artifact("regex", source) for source in ("a+", "b+", "(ab)+")]
    assert len(core._artifacts) == 2 and core._artifacts.evictions == 1
    assert core.artifact("regex", "(ab)+") is arts[2]
    assert core.artifact("regex", "a+") is not arts[0]  # evicted: compiled again


# ---------------------------------------------------------------- MaskBench schemas


def test_maskbench_schemas_mask_identically_with_tiny_limits():
    """30 dev schemas compiled lazily in one process with tiny limits: at every position of
    up to 3 instances each (valid or not), the packed mask equals the one under the default
    limits; and the caches did evict."""
    corpus = shared_path("corpora", "maskbench.dev.jsonl.gz")
    records = soak.load_schemas(30, corpus)
    vocab = gramc.load_vocab("gpt2")
    tokenize = soak.GreedyTokenizer(vocab)
    eos = sorted(vocab.eos_ids)
    evicted: dict[str, int] = {}
    compared = 0
    for rec in records:
        text = json.dumps(rec["schema"])
        tiny = gramc.compile(text, format="json_schema", vocab=vocab, lazy=True, runtime_limits=TINY)
        default = gramc.compile(text, format="json_schema", vocab=vocab, lazy=True)
        for test in rec["tests"][:3]:
            ids = tokenize(json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False))
            got, want = [], []
            assert soak.serve(tiny, ids, eos, got) == soak.serve(default, ids, eos, want), rec["id"]
            assert got == want, (rec["id"], next(i for i, (a, b) in enumerate(zip(got, want)) if a != b))
            compared += len(got)
        for name, n in _evicted(tiny.cache_stats()).items():
            evicted[name] = evicted.get(name, 0) + n
    assert compared > 500
    for name in ("mask_rows", "walk_rows", "interned_sets", "stack_dfa_states", "node_slices", "dfa_rows"):
        assert evicted.get(name), (name, evicted)
