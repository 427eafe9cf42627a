"""The reference generation loop (gramc.generation): hundreds of constrained generations.

Every output is validated by something that shares no code with gramc's automata: Python's
``re`` (regexes; the ``regex`` module's partial matching for outputs cut by max_tokens), the
test Earley recogniser over the GBNF IR (tests/earley.py), or ``json.loads`` + ``jsonschema``.
The "model" is a deterministic function of the id sequence returning random logits wider than
the vocabulary, so every sampler sees padding it must never pick.
"""

from __future__ import annotations

import itertools
import json
import math
import re

import jsonschema
import numpy as np
import pytest
import regex

import gramc
from earley import EarleyOracle
from gramc.errors import VocabularyError
from gramc.generation import STOP_REASONS, Sampler, allowed_text, format_allowed, generate

GPT2_EOS = 50256
WIDTH = 50304  # GPT-2 checkpoints pad their output layer to a multiple of 64

REGEXES = {
    "words": r"[a-z]{1,6}( [a-z]{1,6}){0,3}\.",
    "date": r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    "email": r"[a-z0-9._]{1,10}@[a-z]{2,8}\.(com|org|net)",
    "record": r'\{"name": "[A-Za-z ]{1,12}", "age": [0-9]{1,3}\}',
    "unicode": r"(héllo|wörld|日本)( (héllo|wörld|日本)){0,2}",
}
GBNF = {
    "nested": 'root ::= "[" ( item ( ", " item )* )? "]"\nitem ::= [0-9]{1,3} | root',
    "arith": (
        'root ::= expr\n'
        'expr ::= term (("+" | "-") term)*\n'
        'term ::= factor (("*" | "/") factor)*\n'
        'factor ::= [0-9]+ | "(" ws expr ws ")"\n'
        'ws ::= " "?'
    ),
}
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 2},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
SAMPLERS = {
    "greedy": dict(),
    "temp1": dict(temperature=1.0),
    "topk": dict(temperature=0.7, top_k=10),
    "topp": dict(temperature=1.0, top_p=0.9),
    "mixed": dict(temperature=1.5, top_k=50, top_p=0.95),
    "beam": dict(beam_size=3, length_penalty=1.0),
}
SEEDS = range(6)


def model(seed: int, width: int = WIDTH, eos_bias: float = 4.0, pad_bias: float = 50.0):
    """A deterministic stand-in for a language model: random logits keyed by the ids.

    The padding columns past the vocabulary get a huge score, so a loop that failed to mask
    them would pick them at once.
    """
    def logits(ids):
        rng = np.random.default_rng(hash((seed, tuple(ids))) & 0xFFFFFFFF)
        x = rng.normal(size=width).astype(np.float32)
        if width > GPT2_EOS:
            x[GPT2_EOS] += eos_bias
        x[50257:] += pad_bias
        return x
    return logits


@pytest.fixture(scope="module")
def gpt2():
    return gramc.load_vocab("gpt2")


@pytest.fixture(scope="module")
def artifacts(gpt2):
    out = {name: gramc.compile(src, vocab=gpt2, lazy=True) for name, src in REGEXES.items()}
    out.update({name: gramc.compile(src, format="gbnf", vocab=gpt2) for name, src in GBNF.items()})
    return out


def _results(r):
    return r.beams or [r]


