"""Soft lookahead (gramc.generation.lookahead): validity, accounting, determinism, counts.

Outputs are validated by code that shares nothing with gramc's automata: Python's ``re`` and
the ``regex`` module's partial matching, the Earley test oracle for GBNF, ``json`` +
``jsonschema``. Continuation counts are checked against an enumeration of every token
sequence of a tiny vocabulary. The "model" is random logits keyed by the id sequence.
"""

from __future__ import annotations

import itertools
import json
import re

import jsonschema
import numpy as np
import pytest
import regex

import gramc
from earley import EarleyOracle
from gramc.compiler.frontends.gbnf import parse_gbnf
from gramc.generation import generate
from gramc.generation.lookahead import count_continuations

GPT2_EOS = 50256
WIDTH = 50304
WORDS = r"[a-z]{1,6}( [a-z]{1,6}){0,3}\."
NESTED = 'root ::= "[" ( item ( ", " item )* )? "]"\nitem ::= [0-9]{1,3} | root'
SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
MODES = {"model": dict(lookahead=4, depth=2), "count": dict(lookahead=4, depth=2, lookahead_weighting="count")}


def model(seed: int, eos_bias: float = 4.0):
    """Random logits keyed by the ids; the padding past the vocabulary would win if unmasked."""
    def logits(ids):
        rng = np.random.default_rng(hash((seed, tuple(ids))) & 0xFFFFFFFF)
        x = rng.standard_normal(WIDTH, dtype=np.float32)
        x[GPT2_EOS] += eos_bias
        x[GPT2_EOS + 1:] += 50.0
        return x
    return logits


class Counting:
    """A logits_fn wrapper that records every id sequence it was asked for."""

    def __init__(self, fn):
        self.fn, self.seen = fn, []

    def __call__(self, ids):
        self.seen.append(tuple(ids))
        return self.fn(ids)


@pytest.fixture(scope="module")
def gpt2():
    return gramc.load_vocab("gpt2")


@pytest.fixture(scope="module")
def arts(gpt2):
    return {"regex": gramc.compile(WORDS, vocab=gpt2),
            "gbnf": gramc.compile(NESTED, format="gbnf", vocab=gpt2),
            "schema": gramc.compile(json.dumps(SCHEMA), format="json_schema", vocab=gpt2)}


def _valid(name: str, data: bytes, complete: bool) -> bool:
    """Complete outputs are in the language; cut ones are viable prefixes (JSON: not checked,
    as in test_generate: a cut document has no independent prefix oracle here)."""
    text = data.decode("utf-8", "replace")
    if name == "regex":
        return bool(re.fullmatch(WORDS, text)) if complete else regex.fullmatch(WORDS, text, partial=True) is not None
    if name == "gbnf":
        oracle = EarleyOracle(parse_gbnf(NESTED))
        return oracle.fullmatch(data) if complete else oracle.is_viable_prefix(data)
    if complete:
        jsonschema.validate(json.loads(text), SCHEMA)
    return True


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["regex", "gbnf", "schema"])
def test_outputs_are_valid_prefixes_or_complete(name, mode, arts, gpt2):
    for seed in range(8):
        r = generate(arts[name], model(seed), vocab=gpt2, max_tokens=10, temperature=1.0, seed=seed,
                     **MODES[mode])
        assert all(0 <= t < gpt2.size for t in r.tokens) and len(r.tokens) <= 10
        assert r.data == b"".join(gpt2.tokens[t] for t in r.tokens)
        assert r.stop_reason in ("eos", "max_tokens"), r.stop_reason
        assert r.stop_reason != "eos" or r.complete
        assert _valid(name, r.data, r.complete), (seed, r.text)


@pytest.mark.parametrize("mode", MODES)
def test_with_finish_every_output_completes(mode, arts):
    for name, max_tokens in (("regex", 6), ("gbnf", 6), ("schema", 10)):
        for seed in range(10):
            r = generate(arts[name], model(seed), max_tokens=max_tokens, temperature=1.0, seed=seed,
                         finish=True, **MODES[mode])
            assert r.complete and len(r.tokens) <= max_tokens, (name, seed, r.text)


@pytest.mark.parametrize("depth", [0, 3])
def test_one_candidate_is_plain_greedy(depth, arts):
    for name in ("regex", "gbnf"):
        for seed in range(4):
            plain = generate(arts[name], model(seed), max_tokens=12)
            la = generate(arts[name], model(seed), max_tokens=12, lookahead=1, depth=depth)
            assert la.tokens == plain.tokens and la.stop_reason == plain.stop_reason
            assert la.logprob == pytest.approx(plain.logprob)
            if depth == 0:
                assert la.model_calls == plain.model_calls