def _check_tokens(r, vocab):
    assert all(0 <= t < vocab.size and t not in vocab.special_ids for t in r.tokens)
    assert r.data == b"".join(vocab.tokens[t] for t in r.tokens)
    assert r.stop_reason in STOP_REASONS


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", REGEXES)
def test_regex_generations_match(name, sampler, artifacts, gpt2):
    """Bounded regexes: every sample ends with EOS and fully matches under Python's re."""
    pattern = re.compile(REGEXES[name])
    for seed in SEEDS:
        r = generate(artifacts[name], model(seed), vocab=gpt2, max_tokens=80, seed=seed,
                     **SAMPLERS[sampler])
        for out in _results(r):
            _check_tokens(out, gpt2)
            assert out.stop_reason == "eos" and out.complete, (out.text, out.stop_reason)
            assert out.eos_token == GPT2_EOS
            assert pattern.fullmatch(out.data.decode("utf-8")), out.text


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", GBNF)
def test_recursive_grammar_generations_match(name, sampler, artifacts, gpt2):
    """Recursive GBNF grammars: EOS-ended outputs are sentences, cut ones viable prefixes."""
    from gramc.compiler.frontends.gbnf import parse_gbnf

    oracle = EarleyOracle(parse_gbnf(GBNF[name]))
    for seed in SEEDS:
        r = generate(artifacts[name], model(seed, eos_bias=6.0), vocab=gpt2, max_tokens=24,
                     seed=seed, **SAMPLERS[sampler])
        for out in _results(r):
            _check_tokens(out, gpt2)
            if out.stop_reason == "eos":
                assert out.complete and oracle.fullmatch(out.data), out.data
            else:
                assert out.stop_reason == "max_tokens" and len(out.tokens) == 24
                assert oracle.is_viable_prefix(out.data), out.data
                assert out.complete == oracle.fullmatch(out.data)


@pytest.fixture(scope="module")
def schema_artifact(gpt2):
    """One lazily bound artifact for every sampler (its bound states are shared)."""
    return gramc.compile(json.dumps(SCHEMA), format="json_schema", vocab=gpt2, lazy=True)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_json_schema_generations_validate(sampler, gpt2, schema_artifact):
    validated = 0
    for seed in SEEDS[:4]:
        r = generate(schema_artifact, model(seed, eos_bias=8.0), vocab=gpt2, max_tokens=120,
                     seed=seed, **SAMPLERS[sampler])
        for out in _results(r):
            _check_tokens(out, gpt2)
            assert out.stop_reason in ("eos", "max_tokens")
            if out.complete:  # EOS-ended, or cut by max_tokens where the document was complete
                jsonschema.validate(json.loads(out.data), SCHEMA)
                validated += 1
    assert validated >= 1


# ---------------------------------------------------------------- masks and EOS


@pytest.mark.parametrize("width", [50257, WIDTH, 65536])
def test_logits_wider_than_the_vocabulary_never_pick_padding(width, artifacts, gpt2):
    for kw in SAMPLERS.values():
        r = generate(artifacts["date"], model(1, width=width, pad_bias=1e4), vocab=gpt2,
                     seed=3, max_tokens=20, **kw)
        assert all(t < 50257 for t in r.tokens) and r.complete
        assert re.fullmatch(REGEXES["date"], r.text)


def test_logits_narrower_than_the_vocabulary_restrict_the_choice(gpt2, artifacts):
    # Scores for only the first 1000 ids: the rest count as not allowed (never indexed).
    r = generate(artifacts["words"], model(2, width=1000), vocab=gpt2, max_tokens=30,
                 temperature=1.0, seed=0)
    assert all(t < 1000 for t in r.tokens) and r.tokens
    # No EOS column: the loop still ends where the grammar leaves only EOS (jump-forward).
    assert r.stop_reason == "eos" and re.fullmatch(REGEXES["words"], r.text)


def test_eos_is_never_chosen_before_the_output_is_complete(gpt2, artifacts):
    # EOS gets a score far above everything: it must win exactly at the first complete point.
    r = generate(artifacts["words"], model(0, eos_bias=1e6), vocab=gpt2, max_tokens=30)
    assert r.stop_reason == "eos" and r.complete and r.eos_token == GPT2_EOS
    assert re.fullmatch(REGEXES["words"], r.text)
    prefixes = [b"".join(gpt2.tokens[t] for t in r.tokens[:i]).decode() for i in range(len(r.tokens))]
    assert not any(re.fullmatch(REGEXES["words"], p) for p in prefixes)  # EOS at the first chance
    assert GPT2_EOS not in r.tokens


def test_a_vocabulary_without_eos_ends_with_no_valid_token():
    vocab = gramc.Vocab.from_list(["a", "b", "ab", "c"])
    artifact = gramc.compile("(ab|c){2}", vocab=vocab)
    for seed in range(20):
        r = generate(artifact, lambda ids: np.random.default_rng(len(ids) + seed).normal(size=4),
                     vocab=vocab, temperature=1.0, seed=seed)
        assert r.stop_reason == "no_valid_token" and r.complete and r.eos_token is None
        assert re.fullmatch("(ab|c){2}", r.text)


def test_model_forbidding_every_allowed_token_is_no_valid_token(gpt2, artifacts):
    def logits(ids):
        x = np.zeros(WIDTH, dtype=np.float32)
        x[: 50257] = -np.inf
        return x

    r = generate(artifacts["date"], logits, vocab=gpt2)
    assert r.stop_reason == "no_valid_token" and not r.complete and r.tokens == []
    beam = generate(artifacts["date"], logits, vocab=gpt2, beam_size=2)
    assert beam.stop_reason == "no_valid_token" and beam.tokens == []


def test_nan_and_inf_scores(gpt2):
    vocab = gramc.Vocab.from_list(["a", "b", "<eos>"], special_ids=[2], eos_ids=[2])
    artifact = gramc.compile("[ab]{3}", vocab=vocab)
    r = generate(artifact, lambda ids: np.array([np.nan, 0.0, 0.0]), vocab=vocab, temperature=1, seed=0)
    assert r.text == "bbb"  # NaN is impossible, like -inf
    r = generate(artifact, lambda ids: np.array([np.inf, 0.0, 0.0]), vocab=vocab, temperature=1, seed=0)
    assert r.text == "aaa"  # +inf wins outright


# ---------------------------------------------------------------- stop sequences, max_tokens


def test_stop_sequences_cut_the_text(gpt2, artifacts):
    hits = 0
    for seed in range(30):
        r = generate(artifacts["words"], model(seed), vocab=gpt2, stop=[" ", "."],
                     temperature=1.0, seed=seed)
        assert r.stop_reason in ("stop_sequence", "eos")
        if r.stop_reason == "stop_sequence":
            hits += 1
            stop = r.stop_sequence.encode() if isinstance(r.stop_sequence, str) else r.stop_sequence
            i = r.data.find(stop)
            assert i >= 0 and r.text == r.data[:i].decode()
            assert re.fullmatch(r"[a-z]{1,6}", r.text)
            # the stop sequence ended generation at the first token that contained it
            assert r.data[:-len(gpt2.tokens[r.tokens[-1]])].find(stop) < 0
    assert hits == 30  # every sentence has a space or a period before it may end


def test_stop_sequence_options(gpt2, artifacts):
    r = generate(artifacts["record"], model(0), vocab=gpt2, stop='"age"', include_stop=True)
    assert r.stop_reason == "stop_sequence" and r.stop_sequence == '"age"'
    assert r.text == r.data.decode() and r.text.startswith('{"name": "')
    assert r.text.endswith(('"age"', '"age":'))  # the whole token that held the stop sequence
    # the stop sequence lies in forced tokens: no model call was needed after the name
    r2 = generate(artifacts["record"], model(0), vocab=gpt2, stop=[b'"age"', b"name"])
    assert r2.stop_sequence == b"name" and r2.text == '{"' and r2.model_calls == 0
    with pytest.raises(ValueError):
        generate(artifacts["record"], model(0), vocab=gpt2, stop=[""])


def test_stop_sequences_in_beam_search(gpt2, artifacts):
    r = generate(artifacts["words"], model(4), vocab=gpt2, stop=" ", beam_size=3)
    for out in r.beams:
        assert out.stop_reason in ("stop_sequence", "eos")
        if out.stop_reason == "stop_sequence":
            assert re.fullmatch(r"[a-z]{1,6}", out.text) and " " in out.data.decode()


def test_max_tokens(gpt2, artifacts):
    for n in (0, 1, 5, 17):
        for kw in SAMPLERS.values():
            r = generate(artifacts["arith"], model(n, eos_bias=-1e9), vocab=gpt2, max_tokens=n,
                         seed=0, **kw)
            assert len(r.tokens) == n and r.stop_reason == "max_tokens"
    with pytest.raises(ValueError):
        generate(artifacts["nested"], model(0), vocab=gpt2, max_tokens=-1)


# ---------------------------------------------------------------- jump-forward