def test_model_calls_count_every_rollout_call_once(arts):
    for seed in range(4):
        fn = Counting(model(seed))
        r = generate(arts["gbnf"], fn, max_tokens=10, temperature=1.0, seed=seed, lookahead=3, depth=2)
        assert r.model_calls == len(fn.seen) == len(set(fn.seen))  # no row is computed twice
        plain = generate(arts["gbnf"], model(seed), max_tokens=10, temperature=1.0, seed=seed)
        assert r.model_calls > plain.model_calls
        # at most: one call per step plus K rollouts of d calls each
        assert r.model_calls <= r.sampled_tokens * (1 + 3 * 2)


def test_count_weighting_calls_the_model_once_per_step(arts):
    for seed in range(4):
        fn = Counting(model(seed))
        r = generate(arts["regex"], fn, max_tokens=8, temperature=1.0, seed=seed, **MODES["count"])
        assert r.model_calls == len(fn.seen) == r.sampled_tokens


@pytest.mark.parametrize("mode", MODES)
def test_deterministic_with_a_seed(mode, arts):
    a = generate(arts["schema"], model(3), max_tokens=10, temperature=1.0, seed=7, **MODES[mode])
    b = generate(arts["schema"], model(3), max_tokens=10, temperature=1.0, seed=7, **MODES[mode])
    assert (a.tokens, a.model_calls, a.logprob) == (b.tokens, b.model_calls, b.logprob)


def _tiny():
    return gramc.Vocab.from_list(["a", "b", "ab", "c", "<eos>"], special_ids=[4], eos_ids=[4])


def _brute_force(artifact, prefix: list[int], n: int, vocab_size: int) -> int:
    """Distinct token paths of n tokens after ``prefix`` (cut after an EOS), by enumeration."""
    eos = 4
    paths = set()
    for seq in itertools.product(range(vocab_size), repeat=n):
        path = seq[: seq.index(eos) + 1] if eos in seq else seq
        m = artifact.matcher()
        if m.commit_tokens(prefix + list(path)) == len(prefix) + len(path):
            paths.add(path)
    return len(paths)


@pytest.mark.parametrize("source,fmt", [("(a|b)*c(ab)?", "regex"),
                                        ('root ::= "a" root "b" | "c"', "gbnf")])
def test_count_weights_equal_brute_force(source, fmt):
    vocab = _tiny()
    art = gramc.compile(source, format=fmt, vocab=vocab)
    for prefix in ([], [0], [0, 0], [3], [0, 3]):
        m = art.matcher()
        if m.commit_tokens(prefix) != len(prefix):
            continue
        for n in range(5):
            assert count_continuations(m, n) == _brute_force(art, prefix, n, vocab.size), (prefix, n)


def test_count_weighting_picks_the_token_with_most_continuations():
    """Uniform logits: greedy count-weighted lookahead takes the largest W_depth (lowest id on ties)."""
    vocab = _tiny()
    art = gramc.compile('root ::= "a" root "b" | "c"', format="gbnf", vocab=vocab)
    r = generate(art, lambda ids: np.zeros(5), max_tokens=1, lookahead=5, depth=3,
                 lookahead_weighting="count", jump_forward=False)
    m = art.matcher()
    allowed = m.allowed_tokens().tolist()
    counts = [_brute_force(art, [t], 3, vocab.size) for t in allowed]
    assert r.tokens == [allowed[int(np.argmax(counts))]]


def test_model_lookahead_avoids_a_token_that_cannot_finish_in_time():
    """The model prefers 'a' everywhere; 'a' cannot close within 2 tokens, 'b' can."""
    vocab = gramc.Vocab.from_list(["a", "b", "c", "<eos>"], special_ids=[3], eos_ids=[3])
    art = gramc.compile("a{2,3}c|bc", vocab=vocab)
    fn = lambda ids: np.array([3.0, 0.0, 0.0, 0.0])  # noqa: E731
    plain = generate(art, fn, max_tokens=2)
    la = generate(art, fn, max_tokens=2, lookahead=2, depth=2)
    assert plain.tokens == [0, 0] and not plain.complete
    assert la.tokens == [1, 2] and la.complete


@pytest.mark.parametrize("kw", [dict(lookahead=0), dict(lookahead=-1), dict(lookahead=1.5),
                                dict(lookahead=True), dict(lookahead=2, depth=-1),
                                dict(lookahead=2, depth=1.0), dict(depth=2),
                                dict(lookahead=2, lookahead_weighting="bogus"),
                                dict(lookahead=2, beam_size=2)])
def test_bad_lookahead_arguments_are_refused(kw, arts):
    with pytest.raises(ValueError):
        generate(arts["regex"], model(0), max_tokens=4, **kw)