def test_jump_forward_emits_forced_tokens_without_model_calls(gpt2, artifacts):
    calls = []

    def logits(ids):
        calls.append(list(ids))
        return model(0)(ids)

    prompt = [464, 1438]
    r = generate(artifacts["record"], logits, vocab=gpt2, prompt=prompt, temperature=1.0, seed=1)
    assert re.fullmatch(REGEXES["record"], r.text)
    assert r.model_calls == len(calls) and r.forced_tokens > 0
    assert r.sampled_tokens == r.model_calls
    # every token is forced or sampled; a sampled EOS is counted but not in tokens
    assert len(r.tokens) <= r.forced_tokens + r.sampled_tokens <= len(r.tokens) + 1
    assert gpt2.tokens[r.tokens[0]] == b'{"'  # the opening is forced: greedy longest tokens
    assert all(c[:2] == prompt and c[2:] == r.tokens[: len(c) - 2] for c in calls)

    calls.clear()
    off = generate(artifacts["record"], logits, vocab=gpt2, prompt=prompt, temperature=1.0,
                   seed=1, jump_forward=False)
    assert off.forced_tokens == 0 and off.model_calls == len(calls) > r.model_calls
    assert off.model_calls == len(off.tokens) + (off.stop_reason == "eos")
    assert re.fullmatch(REGEXES["record"], off.text)


def test_trace_reports_every_token(gpt2, artifacts):
    steps = []
    r = generate(artifacts["record"], model(3), vocab=gpt2, trace=steps.append, seed=2, temperature=1)
    emitted = [s.token for s in steps if s.token is not None]
    assert emitted == r.tokens + [r.eos_token]
    assert sum(s.forced for s in steps[:-1]) == r.forced_tokens
    assert all(s.allowed > 0 for s in steps if not s.forced)


# ---------------------------------------------------------------- beam search


SMALL = ["a", "b", "ab", "ba", "bb", "c", "<eos>"]


def _small():
    vocab = gramc.Vocab.from_list(SMALL, special_ids=[6], eos_ids=[6])
    return vocab, gramc.compile("(a|b)(ab|b)*c?", vocab=vocab)


def _small_model(seed):
    def logits(ids):
        return np.random.default_rng(hash((seed, tuple(ids))) & 0xFFFF).normal(size=8) * 2
    return logits


def _oracle_mask(prefix: str, vocab) -> np.ndarray:
    """Allowed ids by brute force with the `regex` module's partial matching."""
    pat = regex.compile("(a|b)(ab|b)*c?")
    mask = np.zeros(8, dtype=bool)
    for t, tok in enumerate(SMALL[:6]):
        if pat.fullmatch(prefix + tok, partial=True):
            mask[t] = True
    mask[6] = bool(pat.fullmatch(prefix))
    return mask


def _exhaustive(seed, vocab, max_len, length_penalty):
    """Every EOS-ended token sequence shorter than max_len, scored with independent masks."""
    f = _small_model(seed)
    best = []
    frontier = [((), "", 0.0)]
    for _ in range(max_len):
        nxt = []
        for ids, text, lp in frontier:
            mask = _oracle_mask(text, vocab)
            x = f(list(ids))
            allowed = np.flatnonzero(mask)
            logp = x[allowed] - np.log(np.exp(x[allowed] - x[allowed].max()).sum()) - x[allowed].max()
            for t, l in zip(allowed.tolist(), logp.tolist()):
                if t == 6:
                    best.append(((lp + l) / (len(ids) + 1) ** length_penalty, ids, text))
                else:
                    nxt.append((ids + (t,), text + SMALL[t], lp + l))
        frontier = nxt
    return sorted(best, reverse=True)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0])
def test_wide_beam_search_finds_the_exhaustive_optimum(seed, length_penalty):
    vocab, artifact = _small()
    expected = _exhaustive(seed, vocab, 4, length_penalty)
    # jump-forward off: the exhaustive search calls the "model" for every token
    assert len(expected) < 500
    r = generate(artifact, _small_model(seed), vocab=vocab, beam_size=500, max_tokens=4,
                 length_penalty=length_penalty, jump_forward=False)
    eos_ended = [b for b in r.beams if b.stop_reason == "eos"]
    assert tuple(eos_ended[0].tokens) == expected[0][1]
    assert math.isclose(eos_ended[0].score, expected[0][0], rel_tol=1e-9, abs_tol=1e-12)
    assert [b.score for b in r.beams] == sorted((b.score for b in r.beams), reverse=True)


def test_beams_have_their_own_state(gpt2):
    # Two families of outputs that constrain what follows differently: each beam's matcher
    # must follow its own tokens, or a "(" beam would be allowed a "]" and vice versa.
    artifact = gramc.compile(r"\((a|b){2,4}\)|\[(c|d){2,4}\]", vocab=gpt2)
    for seed in range(10):
        r = generate(artifact, model(seed, eos_bias=0), vocab=gpt2, beam_size=4, max_tokens=12)
        assert len(r.beams) == 4
        for out in r.beams:
            assert re.fullmatch(r"\((a|b){2,4}\)|\[(c|d){2,4}\]", out.text) and out.stop_reason == "eos"
        assert len({tuple(b.tokens) for b in r.beams}) == 4


def test_beam_search_keeps_dead_ends_as_finished():
    # "x" leads to a dead end with this vocabulary ("y" is missing): that beam is finished
    # with no_valid_token, ranked with the rest, and the live ones go on.
    vocab = gramc.Vocab.from_list(["x", "z", "zz", "<eos>"], special_ids=[3], eos_ids=[3])
    artifact = gramc.compile("xy|z+", vocab=vocab)
    favour_x = lambda ids: np.array([5.0, 0.0, 0.0, -1.0]) if not ids else np.array([0.0, 0.0, 0.0, 1.0])
    r = generate(artifact, favour_x, vocab=vocab, beam_size=3, max_tokens=3)
    reasons = {tuple(b.tokens): b.stop_reason for b in r.beams}
    assert reasons[(0,)] == "no_valid_token"
    assert not next(b for b in r.beams if b.tokens == [0]).complete
    assert all(re.fullmatch("z+", b.text) for b in r.beams if b.stop_reason == "eos")
    assert r.beams[0].tokens == [0]  # its log-prob is highest, so it ranks first


def test_beam_search_does_not_touch_the_given_matcher(gpt2, artifacts):
    m = artifacts["words"].matcher()
    m.commit_token(gpt2.tokens.index(b"hello"))
    before = m.allowed_tokens().tolist()
    r = generate(m, model(0), vocab=gpt2, beam_size=2)
    assert m.allowed_tokens().tolist() == before and not m.is_finished()
    assert re.fullmatch(REGEXES["words"], "hello" + r.text)
    # sampling continues from the matcher's state, and advances it
    r2 = generate(m, model(0), vocab=gpt2)
    assert re.fullmatch(REGEXES["words"], "hello" + r2.text) and m.is_finished()


# ---------------------------------------------------------------- samplers, debug helper


def test_sampler_top_k_and_top_p_restrict_choices():
    rng = np.random.default_rng(0)
    ids = np.arange(10)
    logits = np.arange(10, dtype=np.float64)  # 9 is the most likely
    picks = {int(ids[Sampler(1.0, top_k=2).choose(ids, logits, rng)]) for _ in range(200)}
    assert picks == {8, 9}
    picks = {int(ids[Sampler(1.0, top_p=0.5).choose(ids, logits, rng)]) for _ in range(200)}
    assert picks <= {8, 9} and 9 in picks  # p(9) ~ 0.63 >= 0.5: usually only 9
    assert {Sampler(1.0, top_p=0.1).choose(ids, logits, rng) for _ in range(50)} == {9}
    assert Sampler().choose(ids, logits, rng) == 9
    counts = np.bincount([Sampler(1.0).choose(ids, logits, rng) for _ in range(4000)], minlength=10)
    expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    assert np.abs(counts / 4000 - expected).max() < 0.03
    for bad in (dict(temperature=-1), dict(top_k=-1), dict(top_p=0), dict(top_p=1.5)):
        with pytest.raises(ValueError):
            Sampler(**bad)


def test_seeded_sampling_is_reproducible(gpt2, artifacts):
    a = [generate(artifacts["email"], model(0), vocab=gpt2, temperature=1.0, seed=7).tokens for _ in range(2)]
    b = generate(artifacts["email"], model(0), vocab=gpt2, temperature=1.0,
                 seed=np.random.default_rng(7)).tokens
    assert a[0] == a[1] == b


def test_allowed_text_debug_helper(gpt2, artifacts):
    m = artifacts["record"].matcher()
    m.commit_tokens(artifacts["record"].matcher().forced_tokens())
    pairs = allowed_text(m, gpt2, limit=None)
    prefix = '{"name": "'
    assert all(regex.fullmatch(REGEXES["record"], prefix + gpt2.tokens[t].decode(), partial=True)
               and text == repr(gpt2.tokens[t])[2:-1] for t, text in pairs)
    assert len(pairs) == len(m.allowed_tokens())
    scores = np.zeros(WIDTH)
    best = pairs[-1][0]
    scores[best] = 5
    assert allowed_text(m, gpt2, limit=1, scores=scores) == [(best, pairs[-1][1])]
    line = format_allowed(m, gpt2, limit=3)
    assert line.startswith(f"{len(pairs)} allowed: ") and "more)" in line
    done = artifacts["date"].matcher()
    ids = [gpt2.tokens.index(t) for t in (b"20", b"24", b"-", b"01", b"-", b"31")]
    assert done.commit_tokens(ids) == 6
    assert allowed_text(done, gpt2) == [(GPT2_EOS, f"<eos:{GPT2_EOS}>")]
    assert "[complete]" in format_allowed(done)  # gpt2 is found from the artifact


def test_vocabulary_resolution(gpt2, artifacts):
    vocab = gramc.Vocab.from_list(["a", "b"])
    artifact = gramc.compile("[ab]+", vocab=vocab)
    # a custom vocabulary cannot be found from the artifact: text needs vocab=
    r = generate(artifact, lambda ids: np.zeros(2), max_tokens=3)
    assert r.tokens == [0, 0, 0] and r.data == b""
    with pytest.raises(VocabularyError):
        generate(artifact, lambda ids: np.zeros(2), stop="b")
    with pytest.raises(VocabularyError):
        generate(artifact, lambda ids: np.zeros(2), vocab=gpt2)
    # PDA artifacts store their token bytes
    r = generate(gramc.compile(GBNF["nested"], format="gbnf", vocab=vocab.__class__.from_list(
        ["[", "]", "1", ", ", "<e>"], special_ids=[4], eos_ids=[4])), lambda ids: np.array([0.0, 1, 0, 0, 0]), max_tokens=5)
    assert r.text == "[]"


def test_logits_fn_shapes(gpt2, artifacts):
    f = model(0)
    r = generate(artifacts["date"], lambda ids: f(ids)[None, :], vocab=gpt2)  # [1, V] is fine
    assert re.fullmatch(REGEXES["date"], r.text)
    r = generate(artifacts["date"], lambda ids: f(ids).tolist(), vocab=gpt2)  # a list too
    assert re.fullmatch(REGEXES["date"], r.text)
    with pytest.raises(ValueError):
        generate(artifacts["date"], lambda ids: np.zeros((2, 5)), vocab=gpt2)
    with pytest.raises(ValueError):
        generate(artifacts["date"], f, vocab=gpt2, beam_size=0)


def test_generation_counts_add_up(gpt2, artifacts):
    for name, kw in itertools.product(["record", "nested"], [dict(), dict(temperature=1.0, seed=1)]):
        r = generate(artifacts[name], model(5), vocab=gpt2, max_tokens=30, **kw)
        assert r.forced_tokens + r.sampled_tokens >= len(r.tokens)
        assert r.model_calls == r.sampled_tokens
        assert r.logprob <= 0 and r.score == r.logprob


def test_demo_without_torch_says_what_to_install(monkeypatch):
    import sys

    from click.testing import CliRunner

    from gramc.cli.main import main

    monkeypatch.setitem(sys.modules, "torch", None)
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 7  # BackendUnavailableError
    assert "pip install 'gramc[transformers]' torch" in result.output


def test_import_gramc_loads_no_model_library():
    import subprocess
    import sys

    code = ("import sys, gramc, gramc.generation, gramc.integrations, gramc.cli.main; "
            "import gramc.integrations.llama_cpp, gramc.integrations.vllm, gramc.integrations.transformers; "
            "print([m for m in ('torch', 'transformers', 'llama_cpp', 'vllm') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
